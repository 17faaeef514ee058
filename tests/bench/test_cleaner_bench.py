"""bench.cleaner times each cleaning from the broker's own report, and its smoke run measures both brokers.

No figure is judged here (the machine is shared); the parse tests check the time is read from the lines each
broker writes, and the smoke run that the bench finds a reported cleaning on both brokers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cleaner import Broker, reported_cleanings

REPO = Path(__file__).resolve().parents[2]

# The lines Kafka's cleaner writes to log-cleaner.log (log4j pattern "[%d] %p %m (%c)%n"), shortened.
KAFKA_LOG = """\
[2026-12-02 12:35:23,412] INFO Cleaner 0: Beginning cleaning of log t-0 (org.apache.kafka.storage.internals.log.Cleaner)
[2026-12-02 12:35:23,412] INFO Cleaner 0: Building offset map... (org.apache.kafka.storage.internals.log.Cleaner)
[2026-12-02 12:35:23,900] INFO Cleaner 0: Beginning cleaning of log t-10 (o.a.k.storage.internals.log.Cleaner)
[2026-12-02 12:35:24,662] INFO [kafka-log-cleaner-thread-0]:
\tLog cleaner thread 0 cleaned log t-0 (dirty section = [0, 16129])
\t16.8 MB of log processed in 1.3 seconds (13.4 MB/sec).
\tIndexed 16.8 MB in 0.1 seconds (221.2 Mb/sec, 6.0% of total time)
 (org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread)
[2026-12-02 12:35:25,000] INFO Cleaner 0: Beginning cleaning of log t-0 (org.apache.kafka.storage.internals.log.Cleaner)
[2026-12-02 12:35:25,250] INFO [kafka-log-cleaner-thread-0]:
\tLog cleaner thread 0 cleaned log t-0 (dirty section = [16129, 17137])
\t1,024.0 MB of log processed in 0.2 seconds (4,096.0 MB/sec).
 (org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread)
"""

SAMSA_LOG = """\
2026-12-02 12:35:20,101 INFO samsa.broker.log_cleaner: log cleaner: cleaned t-0 up to offset 16129 (dirty ratio \
was 1.00) in 0.219 s: 16 segment(s), 17500000 -> 10220000 bytes, 16129 -> 10000 messages, offset map 1.0% full
2026-12-02 12:35:20,101 INFO samsa.broker.log_cleaner: log cleaner: cleaned t-1 up to offset 5 (dirty ratio \
was 1.00) in 9.000 s: 1 segment(s), 10 -> 5 bytes, 2 -> 1 messages, offset map 1.0% full
2026-12-02 12:35:21,000 INFO samsa.broker.log_cleaner: log cleaner: cleaned t-0 up to offset 17137 (dirty ratio \
was 0.10) in 0.031 s: 2 segment(s), 1000 -> 900 bytes, 10 -> 9 messages, offset map 1.0% full
"""


def _broker(name: str, tmp_path: Path, text: str) -> Broker:
    log = tmp_path / f"{name}.log"
    log.write_text(text)
    return Broker(name, "127.0.0.1", 0, 0, tmp_path, log)


def test_kafka_cleanings_timed_from_begin_to_stats(tmp_path: Path) -> None:
    got = reported_cleanings(_broker("kafka", tmp_path, KAFKA_LOG), "t")
    assert [c["seconds"] for c in got] == [1.25, 0.25]  # log4j timestamps, not the one-decimal printout
    assert [c["kafka_printed_seconds"] for c in got] == [1.3, 0.2]
    assert got[1]["bytes_read"] == 1024.0 * 2**20


def test_samsa_cleanings_read_from_its_info_line(tmp_path: Path) -> None:
    got = reported_cleanings(_broker("samsa", tmp_path, SAMSA_LOG), "t")
    assert [(c["seconds"], c["bytes_read"]) for c in got] == [(0.219, 17500000), (0.031, 1000)]  # t-1 left out


@pytest.mark.timeout(600)
def test_cleaner_bench_smoke_against_both_brokers() -> None:
    r = subprocess.run([sys.executable, "-m", "bench.cleaner", "--smoke", "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.splitlines()[-1])
    for name in ("samsa", "kafka"):
        c = result[name]["cleaning"]
        assert c["cleanings"], name
        assert c["seconds"] > 0 and c["segment_bytes_after"] < c["segment_bytes_before"], (name, c)
    assert result["samsa_vs_kafka"]["throughput_ratio"] > 0
