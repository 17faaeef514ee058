"""A real `samsa serve` for the KIP-848 tests: short consumer-group sessions and heartbeats, stopped by PID."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection

REPO = Path(__file__).resolve().parents[2]
SESSION_MS = 3000
HEARTBEAT_MS = 300
OVERRIDES = (f"group.consumer.session.timeout.ms={SESSION_MS}", f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
             "group.initial.rebalance.delay.ms=0", "samsa.offset.commit.past.log.end.enable=true",
             # As Kafka's request tests: a target assignment at each heartbeat that needs one (no KIP-1263 batching).
             "group.consumer.assignment.interval.ms=0")


@dataclass
class Broker:
    data_dir: Path
    port: int
    process: launcher.ServeProcess | None = None
    extra_overrides: tuple[str, ...] = ()  # after OVERRIDES: the last value of a key wins

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        log = self.data_dir.parent / f"samsa-{self.port}.log"
        self.process = launcher.start_serve(
            launcher.ServeOptions(data_dir=self.data_dir, port=self.port,
                                    overrides=OVERRIDES + self.extra_overrides), log, cwd=REPO)
        self.process.wait_listening(60.0)
        with self.connect() as conn:  # the internal topic exists once FindCoordinator answers
            for _ in range(200):
                if conn.request(10, {"key": "warm-up", "key_type": 0}, version=3).error_code.value == 0:
                    break
                time.sleep(0.05)

    def stop(self, kill: bool = False) -> None:
        if self.process is not None:
            self.process.stop(15.0, kill=kill)
            self.process = None

    def connect(self) -> Connection:
        return Connection("127.0.0.1", self.port)

    def create_topic(self, name: str, partitions: int) -> None:
        with self.connect() as conn:
            r = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
                                  "timeout": 30000})
            assert r.topics[0].error_code.value == 0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data", launcher.free_port())
    b.start()
    yield b
    b.stop()
