"""Raw-protocol probes the multi-node benchmarks share (bench/quorum, bench/replication): the same
requests go to Samsa and to Kafka, through broker/client.py."""

from __future__ import annotations

import time
from collections.abc import Callable

from samsa.broker.client import Connection, KafkaClientError

REQUEST_TIMEOUT_S = 5.0


def connect(bootstrap: str, client_id: str = "samsa-bench") -> Connection:
    host, _, port = bootstrap.rpartition(":")
    return Connection(host, int(port), client_id=client_id, timeout_s=REQUEST_TIMEOUT_S)


def wait_for(what: Callable[[], bool], timeout_s: float, poll_s: float = 0.02) -> float | None:
    """Seconds until `what()` held, or None if it did not within `timeout_s`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if what():
            return time.monotonic() - start
        time.sleep(poll_s)
    return None


def quorum_leader_and_epoch(bootstrap: str) -> tuple[int, int] | None:
    """DescribeQuorum through a broker listener: (leader id, epoch), or None if unknown/unreachable."""
    try:
        with connect(bootstrap) as c:
            r = c.request(55, {"topics": [{"topic_name": "__cluster_metadata",
                                           "partitions": [{"partition_index": 0}]}]})
    except (OSError, KafkaClientError):
        return None
    if r.error_code.value != 0 or not r.topics:
        return None
    p = r.topics[0].partitions[0]
    if p.error_code.value != 0 or p.leader_id < 0:
        return None
    return int(p.leader_id), int(p.leader_epoch)
