"""The progress line (on a terminal, once a second) and the one-line summary of produce and consume."""

from __future__ import annotations

import sys
import time

PROGRESS_INTERVAL_S = 1.0


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class Progress:
    def __init__(self, verb: str) -> None:
        self.verb = verb
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.last_shown = self.started
        self.shown = False

    def maybe_show(self, records: int, size_bytes: int) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if now - self.last_shown < PROGRESS_INTERVAL_S:
            return
        self.last_shown = now
        rate = records / max(now - self.started, 1e-9)
        sys.stderr.write(f"\r{self.verb} {records} records, {_size(size_bytes)} ({rate:.0f} records/s)\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def summary(self, records: int, size_bytes: int, seconds: float, where: str) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
        seconds = max(seconds, 1e-9)
        print(f"{self.verb} {records} records ({_size(size_bytes)}) {where} in {seconds:.2f} s: "
              f"{records / seconds:.0f} records/s, {_size(size_bytes / seconds)}/s", file=sys.stderr, flush=True)
