"""The compat scenario, shared by the Python client programs in this directory.

Every client program (``<client>_scenario.py BOOTSTRAP TOPIC``, ``node/scenario.js``,
``java/.../Scenario.java``) does the same thing, with its own client library only:

1. create TOPIC with 3 partitions (replication factor 1) through the client's admin API;
2. read metadata: 3 partitions, ids 0..2, each with a leader that is a broker in the metadata;
3. produce 30 records, key ``key-<i % 5>``, value ``value-<i>``, explicit CreateTime timestamp
   ``T0 + 10*i`` (not kcat: it cannot set one), header ``idx=<i>`` where the client can, acks=all,
   idempotence off explicitly, except the Java client (its default: on) and confluent-kafka (on);
4. check: one partition per key, and in each partition the offsets follow the send order and are
   0, 1, 2, ... (a fresh topic);
5. consume everything back by ASSIGNING the 3 partitions and seeking to the beginning (no group,
   no commits) and check offsets, keys, values, timestamps and headers record by record;
6. list offsets: earliest (0), latest (records in the partition) and by timestamp for three times
   (before all records, the timestamp of record 15, after all records), each expected to be the
   first offset whose timestamp is >= T (or "none": each client's own representation); where the
   client's admin API has it (confluent-kafka, Java), also MAX_TIMESTAMP (KIP-734);
7. print a one-line JSON summary on stdout (used by test_clients.py to compare clients) and exit 0.

Any mismatch: ``MISMATCH [client]: ...`` on stderr, exit 1. Any other error: traceback, exit 2.
The whole program is bounded by ``SCENARIO_TIMEOUT`` seconds (default 90).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

PARTITIONS = 3
N_RECORDS = 30
N_KEYS = 5
TS_STEP = 10
TIMEOUT = float(os.environ.get("SCENARIO_TIMEOUT", "90"))


class Mismatch(Exception):
    """The broker's observable behaviour differs from what the scenario expects."""


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise Mismatch(msg)


@dataclass
class Rec:
    i: int
    key: str
    value: str
    ts: int | None
    headers: dict[str, str] = field(default_factory=dict)
    partition: int = -1
    offset: int = -1


def base_timestamp() -> int:
    """T0: a whole second one minute ago (record timestamps must be within the broker's window)."""
    return (int(time.time()) - 60) * 1000


def plan(t0: int | None) -> list[Rec]:
    return [
        Rec(
            i=i,
            key=f"key-{i % N_KEYS}",
            value=f"value-{i}",
            ts=None if t0 is None else t0 + TS_STEP * i,
            headers={"idx": str(i)},
        )
        for i in range(N_RECORDS)
    ]


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (the Java client's default partitioner hash)."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def java_partition(key: str, partitions: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def check_metadata(partitions: dict[int, int], brokers: set[int]) -> None:
    """``partitions``: partition id -> leader id; ``brokers``: node ids in the metadata."""
    expect(len(brokers) >= 1, f"metadata lists no brokers: {brokers}")
    expect(
        sorted(partitions) == list(range(PARTITIONS)),
        f"expected partitions {list(range(PARTITIONS))}, metadata has {sorted(partitions)}",
    )
    for p, leader in sorted(partitions.items()):
        expect(leader in brokers, f"partition {p}: leader {leader} is not one of the brokers {sorted(brokers)}")


def check_produced(recs: list[Rec]) -> None:
    """Same key -> same partition; per partition, offsets 0,1,2,... in send order."""
    by_key: dict[str, set[int]] = {}
    for r in recs:
        expect(r.partition in range(PARTITIONS), f"record {r.i}: acked partition {r.partition} out of range")
        by_key.setdefault(r.key, set()).add(r.partition)
    for k, ps in sorted(by_key.items()):
        expect(len(ps) == 1, f"key {k} went to several partitions: {sorted(ps)}")
    for p in range(PARTITIONS):
        offs = [r.offset for r in recs if r.partition == p]
        expect(
            offs == list(range(len(offs))),
            f"partition {p}: acked offsets in send order are {offs}, expected 0..{len(offs) - 1}",
        )


def check_consumed(recs: list[Rec], consumed: list[Rec], *, headers: bool = True) -> None:
    """``consumed`` as read back (any interleaving of partitions, each in offset order)."""
    expect(len(consumed) == len(recs), f"consumed {len(consumed)} records, produced {len(recs)}")
    for p in range(PARTITIONS):
        want = [r for r in recs if r.partition == p]
        got = [c for c in consumed if c.partition == p]
        expect(
            [c.offset for c in got] == [r.offset for r in want],
            f"partition {p}: consumed offsets {[c.offset for c in got]}, expected {[r.offset for r in want]}",
        )
        for w, g in zip(want, got, strict=True):
            where = f"partition {p} offset {w.offset}"
            expect(g.key == w.key, f"{where}: key {g.key!r}, expected {w.key!r}")
            expect(g.value == w.value, f"{where}: value {g.value!r}, expected {w.value!r}")
            if w.ts is not None:
                expect(g.ts == w.ts, f"{where}: timestamp {g.ts}, expected {w.ts}")
            if headers:
                expect(g.headers == w.headers, f"{where}: headers {g.headers}, expected {w.headers}")


def offset_times(recs: list[Rec]) -> list[int]:
    """The three ListOffsets timestamps: before everything, record 15's, after everything."""
    ts = [r.ts for r in recs if r.ts is not None]
    assert len(ts) == len(recs)
    return [min(ts) - 1000, recs[N_RECORDS // 2].ts, max(ts) + 1000]  # type: ignore[list-item]


def expected_offset_for_time(recs: list[Rec], partition: int, t: int) -> int | None:
    """Kafka: the first offset whose timestamp is >= t; None when there is none."""
    offs = [r.offset for r in recs if r.partition == partition and r.ts is not None and r.ts >= t]
    return min(offs) if offs else None


def check_offsets(
    recs: list[Rec],
    earliest: dict[int, int],
    latest: dict[int, int],
    by_time: dict[int, dict[int, int | None]],
) -> None:
    """``by_time[t][p]`` is the offset for timestamp t, None when the client says "no such offset"."""
    for p in range(PARTITIONS):
        n = sum(1 for r in recs if r.partition == p)
        expect(earliest.get(p) == 0, f"partition {p}: earliest offset {earliest.get(p)}, expected 0")
        expect(latest.get(p) == n, f"partition {p}: latest offset {latest.get(p)}, expected {n}")
    for t, got in by_time.items():
        for p in range(PARTITIONS):
            want = expected_offset_for_time(recs, p, t)
            expect(got.get(p, "missing") == want, f"partition {p}: offset for time {t} is {got.get(p)}, "
                   f"expected {want} (first offset with timestamp >= {t})")


def check_max_timestamp(recs: list[Rec], got: dict[int, tuple[int, int] | None]) -> None:
    """ListOffsets MAX_TIMESTAMP (-3): per partition (offset, timestamp) of the record with the largest
    timestamp (here the last one), None for an empty partition."""
    for p in range(PARTITIONS):
        mine = [r for r in recs if r.partition == p]
        want = None if not mine else (max(r.offset for r in mine), max(r.ts for r in mine if r.ts is not None))
        expect(got.get(p) == want, f"partition {p}: max-timestamp offset is {got.get(p)}, expected {want}")


def summary(client: str, recs: list[Rec]) -> dict[str, object]:
    return {
        "client": client,
        "key_partition": {r.key: r.partition for r in recs},
        "partition_counts": {str(p): sum(1 for r in recs if r.partition == p) for p in range(PARTITIONS)},
        "records": [[r.partition, r.offset, r.key, r.value] for r in recs],
    }


def run(client: str, scenario: Callable[[str, str], dict[str, object]]) -> None:
    """Entry point of a client program: ``scenario(bootstrap, topic)`` returns the summary."""
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} BOOTSTRAP TOPIC", file=sys.stderr)
        sys.exit(2)

    def on_alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"scenario did not finish within {TIMEOUT:.0f}s")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        result = scenario(sys.argv[1], sys.argv[2])
    except Mismatch as e:
        print(f"MISMATCH [{client}]: {e}", file=sys.stderr, flush=True)
        os._exit(1)  # do not wait for client threads that may hang on a broken broker
    except BaseException:
        traceback.print_exc()
        print(f"ERROR [{client}]: the scenario raised (see traceback above)", file=sys.stderr, flush=True)
        os._exit(2)
    signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps(result, sort_keys=True), flush=True)
    os._exit(0)


def retry_until(fn: Callable[[], object], what: str, timeout: float = 15.0) -> object:
    """Call ``fn`` until it returns a truthy value (metadata propagation after CreateTopics)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # retried: e.g. UNKNOWN_TOPIC_OR_PARTITION right after creation
            last = e
        time.sleep(0.2)
    raise Mismatch(f"{what} not ready within {timeout}s (last: {last!r})")
