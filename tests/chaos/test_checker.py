"""The chaos checker on hand-built histories: a clean one reports nothing, and each violation kind is
reported by a history made to have exactly that fault (so each check can fail)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chaos.checker import KINDS, History, Outcome, Poll, Seek, Send, check


def acked(value: str, partition: int, offset: int, writer: str = "w0") -> Send:
    return Send(writer, value, partition, Outcome.ACKED, offset)


def history(sends: Sequence[Send], polls: Sequence[Poll | Seek], drain: dict[int, list[tuple[int, str]]],
            drain_end: dict[int, int] | None = None) -> History:
    ends = drain_end if drain_end is not None else {p: len(r) for p, r in drain.items()}
    return History(tuple(sends), tuple(polls), drain, ends)


def clean() -> History:
    """Two partitions, two writers, two consumers (one re-reading after a seek), an indeterminate send that
    landed, one that did not, a failed one that did not."""
    sends = [acked("a0", 0, 0), acked("a1", 0, 1, "w1"), acked("a2", 0, 2), acked("b0", 1, 0, "w1"),
             Send("w0", "b1", 1, Outcome.INDETERMINATE, error="timed out"), acked("b2", 1, 2),
             Send("w1", "b3", 1, Outcome.INDETERMINATE, error="timed out"),
             Send("w0", "a3", 0, Outcome.FAILED, error="INVALID_RECORD")]
    drain = {0: [(0, "a0"), (1, "a1"), (2, "a2")], 1: [(0, "b0"), (1, "b1"), (2, "b2")]}
    polls: list[Poll | Seek] = [
        Seek("c1", 0, 0), Seek("c1", 1, 0),
        Poll("c1", 0, ((0, "a0"), (1, "a1"))), Poll("c1", 1, ((0, "b0"),)), Poll("c1", 0, ((2, "a2"),)),
        Seek("c2", 1, 0), Poll("c2", 1, ((0, "b0"), (1, "b1"))),
        Seek("c2", 1, 0), Poll("c2", 1, ((0, "b0"),)), Poll("c2", 1, ((1, "b1"), (2, "b2"))),
    ]
    return history(sends, polls, drain)


def test_a_clean_history_reports_no_violation() -> None:
    result = check(clean())
    assert result.ok, result.summary()
    assert (result.acked_count, result.failed_count, result.indeterminate_count) == (5, 1, 2)
    assert result.read_count == 6
    assert result.indeterminate_found_count == 1
    assert result.counts() == dict.fromkeys(KINDS, 0)


def only(h: History, kind: str) -> list[str]:
    """The details of the violations `h` has, asserting they are all of `kind`."""
    result = check(h)
    nonzero = {k: n for k, n in result.counts().items() if n}
    assert set(nonzero) == {kind}, result.summary()
    return [v.detail for v in result.violations[kind]]


def test_lost_an_acked_value_replaced_below_what_the_drain_read() -> None:
    # a1 was acked at offset 1; a failover truncated it and an indeterminate x took offset 1.
    sends = [acked("a0", 0, 0), acked("a1", 0, 1), Send("w1", "x", 0, Outcome.INDETERMINATE, error="t"),
             acked("a2", 0, 2)]
    result = check(history(sends, [], {0: [(0, "a0"), (1, "x"), (2, "a2")]}))
    assert [v.detail for v in result.violations["lost"]] == [
        "'a1' (writer w0) acked at partition 0 offset 1; the drain read up to offset 2"]
    assert set(result.violations) == {"lost", "inconsistent_offsets"}


def test_lost_alone() -> None:
    # The drain has a later record (offset 1, an indeterminate send) but not the acked a0 at offset 0?
    # Not possible without also being a gap or an inconsistency, so lost comes with them; here the
    # drain is told the log starts at 1 (drain_end 0 skips the gap check) to isolate the kind.
    sends = [acked("a0", 0, 0), Send("w0", "a1", 0, Outcome.INDETERMINATE, error="timeout")]
    h = history(sends, [], {0: [(1, "a1")]}, {0: 0})
    assert only(h, "lost") == ["'a0' (writer w0) acked at partition 0 offset 0; the drain read up to offset 1"]


def test_unseen_an_acked_value_past_the_end_of_the_log() -> None:
    sends = [acked("a0", 0, 0), acked("a1", 0, 1)]
    h = history(sends, [Seek("c1", 0, 0), Poll("c1", 0, ((0, "a0"),))], {0: [(0, "a0")]})
    assert only(h, "unseen") == ["'a1' (writer w0) acked at partition 0 offset 1; the drain read only up to offset 0"]


def test_duplicates_one_value_at_two_offsets() -> None:
    # A retried batch appended twice: b0 at offsets 0 and 1, the writer was told 0.
    sends = [acked("b0", 1, 0)]
    h = history(sends, [], {1: [(0, "b0"), (1, "b0")]})
    result = check(h)
    assert [v.detail for v in result.violations["duplicates"]] == ["'b0' at partition 1 offset 0, partition 1 offset 1"]
    assert set(result.violations) == {"duplicates", "acked_offset_mismatch"}
    # Unacked (indeterminate), so only the duplicate shows.
    h = history([Send("w0", "b0", 1, Outcome.INDETERMINATE, error="timeout")], [], {1: [(0, "b0"), (1, "b0")]})
    assert only(h, "duplicates") == ["'b0' at partition 1 offset 0, partition 1 offset 1"]


def test_inconsistent_offsets_two_readers_disagree() -> None:
    sends = [Send("w0", v, 0, Outcome.INDETERMINATE, error="timeout") for v in ("a0", "x0", "a1")]
    # c1 read x0 at offset 0 before a failover truncated it; the log now holds a0 there.
    polls: list[Poll | Seek] = [Seek("c1", 0, 0), Poll("c1", 0, ((0, "x0"),))]
    h = history(sends, polls, {0: [(0, "a0"), (1, "a1")]})
    assert only(h, "inconsistent_offsets") == ["partition 0 offset 0 holds ['a0', 'x0']"]


def test_inconsistent_offsets_two_acks_for_one_offset() -> None:
    sends = [acked("a0", 0, 0), acked("a1", 0, 0, "w1"), Send("w0", "a2", 0, Outcome.INDETERMINATE, error="t")]
    h = history(sends, [], {0: [(0, "a0")]}, {0: 1})
    result = check(h)
    assert [v.detail for v in result.violations["inconsistent_offsets"]] == ["partition 0 offset 0 holds ['a0', 'a1']"]
    assert set(result.violations) == {"inconsistent_offsets", "unseen"}  # a1 is nowhere


def test_acked_offset_mismatch_the_value_is_elsewhere() -> None:
    # The broker answered offset 5 but appended at offset 1 (nothing else claims 5).
    sends = [acked("a0", 0, 0), acked("a1", 0, 5)]
    h = history(sends, [], {0: [(0, "a0"), (1, "a1")]})
    assert only(h, "acked_offset_mismatch") == ["'a1' acked at partition 0 offset 5, read at partition 0 offset 1"]


def test_acked_offset_mismatch_in_another_partition() -> None:
    sends = [acked("a0", 0, 0)]
    h = history(sends, [], {0: [], 1: [(0, "a0")]}, {0: 0, 1: 1})
    result = check(h)
    assert len(result.violations["acked_offset_mismatch"]) == 1
    assert [v.detail for v in result.violations["unexpected"]] == [
        "'a0' sent to partition 0, read at partition 1 offset 0"]


def test_acked_without_an_offset_must_be_in_its_partition() -> None:
    sends = [acked("a0", 0, 0), Send("w0", "a1", 0, Outcome.ACKED, None)]
    result = check(history(sends, [], {0: [(0, "a0"), (1, "a1")]}))
    assert result.ok and result.acked_without_offset_count == 1
    h = history(sends, [], {0: [(0, "a0")]})
    assert only(h, "lost") == ["'a1' (writer w0) acked at partition 0 no offset; the drain read up to offset 0"]
    h = history(sends, [], {0: [(0, "a0")], 1: [(0, "a1")]})
    assert only(h, "unexpected") == ["'a1' sent to partition 0, read at partition 1 offset 0"]


def test_nonmonotonic_polls_a_consumer_goes_back_without_a_seek() -> None:
    sends = [acked(f"a{i}", 0, i) for i in range(3)]
    polls: list[Poll | Seek] = [Seek("c1", 0, 0), Poll("c1", 0, ((0, "a0"), (1, "a1"))),
                                Poll("c1", 0, ((1, "a1"), (2, "a2")))]
    h = history(sends, polls, {0: [(0, "a0"), (1, "a1"), (2, "a2")]})
    assert only(h, "nonmonotonic_polls") == ["c1 read partition 0 offset 1 after offset 1"]
    # The same reads with a seek in between are fine.
    polls.insert(2, Seek("c1", 0, 1))
    assert check(history(sends, polls, {0: [(0, "a0"), (1, "a1"), (2, "a2")]})).ok
    # Per partition: offset 0 of partition 1 after offset 2 of partition 0 is not going back.
    polls = [Seek("c1", 0, 0), Seek("c1", 1, 0), Poll("c1", 0, ((0, "a0"), (1, "a1"), (2, "a2"))),
             Poll("c1", 1, ((0, "b0"),))]
    assert check(history([*sends, acked("b0", 1, 0)], polls,
                         {0: [(0, "a0"), (1, "a1"), (2, "a2")], 1: [(0, "b0")]})).ok


def test_poll_skips_after_a_seek() -> None:
    sends = [acked(f"a{i}", 0, i) for i in range(3)]
    polls: list[Poll | Seek] = [Seek("c1", 0, 0), Poll("c1", 0, ((2, "a2"),))]
    assert only(history(sends, polls, {0: [(0, "a0"), (1, "a1"), (2, "a2")]}), "poll_skips") == [
        "c1 read partition 0 offset 2 after seeking to 0, skipping 0-1 that the log holds"]


def test_poll_skips_only_where_the_log_has_records() -> None:
    sends = [acked(f"a{i}", 0, i) for i in range(4)]
    drain = {0: [(0, "a0"), (1, "a1"), (2, "a2"), (3, "a3")]}
    polls: list[Poll | Seek] = [Seek("c1", 0, 0), Poll("c1", 0, ((0, "a0"),)), Poll("c1", 0, ((3, "a3"),))]
    assert only(history(sends, polls, drain), "poll_skips") == [
        "c1 read partition 0 offset 3 after offset 0, skipping 1-2 that the log holds"]
    # The consumer saw a gap that the log also has: reported once, as a gap in the log, not as a skip.
    sends = [acked("a0", 0, 0), acked("a3", 0, 3)]
    drain = {0: [(0, "a0"), (3, "a3")]}
    assert only(history(sends, polls, drain, {0: 4}), "log_gaps") == [
        "partition 0: the drain to 4 lacks offsets 1-2"]


def test_log_gaps_the_drain_misses_offsets_below_the_high_watermark() -> None:
    sends = [Send("w0", f"a{i}", 0, Outcome.INDETERMINATE, error="t") for i in range(5)]
    drain = {0: [(0, "a0"), (2, "a2"), (4, "a4")]}
    assert only(history(sends, [], drain, {0: 6}), "log_gaps") == [
        "partition 0: the drain to 6 lacks offsets 1, 3, 5"]


def test_the_drain_itself_must_be_monotonic() -> None:
    sends = [acked("a0", 0, 0), acked("a1", 0, 1)]
    drain = {0: [(0, "a0"), (1, "a1"), (0, "a0")]}
    assert only(history(sends, [], drain, {0: 2}), "nonmonotonic_polls") == [
        "drain read partition 0 offset 0 after offset 1"]


@pytest.mark.parametrize("outcome", [None, Outcome.FAILED])
def test_unexpected_a_value_never_sent_or_known_failed(outcome: Outcome | None) -> None:
    sends = [acked("a0", 0, 0)]
    if outcome is not None:
        sends.append(Send("w0", "zz", 0, outcome, error="MESSAGE_TOO_LARGE"))
    h = history(sends, [], {0: [(0, "a0"), (1, "zz")]})
    expected = ("'zz' read at partition 0 offset 1, never sent" if outcome is None
                else "'zz' read at partition 0 offset 1, but its send failed (MESSAGE_TOO_LARGE)")
    assert only(h, "unexpected") == [expected]


def test_summary_names_every_kind_and_examples() -> None:
    sends = [acked("a0", 0, 0), acked("a1", 0, 1)]
    text = check(history(sends, [], {0: [(0, "a0")]})).summary()
    assert "unseen 1" in text and "lost 0" in text
    assert "unseen: 'a1' (writer w0) acked at partition 0 offset 1" in text
