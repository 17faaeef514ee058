"""Run ``bench.compare.worker`` processes together: start them, wait until each is ready, release them at
once, collect each one's JSON line. Every process is bounded in time and stopped by its PID."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from typing import Any

from bench.compare.targets import REPO


class WorkerError(RuntimeError):
    pass


class _Worker:
    def __init__(self, mode: str, args: dict[str, Any]) -> None:
        self.mode = mode
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.compare.worker", mode, json.dumps(args)], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.err: list[str] = []
        self.ready = threading.Event()
        self._t_out = threading.Thread(target=self._read_out, daemon=True)
        self._t_err = threading.Thread(target=self._read_err, daemon=True)
        self._t_out.start()
        self._t_err.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line == "ready":
                self.ready.set()
            elif line:
                self.lines.append(line)
        self.ready.set()  # EOF: wake the waiter (it checks the process)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line.rstrip())
            del self.err[:-40]

    def go(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)

    def result(self) -> dict[str, Any]:
        if not self.lines:
            raise WorkerError(f"worker {self.mode} (PID {self.proc.pid}) exited {self.proc.returncode} without a "
                              f"result; stderr: {' | '.join(self.err[-8:])}")
        out: dict[str, Any] = json.loads(self.lines[-1])
        return out


def run_workers(specs: list[tuple[str, dict[str, Any]]], *, ready_timeout: float = 60.0,
                timeout: float = 600.0) -> list[dict[str, Any]]:
    """Start one worker per (mode, args), release them together, return their results in order."""
    workers = [_Worker(mode, args) for mode, args in specs]
    try:
        deadline = time.monotonic() + ready_timeout
        for w in workers:
            if not w.ready.wait(max(0.0, deadline - time.monotonic())) or w.proc.poll() is not None:
                raise WorkerError(f"worker {w.mode} not ready within {ready_timeout}s (rc {w.proc.poll()}); "
                                  f"stderr: {' | '.join(w.err[-8:])}")
        for w in workers:
            w.go()
        deadline = time.monotonic() + timeout
        for w in workers:
            try:
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as e:
                raise WorkerError(f"worker {w.mode} (PID {w.proc.pid}) still running after {timeout}s") from e
            w._t_out.join(5)
        return [w.result() for w in workers]
    finally:
        for w in workers:
            w.kill()
