"""Differential scenarios of the newest API versions Kafka 4.1.2 speaks: Produce v13 and Fetch v18 by topic id
(KIP-516), DescribeTopicPartitions (KIP-966), ListConfigResources (KIP-1142), DescribeCluster v2 (fenced
brokers), AlterPartitionReassignments v1, and ListOffsets / OffsetCommit / OffsetFetch at their newest."""

from __future__ import annotations

import uuid
from typing import Any

from differential.framework import Ctx, err, records_of, scenario


def _partitions(r: Any) -> list[dict[str, Any]]:
    return [{"index": p.index, "error": err(p), "base_offset": p.base_offset,
             "log_start_offset": p.log_start_offset} for p in r.partition_responses]


@scenario
def produce_fetch_by_topic_id(ctx: Ctx) -> Any:
    """Produce v13 names the topic by id: a known id, an unknown one, the zero id; Fetch v18 reads it back."""
    c = ctx.connect()
    topic = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, topic, 2))}
    topic_id = ctx.topic_id(c, topic)
    batch = ctx.batch([(b"k", b"v", ())])

    def produce(key: uuid.UUID | None, partitions: list[int]) -> Any:
        r = c.request(0, {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
            {"topic_id": key, "partition_data": [{"index": i, "records": batch} for i in partitions]}]}, version=13)
        t = r.responses[0]
        return {"topic_id_echoed": t.topic_id == key, "partitions": _partitions(t)}

    out["known"] = produce(topic_id, [0, 1, 7])
    out["unknown_id"] = produce(uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), [0])
    out["zero_id"] = produce(None, [0])
    p = ctx.fetch(c, topic, 0, 0, version=18)
    out["fetch_v18"] = {"error": err(p), "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset, "batches": records_of(p.records)}
    return out
