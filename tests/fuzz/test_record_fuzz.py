"""The record-level fuzzer (record_fuzz.py), bounded for the normal test run: 0 crashes, 0 accepted
malformed batches, bounded broker RSS, the broker alive and serving afterwards. `make fuzz` runs it for
an hour."""

from __future__ import annotations

from typing import Any

import record_fuzz

FUZZ_SECONDS = 12.0
FUZZ_CASES = 4000


def test_fuzzed_records_never_crash_nor_get_accepted_when_malformed(samsa: Any) -> None:
    stats = record_fuzz.run("127.0.0.1", samsa.port, samsa.proc.pid, seconds=FUZZ_SECONDS, max_cases=FUZZ_CASES,
                            seed=15)
    assert stats.cases >= 100, stats
    assert stats.crashes == 0, stats.examples
    assert stats.accepted_malformed == 0, stats.examples
    assert stats.refused >= 10 and stats.accepted >= 1, stats  # the mutator makes both kinds
    assert stats.first_rss_mib > 0, stats  # the broker's RSS was read
    assert stats.max_rss_mib - stats.first_rss_mib < record_fuzz.MAX_RSS_GROWTH_MIB, stats  # 256, as `make fuzz`
    assert samsa.proc.poll() is None
