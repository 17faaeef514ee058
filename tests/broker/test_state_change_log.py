"""The state-change log: what an operator sees when topics, partition leaders, ISRs and brokers change, read
off two metadata images (broker/state_change_log.py), and logged by the active controller only."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from samsa.broker.state_change_log import log_state_changes, state_changes
from samsa.kproto.records import encode_batch

TID = "00000000-0000-0000-0000-000000000001"


def _with_topic() -> MetadataImage:
    return MetadataImage().apply([
        RegisterBrokerRecord(1, 10, "a", "h", 9092, None, False),
        RegisterBrokerRecord(2, 11, "b", "h", 9093, None, False),
        TopicRecord("orders", TID),
        PartitionRecord(TID, 0, (1, 2), (1, 2), 1, 0, 0),
        PartitionRecord(TID, 1, (2, 1), (2, 1), 2, 0, 0),
    ], 1)


def test_topic_created_and_deleted() -> None:
    before = MetadataImage().apply([RegisterBrokerRecord(1, 10, "a", "h", 9092, None, False),
                                    RegisterBrokerRecord(2, 11, "b", "h", 9093, None, False)], 0)
    after = before.apply([TopicRecord("orders", TID), PartitionRecord(TID, 0, (1, 2), (1, 2), 1, 0, 0),
                          PartitionRecord(TID, 1, (2, 1), (2, 1), 2, 0, 0)], 1)
    assert list(state_changes(before, after)) == [
        f"Created topic orders with topic ID {TID}, 2 partition(s) and replication factor 2"]
    gone = after.apply([RemoveTopicRecord(TID)], 2)
    assert list(state_changes(after, gone)) == [f"Deleted topic orders with topic ID {TID} and 2 partition(s)"]


def test_leader_move_and_isr_shrink_name_old_and_new() -> None:
    image = _with_topic()
    # broker 1 fenced: the controller moves partition 0's leadership to 2 and drops 1 from both ISRs
    after = image.apply([BrokerRegistrationChangeRecord(1, 10, True),
                         PartitionChangeRecord(TID, 0, (2,), 2, None),
                         PartitionChangeRecord(TID, 1, (2,), None, None)], 2)
    assert list(state_changes(image, after)) == [
        "Partition orders-0: leader moved from 1 to 2 at leader epoch 1 (was 0)",
        "Partition orders-0: ISR shrunk from [1, 2] to [2] at leader epoch 1, partition epoch 1",
        "Partition orders-1: ISR shrunk from [2, 1] to [2] at leader epoch 0, partition epoch 1",
        "Broker 1 fenced (broker epoch 10)",
    ]
    back = after.apply([BrokerRegistrationChangeRecord(1, 10, False),
                        PartitionChangeRecord(TID, 1, (2, 1), None, None)], 3)
    assert list(state_changes(after, back)) == [
        "Partition orders-1: ISR expanded from [2] to [2, 1] at leader epoch 0, partition epoch 2",
        "Broker 1 unfenced (broker epoch 10)",
    ]
    offline = back.apply([PartitionChangeRecord(TID, 0, (), -1, None)], 4)
    assert next(state_changes(back, offline)) == (
        "Partition orders-0: went offline (no leader) at leader epoch 2 (was 1)")


def test_broker_registration_and_unregistration() -> None:
    image = _with_topic()
    after = image.apply([RegisterBrokerRecord(3, 12, "c", "h3", 9094, None, True), UnregisterBrokerRecord(2, 11)], 2)
    assert list(state_changes(image, after)) == [
        "Registered broker 3 at h3:9094 with broker epoch 12 (fenced)", "Unregistered broker 2 (broker epoch 11)"]


def test_an_unrelated_change_logs_nothing() -> None:
    image = _with_topic()
    after = image.apply([], 2)
    assert list(state_changes(image, after)) == []


def test_logged_at_info_on_the_state_change_logger(caplog: pytest.LogCaptureFixture) -> None:
    before = MetadataImage()
    after = _with_topic()
    with caplog.at_level(logging.INFO, logger="samsa.state.change"):
        log_state_changes(before, after)
    assert [(r.name, r.levelno) for r in caplog.records] == [("samsa.state.change", logging.INFO)] * 3
    assert caplog.records[0].getMessage().startswith("Created topic orders")


# --- a real broker: each change an operator cares about is one JSON log line ------------------------------


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line and not line.startswith("$ ")]
    assert all({"timestamp", "level", "logger", "message"} <= line.keys() for line in lines)
    return lines


def _wait_logged(path: Path, needle: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(needle in str(line["message"]) for line in _json_lines(path)):
        assert time.monotonic() < deadline, f"never logged {needle!r}:\n{path.read_text()[-3000:]}"
        time.sleep(0.1)


def _produce(conn: Connection, topic: str) -> None:
    batch = encode_batch([(None, b"x" * 100, ())], timestamp_ms=int(time.time() * 1000))
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    assert r.responses[0].partition_responses[0].error_code.value == 0


def test_serve_logs_topic_group_and_retention_changes_once(tmp_path: Path) -> None:
    port = launcher.free_port()
    log_path = tmp_path / "samsa.log"
    served = launcher.start_serve(launcher.ServeOptions(
        data_dir=tmp_path / "data", port=port, extra_args=("--log-format", "json"),
        overrides=("group.initial.rebalance.delay.ms=0", "log.retention.check.interval.ms=200")), log_path)
    try:
        served.wait_listening()
        with Connection("127.0.0.1", port) as conn:
            r = conn.request(19, {"topics": [{"name": "st-a", "num_partitions": 1, "replication_factor": 1,
                                              "configs": [{"name": "segment.ms", "value": "100"},
                                                          {"name": "retention.ms", "value": "1000"}]}],
                                  "timeout": 10000})
            assert r.topics[0].error_code.value == 0
            for _ in range(3):  # a segment each: segment.ms rolls the next append
                _produce(conn, "st-a")
                time.sleep(0.3)
            _wait_logged(log_path, "st-a-0: deleted")
            for _ in range(200):  # FindCoordinator creates __consumer_offsets first
                if conn.request(10, {"key": "st-g", "key_type": 0}, version=3).error_code.value == 0:
                    break
                time.sleep(0.05)
            join = {"group_id": "st-g", "session_timeout": 30000, "rebalance_timeout": 20000, "member_id": "",
                    "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}]}
            first = conn.request(11, join, version=9)
            joined = conn.request(11, {**join, "member_id": first.member_id}, version=9)
            assert joined.error_code.value == 0 and joined.generation_id == 1
            r = conn.request(20, {"topic_names": ["st-a"], "timeout": 10000}, version=4)
            assert r.responses[0].error_code.value == 0
            _wait_logged(log_path, "Deleted topic st-a")
            _wait_logged(log_path, "group st-g: rebalance completed")
    finally:
        code = served.stop(15.0)
    assert code == 0, served.log_tail()
    messages = [str(line["message"]) for line in _json_lines(log_path)]

    def once(prefix: str) -> str:
        found = [m for m in messages if m.startswith(prefix)]
        assert len(found) == 1, (prefix, found)
        return found[0]

    assert once("Created topic st-a with topic ID ").endswith("1 partition(s) and replication factor 1")
    assert once("Deleted topic st-a with topic ID ").endswith("1 partition(s)")
    assert "generation 1 (range) with 1 member(s)" in once("group st-g: rebalance completed in ")
    # one line per retention pass that deleted something (segments expire one by one here): each names a new
    # log start offset
    retention = [m for m in messages if m.startswith("st-a-0: deleted ")]
    assert retention and all("due to retention time 1000ms breach; log start offset is now " in m for m in retention)
    starts = [int(m.rsplit(" ", 1)[1]) for m in retention]
    assert starts == sorted(set(starts)) and starts[-1] <= 3


def test_controllers_registered_and_unregistered() -> None:
    from samsa.broker.metadata.records import RegisterControllerRecord, UnregisterControllerRecord

    before = MetadataImage()
    after = before.apply([RegisterControllerRecord(2, "inc-2", "CONTROLLER://h:9094")], 0)
    assert list(state_changes(before, after)) == ["Registered controller 2 at CONTROLLER://h:9094 (incarnation inc-2)"]
    gone = after.apply([UnregisterControllerRecord(2)], 1)
    assert list(state_changes(after, gone)) == ["Unregistered controller 2"]
