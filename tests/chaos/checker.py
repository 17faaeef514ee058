"""A pure checker over a chaos run's history, in the style of Jepsen's Kafka workload: no I/O, no
clock, one answer for one history.

The history holds
  * sends: one per value a writer tried to produce, with the partition it was sent to and its outcome
    (ACKED with the offset the broker returned, FAILED when the write is known not to have happened,
    INDETERMINATE when it may or may not have happened: a timeout, a lost connection, a fatal error);
  * polls: what each consumer read, in order, one entry per consumer, partition and poll call, with
    the seeks that consumer made (a seek resets where its next read may start);
  * the drain: after the faults are healed, a fresh consumer reads every partition from offset 0 up
    to the high watermark it looked up first (`drain_end`).

Why a gap between two offsets a consumer reads is a violation here. Kafka's offsets are dense in a
partition's log except where the log itself makes them sparse: compaction removes records, and a
transactional producer's commit/abort markers take offsets no consumer is shown. The chaos topic is
`cleanup.policy=delete` with nothing old enough to delete, and its writers are idempotent but not
transactional, so every offset in [0, high watermark) holds exactly one record a consumer receives.
Two consequences, both checked:
  * the drain must hold every offset in [0, drain_end) (`log_gaps`);
  * a consumer that reads offset a and then offset b > a + 1 of the same partition, without seeking
    in between, skipped the records the drain found between them (`poll_skips`). A gap the drain
    has no records for is not counted there: it is already a `log_gaps` violation, or the records
    were truncated (which `lost`/`inconsistent_offsets` report).

The violation kinds (Jepsen's names where there is one):
  lost                  acked, absent from the drain, though the drain read a higher offset of its partition
  unseen                acked, absent from the drain, and the drain read nothing at or past its acked offset
  duplicates            one value at two or more (partition, offset) positions
  inconsistent_offsets  two different values at one (partition, offset), across every reader and every ack
  acked_offset_mismatch acked at (p, o), but read at another position
  nonmonotonic_polls    a consumer read offset b <= a after reading a of the same partition, without a seek
  poll_skips            see above
  log_gaps              offsets below drain_end that the drain did not return
  unexpected            a value read that no writer sent, or whose send FAILED (known not written),
                        or read in another partition than it was sent to
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

DRAIN = "drain"  # the reader name the drain's records carry in violations


class Outcome(enum.Enum):
    ACKED = "acked"
    FAILED = "failed"
    INDETERMINATE = "indeterminate"


@dataclass(frozen=True, slots=True)
class Send:
    writer: str
    value: str
    partition: int
    outcome: Outcome
    # The offset the broker acknowledged; only for ACKED, and None there when the client reported success
    # without one: librdkafka acks a batch whose own answer it lost "implicitly" once a later batch of
    # the same partition succeeds (rd_kafka_dr_implicit_ack), and on DUPLICATE_SEQUENCE_NUMBER.
    offset: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        assert self.outcome is Outcome.ACKED or self.offset is None, self


@dataclass(frozen=True, slots=True)
class Poll:
    """Records one poll call gave `consumer` from one partition, in the order it gave them."""

    consumer: str
    partition: int
    records: tuple[tuple[int, str], ...]  # (offset, value)


@dataclass(frozen=True, slots=True)
class Seek:
    """`consumer` (re)positioned on `partition`: the next read may start anywhere at or after `offset`
    without being a skip, and may go back without being non-monotonic."""

    consumer: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class History:
    sends: Sequence[Send]
    polls: Sequence[Poll | Seek]  # in each consumer's order (consumers may interleave)
    drain: Mapping[int, Sequence[tuple[int, str]]]  # partition -> (offset, value), as the drain read them
    drain_end: Mapping[int, int]  # partition -> the high watermark the drain read up to (exclusive)


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class CheckResult:
    acked_count: int
    failed_count: int
    indeterminate_count: int
    read_count: int  # distinct values in the drain
    indeterminate_found_count: int  # indeterminate sends that did land (in the drain)
    acked_without_offset_count: int  # acked, the client told no offset (see Send.offset)
    violations: Mapping[str, tuple[Violation, ...]] = field(default_factory=dict)

    @property
    def violation_count(self) -> int:
        return sum(len(v) for v in self.violations.values())

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    def counts(self) -> dict[str, int]:
        return {kind: len(self.violations.get(kind, ())) for kind in KINDS}

    def summary(self, examples: int = 5) -> str:
        lines = [f"acked {self.acked_count} ({self.acked_without_offset_count} without an offset), failed "
                 f"{self.failed_count}, indeterminate {self.indeterminate_count} ({self.indeterminate_found_count} "
                 f"of them landed), {self.read_count} values in the drain",
                 "violations: " + ", ".join(f"{k} {n}" for k, n in self.counts().items())]
        for kind in KINDS:
            for v in self.violations.get(kind, ())[:examples]:
                lines.append(f"  {kind}: {v.detail}")
            more = len(self.violations.get(kind, ())) - examples
            if more > 0:
                lines.append(f"  {kind}: ... and {more} more")
        return "\n".join(lines)


KINDS = ("lost", "unseen", "duplicates", "inconsistent_offsets", "acked_offset_mismatch", "nonmonotonic_polls",
         "poll_skips", "log_gaps", "unexpected")

Position = tuple[int, int]  # (partition, offset)


def check(history: History) -> CheckResult:
    found: dict[str, set[Position]] = defaultdict(set)  # value -> every position any reader saw it at
    at: dict[Position, set[str]] = defaultdict(set)  # position -> every value any reader or ack put there
    in_drain: dict[str, set[Position]] = defaultdict(set)
    for partition, records in history.drain.items():
        for offset, value in records:
            found[value].add((partition, offset))
            at[(partition, offset)].add(value)
            in_drain[value].add((partition, offset))
    for event in history.polls:
        if isinstance(event, Poll):
            for offset, value in event.records:
                found[value].add((event.partition, offset))
                at[(event.partition, offset)].add(value)
    sends = {s.value: s for s in history.sends}
    assert len(sends) == len(history.sends), "writers must send unique values"
    for s in history.sends:
        if s.outcome is Outcome.ACKED and s.offset is not None:
            at[(s.partition, s.offset)].add(s.value)

    v: dict[str, list[Violation]] = {kind: [] for kind in KINDS}
    drain_max = {p: max((o for o, _ in records), default=-1) for p, records in history.drain.items()}

    for s in history.sends:
        if s.outcome is not Outcome.ACKED:
            continue
        told = "no offset" if s.offset is None else f"offset {s.offset}"
        if not in_drain.get(s.value):
            where = f"{s.value!r} (writer {s.writer}) acked at partition {s.partition} {told}"
            last = drain_max.get(s.partition, -1)
            if s.offset is None or last > s.offset:  # without an offset: gone, whatever came after it
                v["lost"].append(Violation("lost", f"{where}; the drain read up to offset {last}"))
            else:
                v["unseen"].append(Violation("unseen", f"{where}; the drain read only up to offset {last}"))
        elsewhere = sorted(found.get(s.value, set()) - {(s.partition, s.offset)})
        if elsewhere and s.offset is not None:  # without an offset, anywhere in its partition will do
            v["acked_offset_mismatch"].append(Violation(
                "acked_offset_mismatch",
                f"{s.value!r} acked at partition {s.partition} {told}, read at "
                + ", ".join(f"partition {p} offset {o}" for p, o in elsewhere)))

    for value, positions in sorted(found.items()):
        if len(positions) > 1:
            v["duplicates"].append(Violation(
                "duplicates", f"{value!r} at " + ", ".join(f"partition {p} offset {o}" for p, o in sorted(positions))))
        sent = sends.get(value)
        if sent is None:
            v["unexpected"].append(Violation("unexpected", f"{value!r} read at {_positions(positions)}, never sent"))
        elif sent.outcome is Outcome.FAILED:
            v["unexpected"].append(Violation(
                "unexpected", f"{value!r} read at {_positions(positions)}, but its send failed ({sent.error})"))
        elif any(p != sent.partition for p, _ in positions):
            v["unexpected"].append(Violation(
                "unexpected", f"{value!r} sent to partition {sent.partition}, read at {_positions(positions)}"))

    for (partition, offset), values in sorted(at.items()):
        if len(values) > 1:
            v["inconsistent_offsets"].append(Violation(
                "inconsistent_offsets", f"partition {partition} offset {offset} holds {sorted(values)}"))

    for partition, end in sorted(history.drain_end.items()):
        have = {o for o, _ in history.drain.get(partition, ())}
        missing = [o for o in range(end) if o not in have]
        if missing:
            v["log_gaps"].append(Violation(
                "log_gaps", f"partition {partition}: the drain to {end} lacks offsets {_ranges(missing)}"))

    drain_offsets = {p: sorted(o for o, _ in records) for p, records in history.drain.items()}
    _check_poll_order(history.polls, drain_offsets, v)
    _check_poll_order(_drain_as_polls(history.drain), drain_offsets, v)

    counts = {o: sum(1 for s in history.sends if s.outcome is o) for o in Outcome}
    return CheckResult(
        acked_count=counts[Outcome.ACKED], failed_count=counts[Outcome.FAILED],
        indeterminate_count=counts[Outcome.INDETERMINATE], read_count=len(in_drain),
        indeterminate_found_count=sum(1 for s in history.sends
                                      if s.outcome is Outcome.INDETERMINATE and s.value in in_drain),
        acked_without_offset_count=sum(1 for s in history.sends if s.outcome is Outcome.ACKED and s.offset is None),
        violations={kind: tuple(found_) for kind, found_ in v.items() if found_})


def _drain_as_polls(drain: Mapping[int, Sequence[tuple[int, str]]]) -> list[Poll | Seek]:
    events: list[Poll | Seek] = []
    for partition, records in sorted(drain.items()):
        events.append(Seek(DRAIN, partition, 0))
        events.append(Poll(DRAIN, partition, tuple(records)))
    return events


def _check_poll_order(events: Iterable[Poll | Seek], drain_offsets: Mapping[int, Sequence[int]],
                      v: dict[str, list[Violation]]) -> None:
    last: dict[tuple[str, int], int] = {}  # (consumer, partition) -> the last offset it read
    floor: dict[tuple[str, int], int] = {}  # after a seek: the offset the next read may start from
    for event in events:
        key = (event.consumer, event.partition)
        if isinstance(event, Seek):
            last.pop(key, None)
            floor[key] = event.offset
            continue
        for offset, _value in event.records:
            previous = last.get(key)
            if previous is None:
                start = floor.pop(key, None)
                if start is not None and offset > start:
                    _maybe_skip(event, start - 1, offset, f"seeking to {start}", drain_offsets, v)
            elif offset <= previous:
                v["nonmonotonic_polls"].append(Violation(
                    "nonmonotonic_polls",
                    f"{event.consumer} read partition {event.partition} offset {offset} after offset {previous}"))
            elif offset > previous + 1:
                _maybe_skip(event, previous, offset, f"offset {previous}", drain_offsets, v)
            last[key] = offset


def _maybe_skip(event: Poll, previous: int, offset: int, after: str, drain_offsets: Mapping[int, Sequence[int]],
                v: dict[str, list[Violation]]) -> None:
    between = [o for o in drain_offsets.get(event.partition, ()) if previous < o < offset]
    if between:
        v["poll_skips"].append(Violation(
            "poll_skips", f"{event.consumer} read partition {event.partition} offset {offset} after {after}, "
                          f"skipping {_ranges(between)} that the log holds"))


def _positions(positions: Iterable[Position]) -> str:
    return ", ".join(f"partition {p} offset {o}" for p, o in sorted(positions))


def _ranges(offsets: Sequence[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7' (at most 10 ranges)."""
    ranges: list[tuple[int, int]] = []
    for o in offsets:
        if ranges and ranges[-1][1] == o - 1:
            ranges[-1] = (ranges[-1][0], o)
        else:
            ranges.append((o, o))
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:10])
    return text + (f" and {len(ranges) - 10} more ranges" if len(ranges) > 10 else "")
