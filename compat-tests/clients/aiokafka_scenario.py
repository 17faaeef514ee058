"""aiokafka compat scenario (see scenario_common.py). Usage: BOOTSTRAP TOPIC."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from scenario_common import (
    PARTITIONS,
    Mismatch,
    Rec,
    base_timestamp,
    check_consumed,
    check_metadata,
    check_offsets,
    check_produced,
    offset_times,
    plan,
    run,
    summary,
)

CLIENT = "aiokafka"


async def metadata(admin: AIOKafkaAdminClient, topic: str) -> tuple[dict[int, int], set[int]]:
    deadline = time.monotonic() + 15
    last: object = None
    while time.monotonic() < deadline:
        try:
            (t,) = await admin.describe_topics([topic])
            leaders = {p["partition"]: p["leader"] for p in t["partitions"]}
            if t["error_code"] == 0 and len(leaders) == PARTITIONS and min(leaders.values()) >= 0:
                cluster = await admin.describe_cluster()
                return leaders, {b["node_id"] for b in cluster["brokers"]}
            last = t
        except Exception as e:  # retried: metadata right after CreateTopics
            last = e
        await asyncio.sleep(0.2)
    raise Mismatch(f"topic metadata not ready within 15s (last: {last!r})")


async def main(bootstrap: str, topic: str) -> dict[str, object]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-aiokafka-admin",
                                request_timeout_ms=15000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                                  timeout_ms=15000)
        leaders, brokers = await metadata(admin, topic)
        check_metadata(leaders, brokers)
    finally:
        await admin.close()

    recs = plan(base_timestamp())
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="compat-aiokafka-producer",
                                acks="all", enable_idempotence=False, linger_ms=5, request_timeout_ms=15000)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=r.key.encode(),
                value=r.value.encode(),
                timestamp_ms=r.ts,
                headers=[(k, v.encode()) for k, v in r.headers.items()],
            )
            for r in recs
        ]
        for r, f in zip(recs, futures, strict=True):
            md = await asyncio.wait_for(f, 30)
            r.partition, r.offset = md.partition, md.offset
    finally:
        await producer.stop()
    check_produced(recs)

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="compat-aiokafka-consumer",
                                group_id=None, enable_auto_commit=False, auto_offset_reset="none",
                                request_timeout_ms=15000)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        consumed: list[Rec] = []
        deadline = time.monotonic() + 30
        while len(consumed) < len(recs) and time.monotonic() < deadline:
            for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                consumed += [
                    Rec(i=-1, key=m.key.decode(), value=m.value.decode(), ts=m.timestamp,
                        headers={k: v.decode() for k, v in m.headers}, partition=tp.partition, offset=m.offset)
                    for m in msgs
                ]
        check_consumed(recs, consumed)

        earliest = {tp.partition: o for tp, o in (await consumer.beginning_offsets(tps)).items()}
        latest = {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
        by_time: dict[int, dict[int, int | None]] = {}
        for t in offset_times(recs):
            res = await consumer.offsets_for_times({tp: t for tp in tps})
            by_time[t] = {tp.partition: (None if v is None else v.offset) for tp, v in res.items()}
        check_offsets(recs, earliest, latest, by_time)
    finally:
        await consumer.stop()
    return summary(CLIENT, recs)


def scenario(bootstrap: str, topic: str) -> dict[str, object]:
    return asyncio.run(main(bootstrap, topic))


if __name__ == "__main__":
    run(CLIENT, scenario)
