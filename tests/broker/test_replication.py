"""Partition replication, in process: the leader's high watermark over the ISR, ISR shrink and expand
decisions, and follower reconciliation by diverging epoch (the leader's check and the follower's
truncation), on real logs in a temporary directory. Real processes: tests/cluster/test_replication.py."""

from __future__ import annotations

import time
from pathlib import Path

from samsa.broker.replica_fetcher import truncate_to_divergence
from samsa.broker.replica_manager import Partition
from samsa.kproto.records import decode_batches, encode_batch
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

NOW = 1_000_000


def _log(path: Path) -> Log:
    return Log.open(path, LogConfig(), now_ms=int(time.time() * 1000))


def _append(log: Log, epoch: int, count: int, tag: str) -> None:
    for i in range(count):
        log.append_as_leader(bytearray(encode_batch([(None, f"{tag}{i}".encode(), ())], timestamp_ms=NOW)),
                             leader_epoch=epoch, now_ms=NOW)


def _values(log: Log) -> list[tuple[int, bytes | None]]:
    data = log.read(log.log_start_offset, max_bytes=1 << 24, max_offset=None).read_bytes()
    return [(r.offset, r.value) for _, records in decode_batches(data, max_decompressed_bytes=1 << 24)
            for r in records]


def _leader(log: Log, replicas: tuple[int, ...] = (1, 2, 3), isr: tuple[int, ...] = (1, 2, 3)) -> Partition:
    return Partition("t", 0, "id", log, 1, 5, replicas, isr, 0, node_id=1)


def test_high_watermark_is_the_smallest_log_end_of_the_isr(tmp_path: Path) -> None:
    p = _leader(_log(tmp_path / "t-0"))
    for _ in range(10):
        p.append_as_leader(bytearray(encode_batch([(None, b"v", ())], timestamp_ms=NOW)), NOW)
    assert p.log.high_watermark == 0  # nobody else has anything yet
    assert not p.update_follower(2, 10, NOW)  # 3 still at nothing
    assert p.update_follower(3, 4, NOW) and p.log.high_watermark == 4
    assert p.update_follower(3, 10, NOW) and p.log.high_watermark == 10
    # a follower outside the ISR does not hold the high watermark back
    q = _leader(_log(tmp_path / "t-1"), isr=(1, 2))
    q.append_as_leader(bytearray(encode_batch([(None, b"v", ())], timestamp_ms=NOW)), NOW)
    assert q.update_follower(2, 1, NOW) and q.log.high_watermark == 1
    # and a sole in-sync leader commits at once
    solo = _leader(_log(tmp_path / "t-2"), isr=(1,))
    solo.append_as_leader(bytearray(encode_batch([(None, b"v", ())], timestamp_ms=NOW)), NOW)
    assert solo.log.high_watermark == 1


def test_isr_shrinks_after_the_lag_limit_and_expands_once_caught_up(tmp_path: Path) -> None:
    p = _leader(_log(tmp_path / "t-0"))
    _append(p.log, 5, 3, "a")
    lag = 1000
    assert p.isr_change(NOW, lag, {1, 2, 3}) is None  # first look: everyone gets a full period
    p.update_follower(2, 3, NOW + 500)  # 2 is caught up; 3 never fetches
    assert p.isr_change(NOW + 900, lag, {1, 2, 3}) is None
    assert p.isr_change(NOW + 1500, lag, {1, 2, 3}) == (1, 2)
    p.isr = (1, 2)  # the controller committed it
    p.maybe_advance_high_watermark()
    assert p.log.high_watermark == 3
    # 3 comes back but is behind the high watermark: not yet (2 keeps fetching, caught up)
    p.update_follower(2, 3, NOW + 1550)
    p.update_follower(3, 1, NOW + 1600)
    assert p.isr_change(NOW + 1600, lag, {1, 2, 3}) is None
    # caught up to the high watermark and this epoch's start: back in
    p.update_follower(3, 3, NOW + 1700)
    assert p.isr_change(NOW + 1700, lag, {1, 2, 3}) == (1, 2, 3)
    # ... unless its broker is fenced, or a change is already in flight
    assert p.isr_change(NOW + 1700, lag, {1, 2}) is None
    p.pending_isr = (1, 2, 3)
    assert p.isr_change(NOW + 1700, lag, {1, 2, 3}) is None


def test_a_follower_with_an_uncommitted_tail_from_a_deposed_leader_reconciles(tmp_path: Path) -> None:
    # Both have epoch 1's ten records. The follower then led epoch 2 briefly and wrote three records no
    # one else got; the new leader (epoch 3) wrote five of its own after offset 10.
    leader_log, follower_log = _log(tmp_path / "leader" / "t-0"), _log(tmp_path / "follower" / "t-0")
    for log in (leader_log, follower_log):
        _append(log, 1, 10, "common")
    _append(follower_log, 2, 3, "lost")
    _append(leader_log, 3, 5, "new")
    leader = _leader(leader_log)
    # The follower fetches from its end (13) saying it last saw epoch 2; the leader never had epoch 2:
    # its history agrees only up to the end of epoch 1, at offset 10.
    assert leader.divergence(2, 13) == (1, 10)
    target = truncate_to_divergence(follower_log, 1, 10, leader_log.log_start_offset)
    assert target == 10 and follower_log.log_end_offset == 10
    # Now it agrees (epoch 1 ends at 10 on the leader) and copies the leader's records verbatim.
    assert leader.divergence(1, 10) is None
    data = leader_log.read(10, max_bytes=1 << 20, max_offset=None).read_bytes()
    follower_log.append_as_follower(data, now_ms=NOW)
    assert _values(follower_log) == _values(leader_log)
    assert [v for _, v in _values(follower_log)][-5:] == [f"new{i}".encode() for i in range(5)]
    assert follower_log.epoch_entries == leader_log.epoch_entries  # epoch cache truncated and rebuilt


def test_divergence_when_the_follower_saw_a_newer_epoch_or_none_in_common(tmp_path: Path) -> None:
    leader = _leader(_log(tmp_path / "t-0"))
    _append(leader.log, 1, 4, "x")
    # last fetched epoch newer than anything we wrote: we agree at most up to our end
    assert leader.divergence(7, 6) == (1, 4)
    assert leader.divergence(1, 4) is None and leader.divergence(-1, 0) is None
    empty = _leader(_log(tmp_path / "t-1"))
    assert empty.divergence(1, 3) == (-1, 0)  # nothing in common: start from our log start
    follower = _log(tmp_path / "f-0")
    _append(follower, 1, 3, "y")
    assert truncate_to_divergence(follower, -1, 0, 0) == 0 and follower.log_end_offset == 0


def test_a_retry_after_failover_is_recognised_by_the_new_leader(tmp_path: Path) -> None:
    """The follower's producer state comes from the batches it copies, so when it leads, a producer's
    retry of a batch the old leader had acknowledged is answered with the original offset."""
    old, new = _log(tmp_path / "old" / "t-0"), _log(tmp_path / "new" / "t-0")

    def batch(seq: int, value: bytes) -> bytearray:
        return bytearray(encode_batch([(None, value, ())], timestamp_ms=NOW, producer_id=42, producer_epoch=0,
                                      base_sequence=seq))

    for seq in range(3):
        old.append_as_leader(batch(seq, f"v{seq}".encode()), leader_epoch=1, now_ms=NOW)
    new.append_as_follower(old.read(0, max_bytes=1 << 20, max_offset=None).read_bytes(), now_ms=NOW)
    retry = new.append_as_leader(batch(2, b"v2"), leader_epoch=2, now_ms=NOW)
    assert retry.duplicate and retry.first_offset == 2 and new.log_end_offset == 3
    fresh = new.append_as_leader(batch(3, b"v3"), leader_epoch=2, now_ms=NOW)
    assert not fresh.duplicate and fresh.first_offset == 3


def test_a_new_leader_answers_offset_for_leader_epoch_for_its_epoch_before_any_append(tmp_path: Path) -> None:
    """Kafka's maybeAssignEpochStartOffset: without it a new leader of an empty (or quiet) partition
    answered OffsetForLeaderEpoch with -1, which consumers read as truncation and reset on."""
    log = _log(tmp_path / "t-0")
    _append(log, 0, 3, "a")
    assert log.end_offset_for_epoch(1) == (-1, -1)
    log.assign_epoch_start_offset(1)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(0) == (0, 3)
    empty = _log(tmp_path / "t-1")
    empty.assign_epoch_start_offset(2)
    assert empty.end_offset_for_epoch(2) == (2, 0)


def test_an_epoch_a_deposed_leader_never_wrote_in_does_not_make_it_diverge_forever(tmp_path: Path) -> None:
    """A broker led briefly (recording its epoch's start at its log end) and was deposed before
    appending. As a follower its last fetched epoch must not be that phantom epoch after the
    truncation the leader asks for, or every fetch is answered with the same divergence (seen in a
    chaos run: 'diverges ... truncated to 17' twice a second until the run ended)."""
    leader_log, follower_log = _log(tmp_path / "leader" / "t-0"), _log(tmp_path / "follower" / "t-0")
    for log in (leader_log, follower_log):
        _append(log, 0, 17, "common")
    _append(leader_log, 3, 5, "new")
    follower_log.assign_epoch_start_offset(2)  # it led in epoch 2 without writing
    leader = _leader(leader_log)
    diverging = leader.divergence(follower_log.latest_epoch() or -1, follower_log.log_end_offset)
    assert diverging == (0, 17)
    truncate_to_divergence(follower_log, *diverging, leader_log.log_start_offset)
    assert follower_log.log_end_offset == 17 and follower_log.latest_epoch() == 0
    assert leader.divergence(0, 17) is None  # the next fetch proceeds


def test_a_coordinator_write_waits_until_the_isr_has_it(tmp_path: Path) -> None:
    """Partition.wait_replicated, the acks=-1 wait of the coordinators' own writes (offset commits):
    it ends when the high watermark passes the write, when leadership moves, or at its timeout."""
    import anyio

    from samsa.kproto.errors import ErrorCode

    p = _leader(_log(tmp_path / "t-0"))
    info = p.append_as_leader(bytearray(encode_batch([(None, b"offset", ())], timestamp_ms=NOW)), NOW)
    end = info.last_offset + 1

    async def scenario() -> list[ErrorCode]:
        got = [await p.wait_replicated(end, p.leader_epoch, 2, 0.05)]  # nobody else has it yet
        results: list[ErrorCode] = []

        async def waiter() -> None:
            results.append(await p.wait_replicated(end, p.leader_epoch, 2, 10))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.01)
            p.update_follower(2, end, NOW)  # one follower is not the whole ISR
            await anyio.sleep(0.01)
            assert not results
            p.update_follower(3, end, NOW)
        got += results
        p.isr = (1,)  # fell below min.insync.replicas 2 while the write was already committed
        got.append(await p.wait_replicated(end, p.leader_epoch, 2, 1))
        moved = p.append_as_leader(bytearray(encode_batch([(None, b"next", ())], timestamp_ms=NOW)), NOW)

        async def deposed() -> None:
            results.append(await p.wait_replicated(moved.last_offset + 2, p.leader_epoch, 1, 10))

        async with anyio.create_task_group() as tg:
            tg.start_soon(deposed)
            await anyio.sleep(0.01)
            p.leader_id, p.leader_epoch = 2, p.leader_epoch + 1
            p.wake_waiters()
        return got + results[-1:]

    assert anyio.run(scenario) == [ErrorCode.request_timed_out, ErrorCode.none,
                                   ErrorCode.not_enough_replicas_after_append, ErrorCode.not_leader_or_follower]


def test_the_high_watermark_waits_for_a_replica_an_expansion_in_flight_adds(tmp_path: Path) -> None:
    """Kafka's maximal ISR: while an AlterPartition adding replica 3 is in flight (or its answer was
    lost), records acknowledged meanwhile must be on 3 too, or 3 could be elected without them."""
    p = _leader(_log(tmp_path / "t-0"), isr=(1, 2))
    now = int(time.time() * 1000)
    for _ in range(3):
        p.append_as_leader(bytearray(encode_batch([(None, b"v", ())], timestamp_ms=NOW)), now)
    p.update_follower(2, 3, now)
    p.update_follower(3, 3, now)
    assert p.log.high_watermark == 3
    expansion = p.isr_change(now, 10_000, live={1, 2, 3})
    assert expansion == (1, 2, 3)
    p.pending_isr, p.possibly_added = expansion, {3}  # what Broker.maybe_change_isr records
    p.append_as_leader(bytearray(encode_batch([(None, b"w", ())], timestamp_ms=NOW)), now)
    p.update_follower(2, 4, now)
    assert p.log.high_watermark == 3, "acknowledged past a replica the pending expansion adds"
    # The AlterPartition failed without an answer (it may have been committed): still waited for.
    p.pending_isr = None
    p.update_follower(2, 4, now)
    assert p.log.high_watermark == 3
    p.update_follower(3, 4, now)
    assert p.log.high_watermark == 4
    # Once the metadata shows the outcome, only the committed ISR counts (here: 3 was not added).
    p.possibly_added.clear()
    p.append_as_leader(bytearray(encode_batch([(None, b"x", ())], timestamp_ms=NOW)), now)
    p.update_follower(2, 5, now)
    assert p.log.high_watermark == 5
