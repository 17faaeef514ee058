"""A data directory belongs to one broker process: `.lock` (flock) and meta.properties's node and cluster ids."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.kproto.records import decode_batches, encode_batch
from samsa.storage.dir_lock import DataDirLock, DataDirLockedError

REPO = Path(__file__).resolve().parents[2]
EXIT_TIMEOUT_S = 30


def free_port() -> int:
    return launcher.free_port()  # outside the ephemeral range, a slice per xdist worker: no port race


def _serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`samsa serve` that is expected to refuse to start: it must exit by itself, at once."""
    return subprocess.run(
        [sys.executable, "-m", "samsa.broker.cli", "serve", "--data-dir", str(data_dir),
         "--listen", f"127.0.0.1:{free_port()}", *args],
        cwd=REPO, capture_output=True, text=True, timeout=EXIT_TIMEOUT_S,
    )


def _produce_and_read(conn: Any, topic: str, value: bytes) -> tuple[int, list[bytes]]:
    batch = encode_batch([(None, value, ())], timestamp_ms=int(time.time() * 1000))
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 5000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    part = r.responses[0].partition_responses[0]
    assert part.error_code.value == 0
    f = conn.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                         "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                         "topics": [{"topic": topic, "partitions": [{
                             "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    records = f.responses[0].partitions[0].records or b""
    values = [rec.value for _, recs in decode_batches(records, max_decompressed_bytes=1 << 20) for rec in recs]
    return part.base_offset, values


def test_second_broker_on_the_same_directory_exits_at_once_and_the_first_keeps_its_data(
        samsa_factory: Any, tmp_path: Path) -> None:
    first = samsa_factory()
    first.start()
    with first.connect() as conn:
        conn.request(19, {"topics": [{"name": "owned", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 5000, "validate_only": False})
        assert _produce_and_read(conn, "owned", b"first") == (0, [b"first"])

    second = _serve(first.data_dir)
    assert second.returncode != 0
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, second.stderr
    assert str(first.data_dir) in lines[0] and ".lock" in lines[0]

    # The first broker was not disturbed: its record is still at offset 0 and the next lands at 1.
    with first.connect() as conn:
        assert _produce_and_read(conn, "owned", b"second") == (1, [b"first", b"second"])
    assert first.stop() == 0


def test_the_lock_dies_with_the_process(samsa_factory: Any) -> None:
    s = samsa_factory()
    s.start()
    s.stop(kill=True)  # SIGKILL: nothing ran to release the lock; the kernel dropped the flock
    again = samsa_factory(data_dir=s.data_dir)
    again.start()
    assert again.proc is not None and again.proc.poll() is None
    again.stop()


def test_a_directory_of_another_node_or_cluster_is_refused(samsa_factory: Any) -> None:
    s = samsa_factory(extra_args=("--node-id", "1"))
    s.start()
    assert s.stop() == 0
    meta = (s.data_dir / "meta.properties").read_text()
    assert "node.id=1" in meta and "cluster.id=" in meta and "directory.id=" in meta and "version=1" in meta

    other_node = _serve(s.data_dir, "--node-id", "2")
    assert other_node.returncode != 0
    assert "node 1" in other_node.stderr and "node 2" in other_node.stderr

    other_cluster = _serve(s.data_dir, "--node-id", "1", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA")
    assert other_cluster.returncode != 0
    assert "AAAAAAAAAAAAAAAAAAAAAA" in other_cluster.stderr


def test_lock_is_exclusive_within_one_process_too(tmp_path: Path) -> None:
    lock = DataDirLock(tmp_path)
    with pytest.raises(DataDirLockedError, match=str(tmp_path)):
        DataDirLock(tmp_path)
    lock.release()
    DataDirLock(tmp_path).release()  # free again once released
