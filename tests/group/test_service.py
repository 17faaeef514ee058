"""The group coordinator's shell in one process, with appends to __consumer_offsets that fail: a change
whose record is not in the log is not in memory either (issue 15, part 5).

The disk is made "full" the way an operator meets it: free space under samsa.min.free.disk.bytes, so
the log refuses the append with KAFKA_STORAGE_ERROR (answered NOT_COORDINATOR, as Kafka's
GroupCoordinatorService.normalizeException does). A restart replays the log, so what it shows is what
was really stored.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.group.coordinator import TIMER_RESOLUTION_MS, JoinRequest
from samsa.broker.group.service import OFFSETS_TOPIC
from samsa.broker.group.state import GroupState
from samsa.broker.handlers.delete_groups import handle_delete_groups
from samsa.broker.handlers.offset_commit import handle_offset_commit
from samsa.broker.handlers.offset_delete import handle_offset_delete
from samsa.broker.handlers.offset_fetch import handle_offset_fetch
from samsa.broker.handlers.sync_group import handle_sync_group
from samsa.broker.replica_manager import Partition
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import RequestHeader, request_class

OVERRIDES = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
             "group.initial.rebalance.delay.ms": "0"}
G = "g"
FULL_DISK_RESERVE_BYTES = 1 << 62  # more than any disk has free: every append is refused


def start(tmp_path: Path) -> Broker:
    broker = Broker(BrokerConfig(overrides=OVERRIDES, data_dir=tmp_path / "data"))
    if "t" not in broker.image.topics_by_name:
        (created,) = broker.controller.create_topics([TopicSpec("t", 1, 1)], validate_only=False).result()
        assert created.error_code == ErrorCode.none
    for _ in range(100):
        if broker.groups.coordinator_error(G) == ErrorCode.none:
            return broker
        time.sleep(0.01)
    raise AssertionError("the group coordinator never became available")


def disk_full(broker: Broker, full: bool) -> None:
    broker.log_manager.disk_guard.min_free_bytes = FULL_DISK_RESERVE_BYTES if full else 0


def ctx(broker: Broker, api_key: int, version: int) -> RequestContext:
    return RequestContext(header=RequestHeader(api_key, version, 1, "test", 0), broker=broker,
                          client_host="127.0.0.1", now_ms=int(time.time() * 1000))


def run(make: Callable[[], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        return await make()
    return anyio.run(main)


async def commit(broker: Broker, offset: int, partition: int = 0) -> ErrorCode:
    request = build(request_class(8, 8), {
        "group_id": G, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    response = await handle_offset_commit(request, ctx(broker, 8, 8))
    return ErrorCode(response.topics[0].partitions[0].error_code)


def fetched(broker: Broker) -> int:
    request = build(request_class(9, 7), {"group_id": G, "topics": [{"name": "t", "partition_indexes": [0]}],
                                          "require_stable": False})
    response = handle_offset_fetch(request, ctx(broker, 9, 7))
    assert response.error_code == ErrorCode.none
    return int(response.topics[0].partitions[0].committed_offset)


def test_a_commit_the_log_refused_is_not_answered_by_offset_fetch(tmp_path: Path) -> None:
    broker = start(tmp_path)
    assert run(lambda: commit(broker, 5)) == ErrorCode.none
    disk_full(broker, True)
    assert run(lambda: commit(broker, 9)) == ErrorCode.not_coordinator
    assert fetched(broker) == 5
    broker.close()

    broker = start(tmp_path)
    assert fetched(broker) == 5  # what the restart replays is what OffsetFetch answered
    assert run(lambda: commit(broker, 9)) == ErrorCode.none
    assert fetched(broker) == 9
    broker.close()


def test_a_first_commit_the_log_refused_leaves_no_group_behind(tmp_path: Path) -> None:
    broker = start(tmp_path)
    disk_full(broker, True)
    assert run(lambda: commit(broker, 5)) == ErrorCode.not_coordinator
    assert fetched(broker) == -1
    assert broker.groups.coordinator.describe_group(G) is None
    broker.close()


def test_a_commit_refused_below_min_insync_replicas_is_not_applied(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The coordinators write with acks=-1: Kafka refuses the append (NOT_ENOUGH_REPLICAS, answered
    COORDINATOR_NOT_AVAILABLE) before writing when the ISR is under min.insync.replicas."""
    broker = start(tmp_path)
    assert run(lambda: commit(broker, 5)) == ErrorCode.none
    real_settings = broker.topic_settings
    strict = dataclasses.replace(real_settings(OFFSETS_TOPIC), min_insync_replicas=2)
    monkeypatch.setattr(broker, "topic_settings",
                        lambda topic: strict if topic == OFFSETS_TOPIC else real_settings(topic))
    partition = broker.replica_manager.get_partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    end = partition.log.log_end_offset
    assert run(lambda: commit(broker, 9)) == ErrorCode.coordinator_not_available
    assert partition.log.log_end_offset == end  # nothing was written
    assert fetched(broker) == 5
    broker.close()


def test_racing_commits_end_with_the_later_one_while_the_first_waits_for_replication(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commit 7 is appended and waits for its replication; commit 8 is appended meanwhile, and commit 9
    is refused by the disk. The later appended one wins, in memory and after a restart, as in Kafka
    (the log's order decides), and the refused one is reverted to 8, not to what was there before 7."""
    broker = start(tmp_path)
    assert run(lambda: commit(broker, 5)) == ErrorCode.none
    real_wait = Partition.wait_replicated
    gate = anyio.Event()
    held: list[int] = []

    async def slow_first(self: Partition, end_offset: int, leader_epoch: int, min_isr: int,
                         timeout_s: float) -> ErrorCode:
        if not held:
            held.append(end_offset)
            await gate.wait()
        return await real_wait(self, end_offset, leader_epoch, min_isr, timeout_s)

    monkeypatch.setattr(Partition, "wait_replicated", slow_first)

    async def race() -> list[ErrorCode]:
        results: dict[int, ErrorCode] = {}

        async def one(offset: int) -> None:
            results[offset] = await commit(broker, offset)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 7)
            await anyio.wait_all_tasks_blocked()
            assert held and fetched(broker) == 7  # appended, not yet replicated: this leader's log has it
            await one(8)
            disk_full(broker, True)
            await one(9)
            disk_full(broker, False)
            assert fetched(broker) == 8
            gate.set()
        return [results[7], results[8], results[9]]

    assert run(race) == [ErrorCode.none, ErrorCode.none, ErrorCode.not_coordinator]
    assert fetched(broker) == 8
    broker.close()
    broker = start(tmp_path)
    assert fetched(broker) == 8
    broker.close()


def join_one(broker: Broker) -> tuple[str, int]:
    """One member joins (no initial delay): the group is CompletingRebalance, the member leads."""
    coordinator = broker.groups.coordinator
    now = int(time.time() * 1000)
    pending = coordinator.join_group(JoinRequest(G, "", None, "c", "/127.0.0.1", 10_000, 30_000, "consumer",
                                                 (("range", b"m"),), require_known_member_id=False), now)
    broker.groups.on_tick(now + TIMER_RESOLUTION_MS)  # the initial join's timer, as the service fires it
    assert broker.groups.persist() == ErrorCode.none
    assert pending.result is not None and pending.result.error == ErrorCode.none
    return pending.result.member_id, pending.result.generation_id


async def sync(broker: Broker, member_id: str, generation: int) -> tuple[ErrorCode, bytes]:
    request = build(request_class(14, 5), {
        "group_id": G, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": member_id, "assignment": b"A"}]})
    response = await handle_sync_group(request, ctx(broker, 14, 5))
    return ErrorCode(response.error_code), bytes(response.assignment)


def test_an_assignment_the_log_refused_is_not_handed_out_and_the_group_rebalances(tmp_path: Path) -> None:
    """Kafka's classicGroupSyncToLeader: the group is Stable only once the assignment is written; a
    failed write answers the error and the group rebalances (the members rejoin)."""
    broker = start(tmp_path)
    member_id, generation = join_one(broker)
    disk_full(broker, True)
    assert run(lambda: sync(broker, member_id, generation)) == (ErrorCode.not_coordinator, b"")
    group = broker.groups.coordinator.groups[G]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.members[member_id].assignment == b""
    disk_full(broker, False)
    broker.close()

    broker = start(tmp_path)
    assert broker.groups.coordinator.describe_group(G) is None or \
        broker.groups.coordinator.groups[G].state is not GroupState.STABLE
    member_id, generation = join_one(broker)
    assert run(lambda: sync(broker, member_id, generation)) == (ErrorCode.none, b"A")
    assert broker.groups.coordinator.groups[G].state is GroupState.STABLE
    broker.close()


def test_offset_delete_and_delete_groups_the_log_refused_leave_everything_in_place(tmp_path: Path) -> None:
    broker = start(tmp_path)
    assert run(lambda: commit(broker, 5)) == ErrorCode.none
    disk_full(broker, True)

    async def delete_offsets() -> ErrorCode:
        request = build(request_class(47, 0), {"group_id": G, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0}]}]})
        return ErrorCode((await handle_offset_delete(request, ctx(broker, 47, 0))).error_code)

    async def delete_group() -> ErrorCode:
        request = build(request_class(42, 2), {"groups_names": [G]})
        return ErrorCode((await handle_delete_groups(request, ctx(broker, 42, 2))).results[0].error_code)

    assert run(delete_offsets) == ErrorCode.not_coordinator
    assert fetched(broker) == 5
    assert run(delete_group) == ErrorCode.not_coordinator
    assert fetched(broker) == 5
    assert [g for g, _, _ in broker.groups.coordinator.list_groups()] == [G]
    broker.close()

    broker = start(tmp_path)
    assert fetched(broker) == 5
    assert run(delete_group) == ErrorCode.none
    assert fetched(broker) == -1 and broker.groups.coordinator.list_groups() == []
    broker.close()
    broker = start(tmp_path)
    assert fetched(broker) == -1 and broker.groups.coordinator.list_groups() == []
    broker.close()
