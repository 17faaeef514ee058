"""Followers copy large batches from the segment files (FileRecords over sendfile), within
replica.fetch.response.max.bytes, and every replica ends up with the same bytes (issue 15 part 4)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from cluster_harness import Cluster, unique, wait_for

from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

MIB = 1024 * 1024


@pytest.mark.timeout(240)
def test_followers_copy_megabyte_batches_in_bounded_responses(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=(f"replica.fetch.response.max.bytes={3 * MIB}",
                                         f"replica.fetch.max.bytes={MIB}"))
    topic = unique("bigrepl")
    with cluster.connect(cluster.node_ids[0], 30) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": 2, "replication_factor": 3, "assignments": (), "configs": ()}]})
        assert r.topics[0].error_code == ErrorCode.none, r
    leaders = wait_for("leaders", lambda: (ls := cluster.leaders(cluster.node_ids[0], topic)) and len(ls) == 2 and ls,
                       30)[0]
    batch = encode_batch([(None, b"r" * 1000, ())] * 1000, timestamp_ms=int(time.time() * 1000))  # ~1 MB
    for partition, (leader, _) in leaders.items():
        with cluster.connect(leader, 30) as conn:
            for _ in range(12):
                r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
                part = r.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.none, part

    def same_bytes() -> bool | None:
        for p in range(2):
            logs = {n: b"".join(f.read_bytes() for f in sorted(
                (cluster.plan.node(n).data_dir / f"{topic}-{p}").glob("*.log"))) for n in cluster.node_ids}
            if len(set(logs.values())) != 1 or len(next(iter(logs.values()))) < 12 * len(batch):
                return None
        return True

    wait_for("identical replicas", same_bytes, 60)
