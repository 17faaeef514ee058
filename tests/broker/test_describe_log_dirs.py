"""DescribeLogDirs (key 35) v1-v4 on the wire against a real `samsa serve`: sizes equal the segment files
on disk, the topic filter, and v4's volume figures."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch


def create_topic(conn: Connection, name: str, partitions: int) -> None:
    response = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                             "assignments": (), "configs": ()}],
                                 "timeout": 10000, "validate_only": False})
    assert response.topics[0].error_code.value == 0


def produce(conn: Connection, topic: str, partition: int, count: int, value_bytes: int) -> None:
    batch = encode_batch([(None, bytes(value_bytes), ()) for _ in range(count)], timestamp_ms=int(time.time() * 1000))
    response = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    assert response.responses[0].partition_responses[0].error_code.value == 0


def describe(conn: Connection, version: int, topics: Any) -> Any:
    return conn.request(35, {"topics": topics}, version=version)


def sizes(response: Any) -> dict[tuple[str, int], int]:
    (result,) = response.results
    assert result.error_code.value == 0
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


def on_disk(data_dir: os.PathLike[str], topic: str, partition: int) -> int:
    directory = os.path.join(data_dir, f"{topic}-{partition}")
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f.endswith(".log"))


def test_advertised_v1_to_v5(samsa: Any) -> None:
    with samsa.connect() as conn:
        assert conn.versions[35] == (1, 5)  # as Kafka 4.4.0


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_sizes_match_the_segment_files_and_the_filter_applies(samsa: Any, version: int) -> None:
    topic = f"dirs-v{version}"
    with samsa.connect() as conn:
        create_topic(conn, topic, 2)
        produce(conn, topic, 0, 20, 500)
        every = sizes(describe(conn, version, None))
        assert every[(topic, 0)] == on_disk(samsa.data_dir, topic, 0) > 20 * 500
        assert every[(topic, 1)] == 0
        assert not any(t == "__cluster_metadata" for t, _ in every)
        only = describe(conn, version, [{"topic": topic, "partitions": [0]},
                                        {"topic": "no-such-topic", "partitions": [0]}])
        assert sizes(only) == {(topic, 0): every[(topic, 0)]}  # an unknown partition is left out, as in Kafka
        (result,) = only.results
        assert result.log_dir == os.path.abspath(samsa.data_dir)
        assert [p.offset_lag for t in result.topics for p in t.partitions] == [0]
        assert [p.is_future_key for t in result.topics for p in t.partitions] == [False]
        st = os.statvfs(samsa.data_dir)
        if version >= 4:
            assert result.total_bytes == st.f_blocks * st.f_frsize
            assert 0 < result.usable_bytes <= result.total_bytes
        else:
            assert not hasattr(result, "total_bytes")  # not in the schema before v4
        if version >= 5:
            assert result.is_cordoned is False  # Samsa does not cordon its log directory (cordoned.log.dirs)


def test_no_topics_requested_gives_an_empty_dir(samsa: Any) -> None:
    with samsa.connect() as conn:
        create_topic(conn, "dirs-empty", 1)
        (result,) = describe(conn, 4, []).results
        assert result.error_code.value == 0 and list(result.topics) == []


def test_alter_replica_log_dirs_with_one_directory(samsa: Any) -> None:
    """AlterReplicaLogDirs (KIP-113): the one log directory is a no-op NONE, any other path LOG_DIR_NOT_FOUND, an
    unknown partition UNKNOWN_TOPIC_OR_PARTITION (the differential scenario alter_replica_log_dirs: as Kafka 4.4.0)."""
    topic = "dirs-alter"
    with samsa.connect() as conn:
        create_topic(conn, topic, 1)
        log_dir = os.path.abspath(samsa.data_dir)
        for version in (1, 2):
            r = conn.request(34, {"dirs": [
                {"path": log_dir, "topics": [{"name": topic, "partitions": [0, 5]}]},
                {"path": "/elsewhere", "topics": [{"name": "other", "partitions": [0]}]}]}, version=version)
            got = {(x.topic_name, p.partition_index): p.error_code.value for x in r.results for p in x.partitions}
            assert got == {(topic, 0): 0, (topic, 5): 3, ("other", 0): 57}
        assert sizes(describe(conn, 4, None))[(topic, 0)] == 0  # nothing moved, nothing lost
