"""kafka-python 3.x compat scenario (see scenario_common.py). Usage: BOOTSTRAP TOPIC."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from scenario_common import (
    PARTITIONS,
    Rec,
    base_timestamp,
    check_consumed,
    check_metadata,
    check_offsets,
    check_produced,
    expect,
    offset_times,
    plan,
    retry_until,
    run,
    summary,
)

CLIENT = "kafka-python"


def scenario(bootstrap: str, topic: str) -> dict[str, object]:
    common = {"bootstrap_servers": bootstrap, "request_timeout_ms": 15000}
    admin = KafkaAdminClient(client_id="compat-kafka-python-admin", **common)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], timeout_ms=15000)

        def describe() -> tuple[dict[int, int], set[int]] | None:
            (t,) = admin.describe_topics([topic])
            expect(t["error_code"] == 0, f"DescribeTopics error {t['error_code']} for {topic}")
            leaders = {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            if len(leaders) != PARTITIONS or any(v < 0 for v in leaders.values()):
                return None
            brokers = {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
            return leaders, brokers

        leaders, brokers = retry_until(describe, "topic metadata")  # type: ignore[misc]
        check_metadata(leaders, brokers)
    finally:
        admin.close()

    recs = plan(base_timestamp())
    producer = KafkaProducer(
        client_id="compat-kafka-python-producer", acks="all", enable_idempotence=False, linger_ms=5, **common
    )
    try:
        futures = [
            producer.send(
                topic,
                key=r.key.encode(),
                value=r.value.encode(),
                timestamp_ms=r.ts,
                headers=[(k, v.encode()) for k, v in r.headers.items()],
            )
            for r in recs
        ]
        producer.flush(timeout=30)
        for r, f in zip(recs, futures, strict=True):
            md = f.get(timeout=30)
            r.partition, r.offset = md.partition, md.offset
    finally:
        producer.close(timeout=10)
    check_produced(recs)

    consumer = KafkaConsumer(
        client_id="compat-kafka-python-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
        **common,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        consumed: list[Rec] = []
        deadline = time.monotonic() + 30
        while len(consumed) < len(recs) and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    consumed.append(
                        Rec(
                            i=-1,
                            key=m.key.decode(),
                            value=m.value.decode(),
                            ts=m.timestamp,
                            headers={k: v.decode() for k, v in m.headers},
                            partition=tp.partition,
                            offset=m.offset,
                        )
                    )
        check_consumed(recs, consumed)

        earliest = {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()}
        latest = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
        by_time: dict[int, dict[int, int | None]] = {}
        for t in offset_times(recs):
            res = consumer.offsets_for_times({tp: t for tp in tps})
            by_time[t] = {tp.partition: (None if v is None else v.offset) for tp, v in res.items()}
        check_offsets(recs, earliest, latest, by_time)
    finally:
        consumer.close()
    return summary(CLIENT, recs)


if __name__ == "__main__":
    run(CLIENT, scenario)
