"""confluent-kafka (librdkafka) compat scenario (see scenario_common.py). Usage: BOOTSTRAP TOPIC.

The producer uses ``partitioner=murmur2_random`` (the Java client's key hashing) instead of
librdkafka's default ``consistent_random`` (CRC32), so that every client in these tests maps a key
to the same partition. Offsets are listed twice, through the consumer (ListOffsets as librdkafka's
consumer sends it) and through ``AdminClient.list_offsets``; both must agree.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from scenario_common import (
    PARTITIONS,
    Rec,
    base_timestamp,
    check_consumed,
    check_max_timestamp,
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

CLIENT = "confluent-kafka"


def scenario(bootstrap: str, topic: str) -> dict[str, object]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "compat-confluent-admin"})
    fs = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                             operation_timeout=15, request_timeout=15)
    fs[topic].result(timeout=20)

    def describe() -> tuple[dict[int, int], set[int]] | None:
        md = admin.list_topics(topic=topic, timeout=10)
        t = md.topics[topic]
        if t.error is not None:
            return None
        leaders = {p.id: p.leader for p in t.partitions.values()}
        if len(leaders) != PARTITIONS or min(leaders.values()) < 0:
            return None
        return leaders, set(md.brokers)

    leaders, brokers = retry_until(describe, "topic metadata")  # type: ignore[misc]
    check_metadata(leaders, brokers)

    recs = plan(base_timestamp())
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": "compat-confluent-producer",
        "acks": "all",
        "enable.idempotence": True,  # InitProducerId + sequence numbers, as most users run it
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "message.timeout.ms": 30000,
    })
    errors: list[str] = []

    def delivered(rec: Rec):  # type: ignore[no-untyped-def]
        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(f"record {rec.i}: {err}")
            else:
                rec.partition, rec.offset = msg.partition(), msg.offset()
        return cb

    for r in recs:
        producer.produce(topic, key=r.key.encode(), value=r.value.encode(), timestamp=r.ts,
                         headers=[(k, v.encode()) for k, v in r.headers.items()], on_delivery=delivered(r))
        producer.poll(0)
    left = producer.flush(30)
    expect(left == 0 and not errors, f"produce failed: {left} undelivered, errors {errors}")
    check_produced(recs)

    # assign() and seek, no subscribe and no commits. librdkafka insists on a group.id even so (and
    # may look up its coordinator in the background); the group is never joined.
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "compat-confluent-unused",
        "client.id": "compat-confluent-consumer",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
    })
    try:
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumed: list[Rec] = []
        deadline = time.monotonic() + 30
        while len(consumed) < len(recs) and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=100, timeout=0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                consumed.append(Rec(
                    i=-1, key=m.key().decode(), value=m.value().decode(), ts=m.timestamp()[1],
                    headers={k: v.decode() for k, v in (m.headers() or [])},
                    partition=m.partition(), offset=m.offset(),
                ))
        check_consumed(recs, consumed)

        earliest, latest = {}, {}
        for p in range(PARTITIONS):
            earliest[p], latest[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        by_time: dict[int, dict[int, int | None]] = {}
        for t in offset_times(recs):
            res = consumer.offsets_for_times([TopicPartition(topic, p, t) for p in range(PARTITIONS)], timeout=10)
            # librdkafka reports "no such offset" as offset -1 (OFFSET_END)
            by_time[t] = {tp.partition: (None if tp.offset < 0 else tp.offset) for tp in res}
        check_offsets(recs, earliest, latest, by_time)
    finally:
        consumer.close()

    def admin_offsets(spec: OffsetSpec) -> dict[int, int | None]:
        fut = admin.list_offsets({TopicPartition(topic, p): spec for p in range(PARTITIONS)}, request_timeout=15)
        return {tp.partition: (None if f.result(timeout=20).offset < 0 else f.result(timeout=20).offset)
                for tp, f in fut.items()}

    check_offsets(
        recs,
        admin_offsets(OffsetSpec.earliest()),  # type: ignore[arg-type]
        admin_offsets(OffsetSpec.latest()),  # type: ignore[arg-type]
        {t: admin_offsets(OffsetSpec.for_timestamp(t)) for t in offset_times(recs)},
    )
    fut = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.max_timestamp() for p in range(PARTITIONS)},
                             request_timeout=15)
    infos = {tp.partition: f.result(timeout=20) for tp, f in fut.items()}
    check_max_timestamp(recs, {p: (None if i.offset < 0 else (i.offset, i.timestamp)) for p, i in infos.items()})
    return summary(CLIENT, recs)


if __name__ == "__main__":
    run(CLIENT, scenario)
