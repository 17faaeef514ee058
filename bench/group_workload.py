"""What the group benchmarks (bench/kip848.py, bench/groups/rebalance_bench.py) share: their topic, and a
background producer writing one record to every partition every 20 ms, so that a member that owns a partition
polls a record from it soon after."""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager

from confluent_kafka import Producer

from samsa.broker.client import Connection

INTERVAL_S = 0.02


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    host, _, port = bootstrap.rpartition(":")
    with Connection(host, int(port)) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0, r


class Trickle(AbstractContextManager["Trickle"]):
    """A producer writing one record to every partition every 20 ms until closed."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(bootstrap, topic, partitions), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str, topic: str, partitions: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
        while not self.stopped.is_set():
            for partition in range(partitions):
                p.produce(topic, b"x", partition=partition)
            p.poll(0)
            time.sleep(INTERVAL_S)
        p.flush(10)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(15)

    def __exit__(self, *exc: object) -> None:
        self.close()
