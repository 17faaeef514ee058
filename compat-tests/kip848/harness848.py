"""Helpers of the KIP-848 client tests: members write "assign"/"revoke"/"record" lines to a file (see
consumer_worker.py and ConsumerMember.java); these read them back and wait on them."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from samsa_fixture import SamsaProcess

HERE = Path(__file__).resolve().parent
JAVA_LIB = HERE.parent / "java" / "target" / "lib"

WORKER = HERE / "consumer_worker.py"
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


def python_member(bootstrap: str, group: str, topic: str, out: Path, protocol: str = "consumer",
                  instance: str | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(WORKER), bootstrap, group, topic, str(out), protocol,
                             *([instance] if instance else [])])


FRANZ_MEMBER = HERE.parent / "go" / "bin" / "kip848member"


def franz_member(bootstrap: str, group: str, topic: str, out: Path,
                 protocol: str = "consumer") -> subprocess.Popen[bytes]:
    """franz-go's member (compat-tests/go/kip848member, built by make compat-deps)."""
    return subprocess.Popen([str(FRANZ_MEMBER), bootstrap, group, topic, str(out), protocol])


_java_classes: Path | None = None


def java_classes() -> Path | None:
    """ConsumerMember.java compiled once (None without javac or the kafka-clients jars: make compat-deps)."""
    global _java_classes
    if _java_classes is None:
        if shutil.which("javac") is None or not JAVA_LIB.is_dir():
            return None
        out = Path(tempfile.mkdtemp(prefix="samsa-kip848-java-"))
        subprocess.run(["javac", "-nowarn", "-cp", f"{JAVA_LIB}/*", "-d", str(out), str(HERE / "ConsumerMember.java")],
                       check=True, capture_output=True, timeout=120)
        _java_classes = out
    return _java_classes


def java_member(bootstrap: str, group: str, topic: str, out: Path, protocol: str = "consumer",
                instance: str | None = None) -> subprocess.Popen[bytes]:
    classes = java_classes()
    assert classes is not None
    return subprocess.Popen(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{JAVA_LIB}/*",
                             "ConsumerMember", bootstrap, group, topic, str(out), protocol,
                             *([instance] if instance else [])])


def stop_all(members: list[subprocess.Popen[bytes]]) -> None:
    for m in members:
        if m.poll() is None:
            m.terminate()
    for m in members:
        try:
            m.wait(60)
        except subprocess.TimeoutExpired:
            m.kill()
            m.wait(10)


def join_kill_leave(broker: SamsaProcess, tmp_path: Path, start: Callable[[str, str, str, Path], Popen],
                    topic: str, group: str, *, after_join: Callable[[], None] | None = None) -> None:
    """The scenario each client's KIP-848 test runs: three members join a 6-partition topic and split it; one is
    SIGKILLed (its partitions move once its session expires: 3 each for the two left); one closes (it leaves with
    member epoch -1) and the last member ends with every partition. Every record is consumed exactly once: each
    member commits a record (synchronously, with its member epoch) before counting it, so a partition held by
    two members at once shows as a record counted twice, and a partition that never moved as records never
    consumed. `after_join` runs once the three are balanced."""
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    outputs = [tmp_path / f"member-{i}.out" for i in range(3)]
    members = [start(bootstrap, group, topic, out) for out in outputs]
    try:
        wait_balanced(outputs, broker)
        if after_join is not None:
            after_join()
        batch1 = produce(bootstrap, topic, "b1")
        wait_consumed(outputs, batch1, broker)

        members[0].send_signal(signal.SIGKILL)  # no leave: its partitions move when its session expires
        assert members[0].wait(10) == -signal.SIGKILL
        batch2 = produce(bootstrap, topic, "b2")
        wait_consumed(outputs[1:], batch2, broker)
        wait_balanced(outputs[1:], broker)

        members[1].terminate()  # close(): leaves the group with epoch -1
        assert members[1].wait(60) in (0, 143)  # a JVM exits 128+SIGTERM after its shutdown hooks
        assert outputs[1].read_text().splitlines()[-1] == "closed"
        batch3 = produce(bootstrap, topic, "b3")
        wait_consumed(outputs[2:], batch3, broker)
        assert owned(outputs[2]) == set(range(PARTITIONS))
    finally:
        stop_all(members)
    seen = consumed(outputs)
    assert set(seen) == batch1 | batch2 | batch3
    assert [v for v, n in seen.items() if n != 1] == []
    for out in outputs:  # each member consumed something before it went
        assert any(line.startswith("record ") for line in out.read_text().splitlines()), out.read_text()
