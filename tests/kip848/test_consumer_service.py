"""The consumer group in the coordinator's shell, in one process: a heartbeat whose records the log refused
leaves the group as it was (and a restart shows the same), subscribed offsets never expire while the group
has members, and OffsetDelete refuses a subscribed topic."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.group.coordinator import OffsetAndMetadata
from samsa.broker.handlers.consumer_group_heartbeat import handle_consumer_group_heartbeat
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import RequestHeader, request_class

OVERRIDES = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
             "offsets.retention.minutes": "1", "group.consumer.assignment.interval.ms": "0"}
G = "g"
FULL_DISK_RESERVE_BYTES = 1 << 62


def start(tmp_path: Path) -> Broker:
    broker = Broker(BrokerConfig(overrides=OVERRIDES, data_dir=tmp_path / "data"))
    for name in ("t", "other"):
        if name not in broker.image.topics_by_name:
            (created,) = broker.controller.create_topics([TopicSpec(name, 2, 1)], validate_only=False).result()
            assert created.error_code == ErrorCode.none
    for _ in range(100):
        if broker.groups.coordinator_error(G) == ErrorCode.none:
            return broker
        time.sleep(0.01)
    raise AssertionError("the group coordinator never became available")


def run(make: Callable[[], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        return await make()
    return anyio.run(main)


def heartbeat(broker: Broker, member_id: str, epoch: int, owned: Any = None) -> Any:
    request = build(request_class(68, 1), {
        "group_id": G, "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 30000 if epoch == 0 else -1, "subscribed_topic_names": ["t"] if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else owned})
    ctx = RequestContext(header=RequestHeader(68, 1, 1, "test", 0), broker=broker, client_host="127.0.0.1",
                         now_ms=int(time.time() * 1000))
    return run(lambda: handle_consumer_group_heartbeat(request, ctx))


def test_a_heartbeat_the_log_refused_is_reverted(tmp_path: Path) -> None:
    broker = start(tmp_path)
    a = heartbeat(broker, "a", 0)
    assert a.error_code == ErrorCode.none and a.member_epoch == 2  # a group starts at epoch 1 (Kafka 4.3+)
    broker.log_manager.disk_guard.min_free_bytes = FULL_DISK_RESERVE_BYTES
    refused = heartbeat(broker, "b", 0)
    assert refused.error_code == ErrorCode.not_coordinator
    group = broker.groups.consumer.groups[G]
    assert set(group.members) == {"a"} and group.group_epoch == 2
    broker.log_manager.disk_guard.min_free_bytes = 0
    b = heartbeat(broker, "b", 0)
    assert b.error_code == ErrorCode.none and b.member_epoch == 3
    broker.close()
    broker = start(tmp_path)
    group = broker.groups.consumer.groups[G]
    assert set(group.members) == {"a", "b"} and group.group_epoch == 3
    broker.close()


def test_subscribed_offsets_do_not_expire_and_cannot_be_deleted(tmp_path: Path) -> None:
    broker = start(tmp_path)
    assert heartbeat(broker, "a", 0).error_code == ErrorCode.none
    groups = broker.groups
    long_ago = int(time.time() * 1000) - 3_600_000
    old = OffsetAndMetadata(3, -1, "", long_ago, None)
    groups.coordinator.commit_offsets(G, "", {("t", 0): old, ("other", 0): old}, long_ago)
    groups.persist()
    assert groups.expire_offsets(int(time.time() * 1000)) == 1  # only the unsubscribed topic's
    assert set(groups.committed_offsets(G)) == {("t", 0)}
    error, per_partition = groups.delete_offsets(G, [("t", 0)], int(time.time() * 1000))
    assert error == ErrorCode.none and per_partition == {("t", 0): ErrorCode.group_subscribed_to_topic}
    broker.close()
