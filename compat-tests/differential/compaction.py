"""Log compaction (issue 16): the same writes to a compacted topic on both brokers, both cleaners given the same
chance to clean, then a full read.

Segments are rolled by time (segment.ms; segment.bytes cannot go below 1 MiB since Kafka 4.0, KIP-1030): a
round of writes, a pause past segment.ms, then one more record, which rolls the round's segment so that it
is cleanable (Kafka's LogCleanerManager never cleans the active segment). A topic is written with
cleanup.policy=delete and switched to compact once its first round is written and rolled, so that both cleaners
start from the same log. Each broker's cleaner wakes on its own (log.cleaner.backoff.ms: 1 s on both here;
Kafka's default is 15 s), so a scenario polls until the log *is* cleaned below that last record -- each key at
most once there -- bounded by CLEAN_TIMEOUT_S, and then compares what a reader observes: each key's latest
value, the tombstones still present, and that no older value survives below the cleaned point, and the
batches left (offsets, record counts, markers, delete horizons: see ``_layout``). Timestamps are not compared
(the records carry real times, so that segment.ms rolls the same way on both).

Tombstones (KIP-534): the first cleaning that meets a tombstone keeps it and stamps its batch with a delete
horizon (now + delete.retention.ms); a later cleaning after the horizon removes it. The scenario waits
DELETE_RETENTION_MS past the first cleaning, then writes a second round (dirt for the cleaner) and waits
for the second cleaning: the first round's tombstones are gone on both, the second round's are kept.

Transactions: aborted records are removed by the cleaner whatever their key (a key written only by an
aborted transaction included, the KAFKA-8351 shape); read_committed never shows them, before or after.
"""

from __future__ import annotations

import time
from typing import Any

from differential.framework import Ctx, err, error_name, scenario
from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch

CLEAN_TIMEOUT_S = 120.0  # a loaded machine, with room (Kafka's default 15 s backoff would fit too)
SEGMENT_MS = 500
DELETE_RETENTION_MS = 2000
KEYS = 10
COMPACTED = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
             "min.compaction.lag.ms": "0", "delete.retention.ms": str(DELETE_RETENTION_MS)}

WRITING = {**COMPACTED, "cleanup.policy": "delete"}  # until _start_compacting

Record = tuple[int, bytes | None, bytes | None]  # (offset, key, value) of a data record


def _now_ms() -> int:
    return int(time.time() * 1000)


def _read(ctx: Ctx, c: Connection, topic: str, *, isolation_level: int = 0) -> list[Record]:
    """Every data record from offset 0 to the high watermark (read_committed: to the last stable offset,
    leaving out aborted transactions the way a consumer does, from the fetch's aborted_transactions)."""
    out: list[Record] = []
    offset = 0
    aborted_starts: dict[int, list[int]] = {}  # producer id -> first offsets of its aborted transactions
    in_aborted: set[int] = set()
    for _ in range(10_000):
        p = ctx.fetch(c, topic, 0, offset, isolation_level=isolation_level)
        assert p.error_code.value == 0, f"{ctx.target}: fetch {topic} at {offset}: {err(p)}"
        end = p.last_stable_offset if isolation_level == 1 else p.high_watermark
        for a in p.aborted_transactions or ():
            aborted_starts.setdefault(a.producer_id, []).append(a.first_offset)
        moved = False
        for h, recs in decode_batches(p.records or b"", max_decompressed_bytes=1 << 26, allow_partial_tail=True):
            last = h.base_offset + h.last_offset_delta
            if last < offset:
                continue
            moved = True
            offset = last + 1
            pid, control, transactional = h.producer_id, bool(h.attributes & 0x20), bool(h.attributes & 0x10)
            if isolation_level == 1 and transactional:
                starts = aborted_starts.get(pid, [])
                if any(s <= h.base_offset for s in starts):
                    in_aborted.add(pid)
                    aborted_starts[pid] = [s for s in starts if s > h.base_offset]
                if control:  # the marker ends the transaction, aborted or not
                    in_aborted.discard(pid)
                    continue
                if pid in in_aborted:
                    continue
            if control:
                continue
            out.extend((r.offset, r.key, r.value) for r in recs)
        if offset >= end:
            return out
        assert moved, f"{ctx.target}: fetch {topic} at {offset} below {end} returned no batch"
    raise AssertionError(f"{ctx.target}: {topic} never read to its end")


def _layout(ctx: Ctx, c: Connection, topic: str) -> list[list[Any]]:
    """The batches a fetch from 0 returns: [base offset, last offset, records, control, delete horizon set].

    The same on both brokers when the cleaners follow the same rules: a batch keeps its base and last offsets
    whatever it loses, an emptied batch goes unless it is its producer's last, and a batch whose tombstones or
    markers a cleaning kept carries a delete horizon (attribute bit 6, KIP-534). Segment boundaries do not
    enter (they depend on when each broker rolled)."""
    out: list[list[Any]] = []
    offset = 0
    while True:
        p = ctx.fetch(c, topic, 0, offset)
        assert p.error_code.value == 0, f"{ctx.target}: fetch {topic} at {offset}: {err(p)}"
        for h, recs in decode_batches(p.records or b"", max_decompressed_bytes=1 << 26):
            last = h.base_offset + h.last_offset_delta
            if last >= offset:
                out.append([h.base_offset, last, len(recs), bool(h.attributes & 0x20), bool(h.attributes & 0x40)])
                offset = last + 1
        if offset >= p.high_watermark:
            return out


def _produce(ctx: Ctx, c: Connection, topic: str, records: list[tuple[bytes, bytes | None]]) -> int:
    p = ctx.produce(c, topic, 0, encode_batch([(k, v, ()) for k, v in records], timestamp_ms=_now_ms()))
    assert p.error_code.value == 0, f"{ctx.target}: produce to {topic}: {err(p)}"
    return int(p.base_offset)


def _start_compacting(ctx: Ctx, c: Connection, topic: str) -> None:
    """cleanup.policy delete -> compact, once a round of writes is complete: neither cleaner may start on a
    half-written round (with a 1 s cleaner backoff one would, at a different point on each broker)."""
    r = c.request(44, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
        {"name": "cleanup.policy", "config_operation": 0, "value": "compact"}]}], "validate_only": False}, version=1)
    assert err(r.responses[0]) == "NONE(0)", f"{ctx.target}: compact {topic}: {err(r.responses[0])}"


def _roll(ctx: Ctx, c: Connection, topic: str, key: bytes) -> int:
    """Past segment.ms, one more record rolls the segment before it: everything below it becomes cleanable."""
    time.sleep(2 * SEGMENT_MS / 1000)
    return _produce(ctx, c, topic, [(key, b"roll")])


def _duplicated_below(records: list[Record], point: int) -> list[str]:
    keys = [k for o, k, _ in records if o < point]
    return sorted({repr(k) for k in keys if keys.count(k) > 1})


def _wait_cleaned(ctx: Ctx, c: Connection, topic: str, point: int) -> list[Record]:
    """Poll until every key appears at most once below `point`: the cleaner ran over all of it."""
    deadline = time.monotonic() + CLEAN_TIMEOUT_S
    while True:
        records = _read(ctx, c, topic)
        dup = _duplicated_below(records, point)
        if not dup:
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"{ctx.target}: {topic} not cleaned below offset {point} within {CLEAN_TIMEOUT_S} s"
                                 f" (keys still duplicated: {dup[:5]})")
        time.sleep(1.0)


def _view(records: list[Record], written: dict[bytes, list[bytes | None]]) -> dict[str, Any]:
    """What a reader of the whole log observes: latest values, tombstones present, stale values left."""
    latest: dict[str, Any] = {}
    for _, k, v in records:
        latest[(k or b"").decode()] = None if v is None else v.decode()
    stale = sorted(f"{(k or b'').decode()}={v!r}" for _, k, v in records
                   if k in written and written[k] and v != written[k][-1])
    return {"latest": latest, "tombstones": sorted(k for k, v in latest.items() if v is None),
            "tombstone_records": sorted((k or b"").decode() for _, k, v in records if v is None),
            "stale_values": stale, "offsets_increase": [o for o, _, _ in records] == sorted({o for o, _, _ in records}),
            "record_count": len(records)}


@scenario
def compaction_latest_values_and_tombstones(ctx: Ctx) -> Any:
    """Two rounds of updates and tombstones, each then cleaned: latest values, tombstones kept, then removed."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1, WRITING))}
    written: dict[bytes, list[bytes | None]] = {}

    def write(round_: int, batches: int, keys: range, tombstones: list[int]) -> None:
        for b in range(batches):
            recs: list[tuple[bytes, bytes | None]] = [(b"k%d" % i, b"v%d-%d-%d" % (round_, b, i)) for i in keys]
            if b == batches - 1:
                recs += [(b"k%d" % i, None) for i in tombstones]
            _produce(ctx, c, t, recs)
            for k, v in recs:
                written.setdefault(k, []).append(v)

    # round 1: 20 updates of every key, then tombstones for k7 and k8; a roll; the first cleaning
    write(1, 20, range(KEYS), [7, 8])
    point = _roll(ctx, c, t, b"roll-1")
    written[b"roll-1"] = [b"roll"]
    _start_compacting(ctx, c, t)
    out["first_cleaning"] = _view(_wait_cleaned(ctx, c, t, point), written)
    out["first_cleaning"]["batches"] = _layout(ctx, c, t)
    # past delete.retention.ms after the first cleaning stamped the tombstones' horizon, new dirt: keys 0-4
    # updated, k3 deleted, and k8 written again (a tombstone followed by a value: the value wins)
    time.sleep(DELETE_RETENTION_MS / 1000 + 1.0)
    write(2, 5, range(5), [3])
    _produce(ctx, c, t, [(b"k8", b"reborn")])
    written[b"k8"].append(b"reborn")
    point = _roll(ctx, c, t, b"roll-2")
    written[b"roll-2"] = [b"roll"]
    out["second_cleaning"] = _view(_wait_cleaned(ctx, c, t, point), written)
    out["second_cleaning"]["batches"] = _layout(ctx, c, t)
    return out


def _init_transactional(ctx: Ctx, c: Connection, txn_id: str) -> tuple[int, int]:
    ctx.find_coordinator(c, txn_id, 1)
    deadline = time.monotonic() + 30
    while True:  # the transaction coordinator loads __transaction_state on first use
        r = c.request(22, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
                           "producer_epoch": -1}, version=4)
        e = err(r)
        if e == "NONE(0)":
            return int(r.producer_id), int(r.producer_epoch)
        assert e in ("COORDINATOR_LOAD_IN_PROGRESS(14)", "COORDINATOR_NOT_AVAILABLE(15)", "NOT_COORDINATOR(16)") \
            and time.monotonic() < deadline, f"{ctx.target}: InitProducerId: {e}"
        time.sleep(0.3)


@scenario
def compaction_aborted_transactions(ctx: Ctx) -> Any:
    """Committed and aborted transactions on a compacted topic, cleaned: aborted data never visible, removed."""
    c = ctx.connect()
    if not {22, 24, 26} <= set(c.versions):
        ctx.skip("transactions not advertised")
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1, WRITING))}
    txn_id = ctx.topic("txn")
    pid, epoch = _init_transactional(ctx, c, txn_id)
    seq = 0

    def txn(records: list[tuple[bytes, bytes | None]], commit: bool) -> list[str]:
        nonlocal seq
        deadline = time.monotonic() + 30
        while True:  # CONCURRENT_TRANSACTIONS while the previous transaction's markers are written: retry
            r = c.request(24, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                               "v3_and_below_producer_epoch": epoch,
                               "v3_and_below_topics": [{"name": t, "partitions": [0]}]}, version=3)
            res = [error_name(p.partition_error_code.value) for x in r.results_by_topic_v3_and_below
                   for p in x.results_by_partition]
            if res != ["CONCURRENT_TRANSACTIONS(51)"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        b = encode_batch([(k, v, ()) for k, v in records], timestamp_ms=_now_ms(), producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        seq += len(records)
        r = c.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 10000,
                          "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": b}]}]}, version=9)
        res.append(err(r.responses[0].partition_responses[0]))
        r = c.request(26, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                           "committed": commit}, version=3)
        res.append(err(r))
        return res

    def settled(isolation_level: int) -> list[Record]:  # the coordinator writes markers asynchronously
        deadline = time.monotonic() + 30
        while True:
            lso = ctx.list_offsets(c, t, 0, -1, isolation_level=1).offset
            hw = ctx.list_offsets(c, t, 0, -1).offset
            if lso == hw or time.monotonic() > deadline:
                return _read(ctx, c, t, isolation_level=isolation_level)
            time.sleep(0.2)

    _produce(ctx, c, t, [(b"plain", b"p1")])
    out["txns"] = [
        txn([(b"k1", b"c1"), (b"k2", b"c2")], True),
        txn([(b"k1", b"aborted"), (b"only-aborted", b"aborted"), (b"k2", None)], False),  # KAFKA-8351's shape
        txn([(b"k2", b"c2b")], True),
        txn([(b"k2", b"aborted"), (b"plain", None)], False),
    ]
    settled(0)  # the last abort marker written before the next record, so that offsets are the same on both
    _produce(ctx, c, t, [(b"plain", b"p2")])

    def values(records: list[Record]) -> dict[str, Any]:
        return {(k or b"").decode(): None if v is None else v.decode() for _, k, v in records}

    before = settled(1)
    out["read_committed_before"] = values(before)
    out["aborted_visible_before"] = sorted((k or b"").decode() for _, k, v in before if v == b"aborted")
    point = _roll(ctx, c, t, b"roll")
    _start_compacting(ctx, c, t)
    cleaned = _wait_cleaned(ctx, c, t, point)
    out["read_uncommitted_after"] = values(cleaned)
    after = settled(1)
    out["read_committed_after"] = values(after)
    out["aborted_visible_after"] = sorted((k or b"").decode() for _, k, v in after if v == b"aborted")
    out["tombstones_after"] = sorted((k or b"").decode() for _, k, v in cleaned if v is None)
    out["batches_after"] = _layout(ctx, c, t)
    return out
