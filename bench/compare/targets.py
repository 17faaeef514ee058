"""The two brokers under test, started the same way every time, and what is measured on their processes.

``Kafka`` is the reference Apache Kafka from ``compat-tests/oracle_fixture.py`` (one combined KRaft node, the
fixture's heap ``-Xms512m -Xmx512m``); ``Samsa`` is ``python -m broker.cli serve`` from this checkout.
Both listen on a free loopback port, keep their data in a temporary directory, and are stopped by PID.
Samsa gets the broker settings the fixture's ``server.properties`` gives Kafka where they differ from
the defaults (``group.initial.rebalance.delay.ms=0``), so that both run with the same settings.

Start-up time is measured from the broker *process* start (``/proc/PID/stat`` starttime, so Kafka's
separate ``StorageTool format`` JVM is not counted against it; it is reported on its own) to the first
acknowledged produce (a topic created, one record produced with acks=1 and delivered).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.machine import cpu_seconds
from samsa.broker.launcher import ServeOptions, start_serve

REPO = Path(__file__).resolve().parents[2]
COMPAT = REPO / "compat-tests"
if str(COMPAT) not in sys.path:
    sys.path.insert(0, str(COMPAT))

import oracle_fixture  # noqa: E402  (lives in compat-tests/, not a package)

HOST = "127.0.0.1"
# Both brokers' ports are tried this often while they start (Kafka's fixture default, 0.1 s, measured Kafka
# up to 100 ms late and Samsa, at 10 ms, up to 10 ms late).
PORT_POLL_S = 0.002
SAMSA_PYTHON = Path(os.environ.get("SAMSA_PYTHON", REPO / ".venv" / "bin" / "python"))
# Another build's broker in this run's harness (a before/after comparison on one machine): its venv's python in
# SAMSA_PYTHON, its checkout in SAMSA_CWD and its serve module in SAMSA_SERVE_MODULE (`broker.cli` before the
# package became `samsa`).
SAMSA_CWD = Path(os.environ.get("SAMSA_CWD", REPO))
SAMSA_SERVE_MODULE = os.environ.get("SAMSA_SERVE_MODULE", "samsa.broker.cli")
# Kafka settings from compat-tests/oracle/server.properties that differ from Samsa's defaults.
SAMSA_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


class BenchError(RuntimeError):
    """A broker could not be started or measured."""


def boot_seconds() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def process_start_boot_seconds(pid: int) -> float:
    """When the process started, in CLOCK_BOOTTIME seconds (``/proc/PID/stat`` field 22, in ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def thread_count(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def api_versions(bootstrap: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 over a raw socket: {api_key: (min, max)} as the broker advertises them."""
    host, _, port = bootstrap.rpartition(":")
    client_id = b"samsa-bench"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read_exact(s, 4))[0]
        data = _read_exact(s, size)
    _corr, error, count = struct.unpack_from(">ihi", data, 0)
    if error:
        raise BenchError(f"ApiVersions v0 error {error} from {bootstrap}")
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", data, 10 + 6 * i)
        out[key] = (lo, hi)
    return out


def _read_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise BenchError("connection closed during ApiVersions")
        buf += chunk
    return bytes(buf)


@dataclass
class Sample:
    at: float  # time.monotonic()
    rss: int
    fds: int


class Sampler:
    """Samples a process's RSS and open-file count every ``interval`` s in a daemon thread."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sampler-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> Sample:
        s = Sample(time.monotonic(), rss_bytes(self.pid), open_files(self.pid))
        self.samples.append(s)
        return s

    def peak_rss_since(self, t0: float) -> int:
        vals = [s.rss for s in self.samples if s.at >= t0]
        return max(vals, default=0)

    def peak_fds_since(self, t0: float) -> int:
        vals = [s.fds for s in self.samples if s.at >= t0]
        return max(vals, default=0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@dataclass
class Target:
    """A running broker: ``name`` is "kafka" or "samsa"."""

    name: str
    bootstrap: str
    pid: int
    spawn_to_port_s: float = 0.0  # process start -> the port accepts TCP
    first_produce_s: float = 0.0  # process start -> first acknowledged produce
    prepare_s: float = 0.0  # work before the broker process (Kafka: StorageTool format)
    idle_rss: int = 0  # after the first produce and a short settle
    idle_fds: int = 0
    sampler: Sampler | None = None
    _stop: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return "Kafka" if self.name == "kafka" else "Samsa"

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def fds(self) -> int:
        return open_files(self.pid)

    def threads(self) -> int:
        return thread_count(self.pid)

    def cpu(self) -> float:
        try:
            return cpu_seconds(self.pid)
        except OSError:
            return 0.0

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        with contextlib.suppress(OSError):
            with open(f"/proc/{self.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        return True

    def check_alive(self) -> None:
        if not self.alive():
            raise BenchError(f"{self.title} (PID {self.pid}) is not running any more")

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        if self._stop is not None:
            self._stop()
            self._stop = None


PROBE_TOPIC = "bench-startup-probe"


def first_produce(bootstrap: str, timeout: float = 120.0, topic: str = PROBE_TOPIC) -> None:
    """Create ``topic`` and produce one record (acks=1); retry until delivered or ``timeout``."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
            fut = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=10)[topic]
            try:
                fut.result(15)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                    raise
            p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "enable.idempotence": False,
                          "message.timeout.ms": 10000, "linger.ms": 0, "log_level": 2})
            delivered: list[object] = []
            p.produce(topic, b"hello", on_delivery=_collector(delivered))
            p.flush(15)
            if delivered and delivered[0] is None:
                return
            last = delivered[0] if delivered else "not delivered within 15 s"
        except Exception as e:
            last = e
        time.sleep(0.05)
    raise BenchError(f"no successful produce to {bootstrap} within {timeout}s: {last}")


def _collector(box: list[object]) -> Any:
    def on_delivery(err: object, _msg: object) -> None:
        box.append(err)

    return on_delivery


def _settle_and_measure_idle(t: Target, settle: float) -> None:
    time.sleep(settle)
    t.idle_rss = t.rss()
    t.idle_fds = t.fds()


def start_kafka(*, settle: float = 2.0, start_timeout: float | None = None) -> Target:
    cluster = oracle_fixture.start_kafka(1, start_timeout=start_timeout, poll_s=PORT_POLL_S)
    try:
        pid = cluster.pids[0]
        started = process_start_boot_seconds(pid)
        port_s = boot_seconds() - started
        first_produce(cluster.bootstrap)
        first_s = boot_seconds() - started
        t = Target("kafka", cluster.bootstrap, pid, spawn_to_port_s=port_s, first_produce_s=first_s,
                   prepare_s=max(0.0, cluster.start_seconds - port_s), _stop=lambda: cluster.stop(timeout=30))
        t.notes.append(f"JVM heap -Xms512m -Xmx512m (compat-tests/oracle_fixture.py); data in {cluster.workdir}")
        _settle_and_measure_idle(t, settle)
        t.sampler = Sampler(pid)
        return t
    except BaseException:
        cluster.stop(timeout=10)
        raise


def start_samsa(*, settle: float = 2.0, ready_timeout: float = 120.0) -> Target:
    if not SAMSA_PYTHON.exists():
        raise BenchError(f"{SAMSA_PYTHON} is missing (make test creates .venv); SAMSA_PYTHON overrides it")
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-"))
    port = oracle_fixture.free_port()
    options = ServeOptions(data_dir=work / "data", port=port, host=HOST, log_level="WARNING",
                           overrides=tuple(f"{k}={v}" for k, v in SAMSA_OVERRIDES.items()),
                           program=(str(SAMSA_PYTHON), "-m", SAMSA_SERVE_MODULE))
    served = start_serve(options, work / "samsa.log", cwd=SAMSA_CWD, die_with_parent=True)
    proc = served.popen
    cmd = served.command

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if os.environ.get("SAMSA_KEEP_DATA") != "1":
            shutil.rmtree(work, ignore_errors=True)

    try:
        started = process_start_boot_seconds(proc.pid)
        deadline = time.monotonic() + ready_timeout
        while not oracle_fixture.port_open(HOST, port, timeout=0.5):
            if proc.poll() is not None:
                raise BenchError(f"samsa exited with {proc.returncode} during start-up:\n{_tail(work / 'samsa.log')}")
            if time.monotonic() > deadline:
                raise BenchError(f"samsa did not open {HOST}:{port} within {ready_timeout}s")
            time.sleep(PORT_POLL_S)
        port_s = boot_seconds() - started
        first_produce(f"{HOST}:{port}")
        first_s = boot_seconds() - started
        t = Target("samsa", f"{HOST}:{port}", proc.pid, spawn_to_port_s=port_s, first_produce_s=first_s,
                   _stop=stop)
        t.notes.append(f"{' '.join(cmd[1:])}")
        _settle_and_measure_idle(t, settle)
        t.sampler = Sampler(proc.pid)
        return t
    except BaseException:
        stop()
        raise


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start(name: str, **kwargs: Any) -> Target:
    return start_kafka(**kwargs) if name == "kafka" else start_samsa(**kwargs)


@contextlib.contextmanager
def started(name: str, **kwargs: Any) -> Iterator[Target]:
    t = start(name, **kwargs)
    try:
        yield t
    finally:
        t.stop()


class Window:
    """Broker CPU seconds, wall time and peak RSS / open files over a stretch of a scenario.

        with Window(target) as w:
            ...
        w.as_dict()  # {"wall_s", "broker_cpu_s", "broker_cores", "peak_rss_mib", "peak_fds"}
    """

    def __init__(self, target: Target) -> None:
        self.target = target
        self.t0 = self.t1 = 0.0
        self.cpu0 = self.cpu1 = 0.0

    def __enter__(self) -> Window:
        self.t0 = time.monotonic()
        self.cpu0 = self.target.cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1 = time.monotonic()
        self.cpu1 = self.target.cpu()
        if self.target.sampler is not None:
            self.target.sampler.sample()

    def as_dict(self) -> dict[str, float]:
        wall = max(self.t1 - self.t0, 1e-9)
        cpu = self.cpu1 - self.cpu0
        s = self.target.sampler
        return {"wall_s": round(wall, 3), "broker_cpu_s": round(cpu, 3), "broker_cores": round(cpu / wall, 3),
                "peak_rss_mib": round((s.peak_rss_since(self.t0) if s else self.target.rss()) / 2**20, 1),
                "peak_fds": s.peak_fds_since(self.t0) if s else self.target.fds()}
