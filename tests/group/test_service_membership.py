"""The group coordinator's membership writes and timer writes, in one process, with appends to
__consumer_offsets that fail (issue 15, part 5): a request's change whose record is not in the log is
reverted and answered the error; a timer's write is retried until the log has it; offset expiry removes
nothing the log still holds. A restart replays the log, so what it shows is what was really stored.

The disk is made "full" as in tests/group/test_service.py: free space under samsa.min.free.disk.bytes.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import anyio
import pytest

from samsa.broker.broker import Broker
from samsa.broker.group.classic_group import JoinResult
from samsa.broker.group.coordinator import TIMER_RESOLUTION_MS, JoinRequest, OffsetAndMetadata
from samsa.broker.group.service import OFFSETS_TOPIC
from samsa.broker.group.state import GroupState
from samsa.broker.handlers.join_group import handle_join_group
from samsa.broker.handlers.leave_group import handle_leave_group
from samsa.broker.replica_manager import Partition
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class
from tests.group.test_service import G, commit, ctx, disk_full, fetched, run, start, sync

SESSION_MS = 10_000
WEEK_MS = 7 * 24 * 3600 * 1000  # offsets.retention.minutes' default


def now_ms() -> int:
    return int(time.time() * 1000)


def join_static(broker: Broker, instance_id: str) -> JoinResult:
    """A static member joins and leads a group of one (no initial delay): CompletingRebalance."""
    now = now_ms()
    pending = broker.groups.coordinator.join_group(
        JoinRequest(G, "", instance_id, "c", "/127.0.0.1", SESSION_MS, 30_000, "consumer", (("range", b"m"),),
                    require_known_member_id=False), now)
    broker.groups.on_tick(now + TIMER_RESOLUTION_MS)  # the initial join's timer, as the service fires it
    assert broker.groups.persist() == ErrorCode.none
    assert pending.result is not None and pending.result.error == ErrorCode.none
    return pending.result


def stable_static(broker: Broker, instance_id: str = "i1") -> str:
    joined = join_static(broker, instance_id)
    assert run(lambda: sync(broker, joined.member_id, joined.generation_id)) == (ErrorCode.none, b"A")
    assert broker.groups.coordinator.groups[G].state is GroupState.STABLE
    return joined.member_id


async def rejoin_static(broker: Broker, instance_id: str) -> tuple[ErrorCode, str]:
    request = build(request_class(11, 9), {
        "group_id": G, "session_timeout": SESSION_MS, "rebalance_timeout": 30_000, "member_id": "",
        "group_instance_id": instance_id, "protocol_type": "consumer", "reason": None,
        "protocols": [{"name": "range", "metadata": b"m"}]})
    response = await handle_join_group(request, ctx(broker, 11, 9))
    return ErrorCode(response.error_code), response.member_id


async def leave(broker: Broker, member_id: str) -> tuple[ErrorCode, list[ErrorCode]]:
    request = build(request_class(13, 5), {"group_id": G, "members": [
        {"member_id": member_id, "group_instance_id": None, "reason": None}]})
    response = await handle_leave_group(request, ctx(broker, 13, 5))
    return ErrorCode(response.error_code), [ErrorCode(m.error_code) for m in response.members]


def static_member(broker: Broker, instance_id: str = "i1") -> str:
    return broker.groups.coordinator.groups[G].static_members[instance_id]


def test_a_static_member_replacement_the_log_refused_is_reverted(tmp_path: Path) -> None:
    """Kafka's classicGroupJoinExistingStaticMember: the replacement's record not written, the old member
    id is the instance's again and the join is answered the (normalized) error without a member id."""
    broker = start(tmp_path)
    old_id = stable_static(broker)
    disk_full(broker, True)
    assert run(lambda: rejoin_static(broker, "i1")) == (ErrorCode.not_coordinator, "")
    group = broker.groups.coordinator.groups[G]
    assert static_member(broker) == old_id and list(group.members) == [old_id]
    assert group.state is GroupState.STABLE and group.members[old_id].assignment == b"A"
    # the old member is not fenced: it still heartbeats in its generation
    assert broker.groups.coordinator.heartbeat(G, group.generation_id, old_id, "i1", now_ms()) == ErrorCode.none
    disk_full(broker, False)
    broker.close()

    broker = start(tmp_path)
    assert static_member(broker) == old_id  # the log agrees
    code, new_id = run(lambda: rejoin_static(broker, "i1"))
    assert code == ErrorCode.none and new_id != old_id
    assert static_member(broker) == new_id
    broker.close()
    broker = start(tmp_path)
    assert static_member(broker) == new_id
    broker.close()


def test_a_leave_emptying_the_group_the_log_refused_is_reverted(tmp_path: Path) -> None:
    """A request's write that fails is reverted and answered (Kafka 4's CoordinatorRuntime): the member
    is still in the Stable group, as the log has it, and can leave again once the disk has room."""
    broker = start(tmp_path)
    member_id = stable_static(broker)
    disk_full(broker, True)
    answer = run(lambda: leave(broker, member_id))
    group = broker.groups.coordinator.groups[G]
    assert group.state is GroupState.STABLE and list(group.members) == [member_id]
    assert static_member(broker) == member_id and group.members[member_id].assignment == b"A"
    assert answer == (ErrorCode.not_coordinator, [])
    disk_full(broker, False)
    broker.close()

    broker = start(tmp_path)
    group = broker.groups.coordinator.groups[G]
    assert group.state is GroupState.STABLE and list(group.members) == [member_id]
    assert run(lambda: leave(broker, member_id)) == (ErrorCode.none, [ErrorCode.none])
    assert broker.groups.coordinator.groups[G].state is GroupState.EMPTY
    broker.close()
    broker = start(tmp_path)
    assert broker.groups.coordinator.groups[G].state is GroupState.EMPTY
    broker.close()


def test_a_session_expiry_emptying_the_group_is_written_on_a_later_tick(tmp_path: Path) -> None:
    """A timer's write that fails has nobody to answer: it is retried on the next tick (Kafka's
    CoordinatorTimer reschedules it) until the log, too, has the group Empty."""
    broker = start(tmp_path)
    member_id = stable_static(broker)
    generation = broker.groups.coordinator.groups[G].generation_id
    disk_full(broker, True)
    expired_ms = now_ms() + SESSION_MS + 1
    broker.groups.on_tick(expired_ms)
    assert broker.groups.coordinator.groups[G].state is GroupState.EMPTY
    broker.groups.on_tick(expired_ms + 100)  # still refused: kept for the next tick
    disk_full(broker, False)
    broker.groups.on_tick(expired_ms + 200)
    broker.close()

    broker = start(tmp_path)
    group = broker.groups.coordinator.groups[G]
    assert (group.state, group.generation_id, list(group.members)) == (GroupState.EMPTY, generation + 1, [])
    assert member_id not in group.static_members.values()
    broker.close()


def test_a_timer_write_superseded_by_a_newer_record_is_not_written_again(tmp_path: Path) -> None:
    """The Empty record of an expiry the log refused is dropped once a newer record of the group is
    written: appending it later would take the group back in time."""
    broker = start(tmp_path)
    stable_static(broker)
    disk_full(broker, True)
    broker.groups.on_tick(now_ms() + SESSION_MS + 1)
    disk_full(broker, False)
    rejoined = stable_static(broker, "i2")  # written: generation after the Empty one
    generation = broker.groups.coordinator.groups[G].generation_id
    broker.groups.on_tick(now_ms())
    broker.close()

    broker = start(tmp_path)
    group = broker.groups.coordinator.groups[G]
    assert (group.state, group.generation_id, list(group.members)) == (GroupState.STABLE, generation, [rejoined])
    broker.close()


def test_expired_offsets_stay_until_their_tombstones_are_written(tmp_path: Path) -> None:
    """Offset expiry removes an offset (and the simple group it leaves empty) only once its tombstone is
    in the log: a refused run leaves OffsetFetch answering what a restart replays, and the next run
    expires them."""
    broker = start(tmp_path)
    assert run(lambda: commit(broker, 5)) == ErrorCode.none
    later_ms = now_ms() + WEEK_MS + 60_000
    disk_full(broker, True)
    assert broker.groups.expire_offsets(later_ms) == 0
    assert fetched(broker) == 5
    assert [g for g, _, _ in broker.groups.coordinator.list_groups()] == [G]
    disk_full(broker, False)
    broker.close()

    broker = start(tmp_path)
    assert fetched(broker) == 5
    assert broker.groups.expire_offsets(later_ms) == 1
    assert fetched(broker) == -1 and broker.groups.coordinator.list_groups() == []
    broker.close()
    broker = start(tmp_path)
    assert fetched(broker) == -1 and broker.groups.coordinator.list_groups() == []
    broker.close()


def test_txn_offset_commit_is_refused_below_min_insync_replicas(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """TxnOffsetCommit writes with acks=-1 as OffsetCommit does: refused before writing when the ISR is
    under min.insync.replicas, answered COORDINATOR_NOT_AVAILABLE (Kafka's GroupCoordinatorService
    normalizes NOT_ENOUGH_REPLICAS so); a storage error is NOT_COORDINATOR."""
    broker = start(tmp_path)
    group_partition = (OFFSETS_TOPIC, broker.groups.partition_for(G))
    r = broker.txn.init_producer_id("tx", 60_000, -1, -1, now_ms())
    assert broker.txn.add_partitions("tx", r.producer_id, 0, [group_partition], now_ms()) == ErrorCode.none
    partition = broker.replica_manager.get_partition(*group_partition)
    assert partition is not None
    end = partition.log.log_end_offset
    offsets = {("t", 0): OffsetAndMetadata(7, -1, "", now_ms(), None)}
    real_settings = broker.topic_settings
    strict = dataclasses.replace(real_settings(OFFSETS_TOPIC), min_insync_replicas=2)
    with monkeypatch.context() as patch:
        patch.setattr(broker, "topic_settings",
                      lambda topic: strict if topic == OFFSETS_TOPIC else real_settings(topic))
        assert broker.txn.txn_offset_commit("tx", G, r.producer_id, 0, offsets) == ErrorCode.coordinator_not_available
    assert partition.log.log_end_offset == end  # nothing was written
    assert broker.txn.pending_offsets == {}
    disk_full(broker, True)
    assert broker.txn.txn_offset_commit("tx", G, r.producer_id, 0, offsets) == ErrorCode.not_coordinator
    assert broker.txn.pending_offsets == {}
    disk_full(broker, False)
    assert broker.txn.txn_offset_commit("tx", G, r.producer_id, 0, offsets) == ErrorCode.none
    assert partition.log.log_end_offset > end
    broker.close()


def test_offset_fetch_answers_a_commit_only_once_the_high_watermark_passes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka 4's coordinator reads at the last committed offset: a commit appended but not yet on every
    in-sync replica is not answered (its leader could die and the next leader's log lack it)."""
    broker = start(tmp_path)
    assert run(lambda: commit(broker, 5)) == ErrorCode.none
    partition = broker.replica_manager.get_partition(OFFSETS_TOPIC, broker.groups.partition_for(G))
    assert partition is not None
    real_advance = Partition.maybe_advance_high_watermark
    real_wait = Partition.wait_replicated
    monkeypatch.setattr(Partition, "maybe_advance_high_watermark", lambda self: False)  # a follower lags
    gate = anyio.Event()

    async def held(self: Partition, end_offset: int, leader_epoch: int, min_isr: int, timeout_s: float) -> ErrorCode:
        await gate.wait()
        return await real_wait(self, end_offset, leader_epoch, min_isr, timeout_s)

    monkeypatch.setattr(Partition, "wait_replicated", held)

    async def scenario() -> list[object]:
        seen: list[object] = []
        async with anyio.create_task_group() as tg:
            async def one() -> None:
                seen.append(await commit(broker, 9))
            tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            seen.append(fetched(broker))  # appended, above the high watermark: not answered yet
            seen.append(broker.groups.coordinator.committed_offsets(G)[("t", 0)].offset)  # but it is the latest
            assert real_advance(partition)  # the follower caught up
            seen.append(fetched(broker))
            gate.set()
        return seen

    assert run(scenario) == [5, 9, 9, ErrorCode.none]
    broker.close()
