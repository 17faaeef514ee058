"""Issue 15 part 2 against a real broker process: a failed or refused metadata-log write never wedges the
control plane. Free disk under samsa.min.free.disk.bytes refuses creating writes with an error code while
deletes and reads work (also for a broker started that way); once the disk is freed everything works
again; a metadata-log fsync that fails after the Raft core advanced stops the broker loudly (exit 1).

The broker runs through tests/broker/disk_fault_launcher.py (samsa.broker.launcher starts it, with that
script as the program), which lets the test set the free-disk figure and fail fsync with files in a
control directory.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.broker.launcher import LaunchError, ServeOptions, ServeProcess, free_port, start_serve
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.raft_disk import read_entries
from samsa.broker.metadata.records import BrokerRegistrationChangeRecord, decode_records
from samsa.kproto.records import encode_batch
from samsa.raft.log import EntryKind
from samsa.storage.log import Log

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).resolve().parent / "disk_fault_launcher.py"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
RESERVE = ("samsa.min.free.disk.bytes=1000000",)
KAFKA_STORAGE_ERROR = 56


class Broker:
    """One broker under disk_fault_launcher.py, started and stopped through samsa.broker.launcher (by PID)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.control = root / "control"
        self.control.mkdir(parents=True, exist_ok=True)
        self.data_dir = root / "data"
        self.port = free_port()
        self.log_path = root / "samsa.log"
        self.proc: ServeProcess | None = None

    def start(self) -> None:
        options = ServeOptions(data_dir=self.data_dir, port=self.port, overrides=RESERVE,
                               program=(sys.executable, str(LAUNCHER), str(self.control)))
        self.proc = start_serve(options, self.log_path, cwd=REPO, die_with_parent=True)
        try:
            self.proc.wait_listening(START_TIMEOUT_S)
        except LaunchError as e:
            raise AssertionError(f"{e}\n{self.log_text()[-4000:]}") from None

    def stop(self) -> int | None:
        """SIGTERM, SIGKILL after STOP_TIMEOUT_S: the exit code (not 0 if it had to be killed)."""
        proc, self.proc = self.proc, None
        assert proc is not None
        return proc.stop(STOP_TIMEOUT_S)

    def wait_exit(self) -> int:
        assert self.proc is not None
        try:
            code = self.proc.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"samsa kept running:\n{self.log_text()[-4000:]}") from None
        self.proc = None
        return code

    def connect(self) -> Connection:
        return Connection("127.0.0.1", self.port)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def set_free_bytes(self, free: int | None) -> None:
        path = self.control / "free_bytes"
        if free is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(str(free))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    yield b
    if b.proc is not None:
        b.proc.stop(STOP_TIMEOUT_S, kill=True)


def create(conn: Connection, name: str) -> Any:
    return conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                         "assignments": (), "configs": ()}], "timeout": 10000,
                             "validate_only": False}).topics[0]


def delete(conn: Connection, name: str) -> int:
    r = conn.request(20, {"topic_names": [name], "timeout": 10000}, version=3)
    return int(r.responses[0].error_code.value)


def produce(conn: Connection, topic: str, value: bytes) -> Any:
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(
            [(None, value, ())], timestamp_ms=int(time.time() * 1000))}]}]})
    return r.responses[0].partition_responses[0]


def high_watermark(conn: Connection, topic: str, offset: int = 0) -> int:
    """Fetch from `offset` (a read) and return the partition's high watermark."""
    r = conn.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                         "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                             {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                              "log_start_offset": -1,
                                                              "partition_max_bytes": 1 << 20}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=11)
    p = r.responses[0].partitions[0]
    assert p.error_code.value == 0
    return int(p.high_watermark)


def init_producer_id(conn: Connection) -> int:
    r = conn.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                          "producer_epoch": -1})
    return int(r.error_code.value)


def topics(conn: Connection) -> set[str]:
    r = conn.request(3, {"topics": None, "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False})
    return {t.name for t in r.topics}


def controlled_shutdown_recorded(data_dir: Path) -> bool:
    log = Log.open(data_dir / "__cluster_metadata-0", METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
    try:
        records = [r for e in read_entries(log, log.log_start_offset) if e.kind == EntryKind.DATA
                   for r in decode_records(e.payload)]
    finally:
        log.close()
    return any(isinstance(r, BrokerRegistrationChangeRecord) and r.in_controlled_shutdown for r in records)


def test_below_the_reserve_creating_is_refused_with_an_error_code_and_everything_works_once_freed(
        broker: Broker) -> None:
    broker.start()
    with broker.connect() as conn:
        assert create(conn, "keep").error_code.value == 0
        assert create(conn, "doomed").error_code.value == 0
        assert produce(conn, "keep", b"before").error_code.value == 0
        broker.set_free_bytes(0)
        refused = create(conn, "new")
        assert refused.error_code.value == KAFKA_STORAGE_ERROR
        assert "samsa.min.free.disk.bytes" in refused.error_message
        r = conn.request(37, {"topics": [{"name": "keep", "count": 2, "assignments": None}], "timeout": 1000,
                              "validate_only": False})
        assert r.results[0].error_code.value == KAFKA_STORAGE_ERROR
        assert produce(conn, "keep", b"refused").error_code.value == KAFKA_STORAGE_ERROR
        # Producer ids: the block at hand is used up, the next one (a metadata write) is refused with a
        # retriable error code, never a closed connection.
        codes = {init_producer_id(conn) for _ in range(1100)}
        assert codes == {0, 14}  # NONE, then COORDINATOR_LOAD_IN_PROGRESS
        # Deletes and reads work below the reserve.
        assert delete(conn, "doomed") == 0
        assert "doomed" not in topics(conn)
        r = conn.request(21, {"topics": [{"name": "keep", "partitions": [{"partition_index": 0, "offset": 1}]}],
                              "timeout": 1000})
        assert r.topics[0].partitions[0].error_code.value == 0
        assert high_watermark(conn, "keep", 1) == 1

        broker.set_free_bytes(None)
        assert create(conn, "new").error_code.value == 0
        assert produce(conn, "new", b"after").error_code.value == 0
        for _ in range(200):  # the next block is being committed: COORDINATOR_LOAD_IN_PROGRESS meanwhile
            if init_producer_id(conn) == 0:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("InitProducerId never succeeded after the disk was freed")
        assert delete(conn, "new") == 0
    assert broker.stop() == 0
    text = broker.log_text()
    assert "shut down cleanly" in text and "Traceback" not in text and "internal error" not in text
    assert controlled_shutdown_recorded(broker.data_dir)


def test_a_broker_started_below_the_reserve_serves_reads_and_deletes(broker: Broker) -> None:
    broker.start()
    with broker.connect() as conn:
        assert create(conn, "keep").error_code.value == 0
        assert create(conn, "doomed").error_code.value == 0
        assert produce(conn, "keep", b"x").error_code.value == 0
    assert broker.stop() == 0

    broker.set_free_bytes(0)
    broker.start()
    with broker.connect() as conn:
        assert topics(conn) == {"keep", "doomed"}
        assert high_watermark(conn, "keep") == 1
        assert create(conn, "new").error_code.value == KAFKA_STORAGE_ERROR
        assert produce(conn, "keep", b"y").error_code.value == KAFKA_STORAGE_ERROR
        assert delete(conn, "doomed") == 0
        assert topics(conn) == {"keep"}
    assert broker.stop() == 0

    broker.set_free_bytes(None)
    broker.start()
    with broker.connect() as conn:
        assert topics(conn) == {"keep"}
        assert create(conn, "new").error_code.value == 0
        assert init_producer_id(conn) == 0
    assert broker.stop() == 0
    assert "Traceback" not in broker.log_text()


def test_a_metadata_fsync_failure_stops_the_broker_loudly_and_a_restart_recovers(broker: Broker) -> None:
    broker.start()
    with broker.connect() as conn:
        assert create(conn, "a").error_code.value == 0
        (broker.control / "fail_fsync").touch()
        # The waiting client is answered with an error code before the process ends.
        assert create(conn, "b").error_code.value == KAFKA_STORAGE_ERROR
    assert broker.wait_exit() == 1
    assert "FATAL: writing the metadata log" in broker.log_text()

    (broker.control / "fail_fsync").unlink()
    broker.start()
    with broker.connect() as conn:
        assert "a" in topics(conn)
        assert create(conn, "c").error_code.value == 0
        assert init_producer_id(conn) == 0
    assert broker.stop() == 0
