"""Fixtures that run a real `samsa serve` process on a free loopback port and stop it by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.broker.client import Connection

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SamsaProcess:
    data_dir: Path
    port: int
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log_path = self.data_dir.parent / f"samsa-{self.port}.log"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samsa.broker.cli", "serve", "--data-dir", str(self.data_dir),
             "--listen", self.bootstrap, "--log-level", "INFO", *self.extra_args],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"samsa exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop(kill=True)
        raise RuntimeError(f"samsa did not listen within {START_TIMEOUT_S}s:\n{self.log_tail()}")

    def stop(self, *, kill: bool = False) -> int | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT_S)
        return proc.returncode

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
def conn(samsa: SamsaProcess) -> Iterator[Connection]:
    with samsa.connect() as c:
        yield c


os.environ.setdefault("PYTHONUNBUFFERED", "1")
