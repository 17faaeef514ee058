"""Fixtures that run a real `samsa serve` process on a free loopback port and stop it by PID."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


free_port = launcher.free_port


@dataclass
class SamsaProcess:
    data_dir: Path
    port: int
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    _process: launcher.ServeProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    auto_port: bool = False  # chosen by free_port(): another may take it before we bind, so retry on another

    def start(self) -> None:
        for attempt in range(3):
            self.log_path = self.data_dir.parent / f"samsa-{self.port}.log"
            self._process = launcher.start_serve(
                launcher.ServeOptions(data_dir=self.data_dir, port=self.port, extra_args=self.extra_args),
                self.log_path, cwd=REPO)
            self.proc = self._process.popen
            try:
                self._process.wait_listening(START_TIMEOUT_S)
                return
            except launcher.LaunchError as e:
                self.stop(kill=True)
                if not (self.auto_port and "address already in use" in str(e) and attempt < 2):
                    raise RuntimeError(str(e)) from None
                self.port = free_port()

    def stop(self, *, kill: bool = False) -> int | None:
        if self.proc is None:
            return None
        self.proc = None
        assert self._process is not None
        return self._process.stop(STOP_TIMEOUT_S, kill=kill)

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def connect(self) -> Connection:
        return Connection("127.0.0.1", self.port)


@pytest.fixture
def samsa_factory(tmp_path: Path) -> Iterator[type[SamsaProcess]]:
    started: list[SamsaProcess] = []

    class Factory(SamsaProcess):
        def __init__(self, data_dir: Path | None = None, port: int | None = None,
                     extra_args: tuple[str, ...] = ()) -> None:
            super().__init__(data_dir or tmp_path / "data", port or free_port(), extra_args)
            self.auto_port = port is None
            started.append(self)

    yield Factory
    for s in started:
        s.stop(kill=True)


@pytest.fixture
def samsa(samsa_factory: type[SamsaProcess]) -> Iterator[SamsaProcess]:
    process = samsa_factory()
    process.start()
    yield process
    assert process.proc is None or process.proc.poll() is None, f"samsa died:\n{process.log_tail()}"
    process.stop()


@pytest.fixture
def group_broker(samsa_factory: type[SamsaProcess]) -> Iterator[SamsaProcess]:
    """A broker whose group coordinator is ready (groups join at once: no initial rebalance delay).

    The first FindCoordinator creates __consumer_offsets, a metadata write committed once fsynced off the
    event loop: until then the answer is COORDINATOR_NOT_AVAILABLE (as Kafka's), which clients retry."""
    process = samsa_factory(extra_args=("--override", "group.initial.rebalance.delay.ms=0"))
    process.start()
    with process.connect() as c:
        for _ in range(200):
            if c.request(10, {"key": "warm-up", "key_type": 0}, version=3).error_code.value == 0:
                break
            time.sleep(0.05)
    yield process
    process.stop()


@pytest.fixture
def conn(samsa: SamsaProcess) -> Iterator[Connection]:
    with samsa.connect() as c:
        yield c


os.environ.setdefault("PYTHONUNBUFFERED", "1")
