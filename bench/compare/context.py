"""What every scenario gets: the two running brokers, the run's settings, and a log."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.compare import targets
from bench.compare.targets import Target

ORDER = ("kafka", "samsa")


@dataclass
class Context:
    args: argparse.Namespace
    targets: dict[str, Target] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # shared between scenarios (e.g. topics already filled)
    t_start: float = field(default_factory=time.monotonic)

    @property
    def smoke(self) -> bool:
        return bool(self.args.smoke)

    @property
    def records(self) -> int:
        return int(self.args.records)

    @property
    def tool_jvm_opts(self) -> list[str]:
        """JVM options for Kafka's perf tools: C1 only in a smoke run (starts faster), the defaults otherwise."""
        return list(targets.oracle_fixture.QUICK_JVM_OPTS) if self.smoke else []

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t_start:7.1f}s] {msg}", file=sys.stdout, flush=True)

    def target(self, name: str) -> Target:
        """The shared broker of kind ``name``, started on first use (Kafka first, then Samsa)."""
        for n in ORDER:
            if n not in self.targets:
                self.log(f"starting {n} ...")
                t = targets.start(n)
                self.targets[n] = t
                self.log(f"{t.title} at {t.bootstrap} (PID {t.pid}): port open {t.spawn_to_port_s:.2f} s, "
                         f"first produce {t.first_produce_s:.2f} s after process start, "
                         f"idle RSS {t.idle_rss / 2**20:.0f} MiB")
            if n == name:
                break
        return self.targets[name]

    def each(self, repetition: int = 0) -> Iterator[Target]:
        """Both brokers: Kafka first in even repetitions, Samsa first in odd ones, so that neither is always
        measured on the machine the other just warmed (page cache, writeback, CPU frequency)."""
        for name in ORDER if repetition % 2 == 0 else tuple(reversed(ORDER)):
            t = self.target(name)
            t.check_alive()
            yield t

    @contextlib.contextmanager
    def fresh(self, name: str) -> Iterator[Target]:
        """A newly started broker of kind ``name`` for this scenario only, stopped at the end."""
        t = targets.start(name)
        self.log(f"started a fresh {t.title} at {t.bootstrap} (PID {t.pid}) in {t.first_produce_s:.1f}s")
        try:
            yield t
        finally:
            t.stop()
