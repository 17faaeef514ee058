"""Kafka's own DumpLogSegments reads our segments and indexes (skipped without the compat-tests jars)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from storage_batches import NOW_MS, make_batch, make_control_batch

from samsa.storage import Log, LogConfig

ORACLE = Path(__file__).resolve().parent.parent.parent / "compat-tests" / "oracle"


def _have_kafka_jars() -> bool:
    lib = ORACLE / "lib"
    return shutil.which("java") is not None and lib.is_dir() and any(lib.glob("kafka_*.jar"))


@pytest.mark.slow
@pytest.mark.skipif(not _have_kafka_jars(), reason="Kafka jars (compat-tests/oracle/lib) or java missing")
def test_kafka_dump_log_segments_reads_our_files(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=3000, index_interval_bytes=200), now_ms=NOW_MS)
    for i in range(40):
        log.append_as_leader(make_batch([f"v{i}-{k}".encode() * 10 for k in range(3)], base_timestamp=NOW_MS + i,
                                        producer_id=5, producer_epoch=0, base_sequence=3 * i),
                             leader_epoch=1 + i // 20, now_ms=NOW_MS)
    log.append_as_leader(make_control_batch(producer_id=5, producer_epoch=0), leader_epoch=3, now_ms=NOW_MS)
    log.close()
    files = sorted(str(p) for p in directory.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    run = [str(ORACLE / "kafka-run.sh"), "org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(files)]
    out = subprocess.run([*run, "--deep-iteration"], capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.count("isvalid: true") == 41 and "isvalid: false" not in out
    assert "isControl: true" in out and "offset: 119 CreateTime" in out
    out = subprocess.run([*run, "--verify-index-only"], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    assert "mismatch" not in out.lower()
    assert out.count("Dumping") == len(files)
