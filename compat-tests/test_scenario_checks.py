"""The scenario checks themselves catch what they claim to (no broker needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "clients"))

import scenario_common as sc
from scenario_common import java_partition, murmur2


def produced() -> list[sc.Rec]:
    recs = sc.plan(1_000_000)
    next_offset = [0, 0, 0]
    for r in recs:
        r.partition = java_partition(r.key, sc.PARTITIONS)
        r.offset = next_offset[r.partition]
        next_offset[r.partition] += 1
    return recs


def copy(recs: list[sc.Rec]) -> list[sc.Rec]:
    return [sc.Rec(r.i, r.key, r.value, r.ts, dict(r.headers), r.partition, r.offset) for r in recs]


def test_murmur2_matches_kafka_utils_test_vectors() -> None:
    # from Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
    vectors = {
        "21": -973932308,
        "foobar": -790332482,
        "a-little-bit-long-string": -985981536,
        "a-little-bit-longer-string": -1486304829,
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        "abc": 479470107,
    }
    for s, want in vectors.items():
        got = murmur2(s.encode())
        assert (got - (1 << 32) if got >= 1 << 31 else got) == want, s


def test_good_run_passes() -> None:
    recs = produced()
    sc.check_produced(recs)
    sc.check_consumed(recs, copy(recs))
    earliest = dict.fromkeys(range(3), 0)
    latest = {p: sum(r.partition == p for r in recs) for p in range(3)}
    by_time = {t: {p: sc.expected_offset_for_time(recs, p, t) for p in range(3)} for t in sc.offset_times(recs)}
    sc.check_offsets(recs, earliest, latest, by_time)
    t_mid = sc.offset_times(recs)[1]
    assert by_time[t_mid][recs[15].partition] == recs[15].offset
    assert all(v is None for v in by_time[sc.offset_times(recs)[2]].values())


def test_key_in_two_partitions_is_caught() -> None:
    recs = produced()
    recs[7].partition = (recs[7].partition + 1) % 3
    with pytest.raises(sc.Mismatch, match="several partitions"):
        sc.check_produced(recs)


def test_reordered_offsets_are_caught() -> None:
    recs = produced()
    same = [r for r in recs if r.partition == recs[0].partition]
    same[0].offset, same[1].offset = same[1].offset, same[0].offset
    with pytest.raises(sc.Mismatch, match="acked offsets"):
        sc.check_produced(recs)


@pytest.mark.parametrize("field", ["value", "ts", "headers", "missing"])
def test_consumed_differences_are_caught(field: str) -> None:
    recs = produced()
    got = copy(recs)
    if field == "value":
        got[3].value = "other"
    elif field == "ts":
        got[3].ts = (got[3].ts or 0) + 1
    elif field == "headers":
        got[3].headers = {}
    else:
        del got[3]
    with pytest.raises(sc.Mismatch):
        sc.check_consumed(recs, got)


def test_wrong_offset_for_time_is_caught() -> None:
    recs = produced()
    earliest = dict.fromkeys(range(3), 0)
    latest = {p: sum(r.partition == p for r in recs) for p in range(3)}
    t_mid = sc.offset_times(recs)[1]
    by_time = {t_mid: {p: sc.expected_offset_for_time(recs, p, t_mid) for p in range(3)}}
    by_time[t_mid][0] = latest[0]  # "latest" instead of "none"/first match
    with pytest.raises(sc.Mismatch, match="offset for time"):
        sc.check_offsets(recs, earliest, latest, by_time)
