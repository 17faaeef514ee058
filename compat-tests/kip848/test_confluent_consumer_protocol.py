"""librdkafka (confluent-kafka) consumers with group.protocol=consumer (KIP-848) against Samsa.

Three members share a 6-partition topic. One is SIGKILLed: its partitions move to the others once its
session expires. One closes: it leaves (member epoch -1) and the last member gets everything. Every
record is consumed exactly once across the members: each commits a record (synchronously, with its
member epoch) before counting it, so a record taken by two owners at once would be counted twice,
and a partition that never moved would leave records unconsumed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from samsa_fixture import SamsaProcess

WORKER = Path(__file__).resolve().parent / "consumer_worker.py"
PARTITIONS = 6
PER_BATCH = 120
WAIT_S = 90.0


def produce(bootstrap: str, topic: str, batch: str) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap})
    values = {f"{batch}-{i}" for i in range(PER_BATCH)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


def consumed(outputs: list[Path]) -> Counter[str]:
    seen: Counter[str] = Counter()
    for path in outputs:
        if path.exists():
            for line in path.read_text().splitlines():
                if line.startswith("record "):
                    seen[line.split()[3]] += 1
    return seen


def owned(path: Path) -> set[int]:
    """The partitions a member holds now, from its assign/revoke lines (incremental, as KIP-848 is)."""
    held: set[int] = set()
    for line in path.read_text().splitlines() if path.exists() else ():
        kind, *parts = line.split()
        if kind == "assign":
            held |= {int(p) for p in parts}
        elif kind == "revoke":
            held -= {int(p) for p in parts}
    return held


def wait_balanced(outputs: list[Path], samsa: SamsaProcess) -> None:
    """Until every member holds PARTITIONS / len(outputs) partitions, and no partition has two holders."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        held = [owned(p) for p in outputs]
        if all(len(h) == PARTITIONS // len(outputs) for h in held):
            assert set().union(*held) == set(range(PARTITIONS))
            return
        samsa.check_alive()
        time.sleep(0.2)
    raise AssertionError(f"members never balanced: {[sorted(owned(p)) for p in outputs]}\n{samsa.log_tail()}")


def wait_consumed(outputs: list[Path], values: set[str], samsa: SamsaProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if values <= set(consumed(outputs)):
            return
        samsa.check_alive()
        time.sleep(0.2)
    missing = sorted(values - set(consumed(outputs)))
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in outputs if p.exists())
    raise AssertionError(f"{len(missing)} records never consumed, e.g. {missing[:5]}\n{logs}\n{samsa.log_tail()}")


def test_members_join_one_dies_one_leaves_every_record_once(samsa_kip848: SamsaProcess, tmp_path: Path) -> None:
    bootstrap = samsa_kip848.bootstrap
    topic, group = "kip848-confluent", "kip848-confluent-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    outputs = [tmp_path / f"member-{i}.out" for i in range(3)]
    workers = [subprocess.Popen([sys.executable, str(WORKER), bootstrap, group, topic, str(out)]) for out in outputs]
    try:
        wait_balanced(outputs, samsa_kip848)
        batch1 = produce(bootstrap, topic, "b1")
        wait_consumed(outputs, batch1, samsa_kip848)

        workers[0].send_signal(signal.SIGKILL)  # its partitions move after group.consumer.session.timeout.ms
        workers[0].wait(10)
        batch2 = produce(bootstrap, topic, "b2")
        wait_consumed(outputs[1:], batch2, samsa_kip848)

        workers[1].send_signal(signal.SIGTERM)  # close(): leaves the group with epoch -1
        assert workers[1].wait(60) == 0
        assert outputs[1].read_text().splitlines()[-1] == "closed"
        batch3 = produce(bootstrap, topic, "b3")
        wait_consumed(outputs[2:], batch3, samsa_kip848)
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(60)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait(10)
    seen = consumed(outputs)
    assert set(seen) == batch1 | batch2 | batch3
    assert [v for v, n in seen.items() if n != 1] == []
    # Each member owned some partitions at some point, and the last one ended with all of them.
    for out in outputs:
        assert any(line.startswith("record ") for line in out.read_text().splitlines()), out.read_text()
