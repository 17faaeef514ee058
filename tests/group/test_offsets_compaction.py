"""`__consumer_offsets` stays small: compacted like any compacted topic, so a restart replays about one
record per (group, partition), not the commit history (issue 16)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import TopicSpec
from samsa.broker.group.service import OFFSETS_TOPIC
from samsa.broker.handlers.delete_groups import handle_delete_groups
from samsa.broker.handlers.offset_commit import handle_offset_commit
from samsa.broker.handlers.offset_delete import handle_offset_delete
from samsa.broker.handlers.offset_fetch import handle_offset_fetch
from samsa.broker.internal_topic import replay
from samsa.broker.log_cleaner import LogCleaner
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class
from samsa.storage.log import Log
from tests.group.test_service import ctx

SEGMENT_BYTES = 1 << 20  # the smallest segment.bytes Kafka 4.1 accepts (KIP-1030)
OVERRIDES = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
             "group.initial.rebalance.delay.ms": "0", "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
             "log.cleaner.delete.retention.ms": "0"}
GROUP = "g"
PARTITIONS = 4
COMMITS = 6000  # requests, each committing PARTITIONS offsets: 24,000 offset commit records


def start(tmp_path: Path) -> Broker:
    broker = Broker(BrokerConfig(overrides=OVERRIDES, data_dir=tmp_path / "data"))
    if "t" not in broker.image.topics_by_name:
        (created,) = broker.controller.create_topics([TopicSpec("t", PARTITIONS, 1)], validate_only=False).result()
        assert created.error_code == ErrorCode.none
    for _ in range(100):
        if broker.groups.coordinator_error(GROUP) == ErrorCode.none:
            return broker
        time.sleep(0.01)
    raise AssertionError("the group coordinator never became available")


def offsets_log(broker: Broker) -> Log:
    partition = broker.replica_manager.get_partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    return partition.log


def record_count(log: Log) -> int:
    return sum(1 for _ in replay(log))


def _records(log: Log) -> list[tuple[int, bytes, bytes | None]]:
    return list(replay(log))


async def commit_many(broker: Broker, group_id: str, rounds: int) -> None:
    for r in range(rounds):
        request = build(request_class(8, 8), {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": p, "committed_offset": r * 10 + p, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p in range(PARTITIONS)]}]})
        response = await handle_offset_commit(request, ctx(broker, 8, 8))
        assert all(p.error_code == ErrorCode.none for p in response.topics[0].partitions)


def fetched(broker: Broker, group_id: str) -> list[int]:
    request = build(request_class(9, 7), {"group_id": group_id, "require_stable": False, "topics": [
        {"name": "t", "partition_indexes": list(range(PARTITIONS))}]})
    response = handle_offset_fetch(request, ctx(broker, 9, 7))
    return [int(p.committed_offset) for p in response.topics[0].partitions]


def clean_all(broker: Broker) -> int:
    """Clean until the cleaner finds nothing eligible; how many cleanings ran."""
    cleaner = LogCleaner(broker.log_manager, lambda: broker.config)

    async def main() -> int:
        n = 0
        while await cleaner.clean_once(int(time.time() * 1000)):
            n += 1
            assert n < 20
        return n

    assert not cleaner.uncleanable
    return anyio.run(main)


def test_many_commits_are_compacted_and_the_restart_replays_only_live_offsets(tmp_path: Path) -> None:
    broker = start(tmp_path)
    log = offsets_log(broker)
    assert log.config.compact and log.config.segment_bytes == SEGMENT_BYTES
    anyio.run(commit_many, broker, GROUP, COMMITS)
    expected = fetched(broker, GROUP)
    assert expected == [(COMMITS - 1) * 10 + p for p in range(PARTITIONS)]
    before = record_count(log)
    assert before >= COMMITS * PARTITIONS
    assert len(log.segments) >= 2  # segment.bytes rolled the log
    log.roll(int(time.time() * 1000))  # as segment.ms would: the whole history is below the active segment
    assert clean_all(broker) >= 1
    active = sum(1 for o, _k, _v in _records(log) if o >= log.segments[-1].base_offset)
    after = record_count(log)
    live_keys = PARTITIONS + 1  # one offset per partition and the group record
    assert after < 3 * live_keys + active, (before, after, active)
    assert fetched(broker, GROUP) == expected  # the live broker answers as before
    broker.close()

    broker = start(tmp_path)
    assert fetched(broker, GROUP) == expected
    assert broker.groups.last_load_records == after
    assert broker.groups.last_load_records < before // 2
    broker.close()


def remove_group(broker: Broker, how: str) -> None:
    """Remove every offset of group "gone" the way `how` names."""
    if how == "DeleteGroups":
        request = build(request_class(42, 2), {"groups_names": ["gone"]})
        response = anyio.run(handle_delete_groups, request, ctx(broker, 42, 2))
        assert [r.error_code for r in response.results] == [ErrorCode.none]
    elif how == "OffsetDelete":
        request = build(request_class(47, 0), {"group_id": "gone", "topics": [
            {"name": "t", "partitions": [{"partition_index": p} for p in range(PARTITIONS)]}]})
        response = anyio.run(handle_offset_delete, request, ctx(broker, 47, 0))
        assert response.error_code == ErrorCode.none
    else:  # offsets.retention.minutes has passed since the commits (the group is Empty)
        week_and_a_day_ms = 8 * 24 * 3_600_000
        assert broker.groups.expire_offsets(int(time.time() * 1000) + week_and_a_day_ms) == PARTITIONS


@pytest.mark.parametrize("how", ["DeleteGroups", "OffsetDelete", "expiry"])
def test_a_removed_group_leaves_tombstones_that_compaction_removes(tmp_path: Path, how: str) -> None:
    """DeleteGroups, OffsetDelete of every partition and offset expiry write offset tombstones and the
    group's; a cleaning keeps them for delete.retention.ms (0 here) after it first cleans them (KIP-534),
    a later one removes them: nothing of the group is left in the log, and a restart knows no such group."""
    broker = start(tmp_path)
    log = offsets_log(broker)
    anyio.run(commit_many, broker, "gone", 2000)
    remove_group(broker, how)
    tombstones = [k for _o, k, v in _records(log) if v is None]
    assert len(tombstones) == PARTITIONS + 1
    left = []  # more commits of another group, rolled, make the log dirty again each time
    for _ in range(2):  # the first cleaning sets the tombstones' delete horizon, the second removes them
        anyio.run(commit_many, broker, GROUP, 100)
        log.roll(int(time.time() * 1000))
        assert clean_all(broker) >= 1
        left.append([(k, v) for _o, k, v in _records(log) if b"gone" in k])
    assert len(left[0]) == PARTITIONS + 1 and all(v is None for _k, v in left[0])  # only the tombstones
    assert left[1] == []
    broker.close()
    broker = start(tmp_path)
    assert fetched(broker, "gone") == [-1] * PARTITIONS
    assert broker.groups.coordinator.describe_group("gone") is None
    broker.close()
