"""KIP-848 consumer groups: failover and rebalance times, Samsa vs Apache Kafka, consumer vs classic protocol.

    .venv/bin/python -m bench.kip848 [--reps 3] [--smoke] [--out DIR] [--client confluent-kafka|java]

Both brokers (one node each, started in turn in the same run) get the same group settings:
group.consumer.session.timeout.ms=6000, group.consumer.heartbeat.interval.ms=1000 (the broker decides
these for `group.protocol=consumer` members; Kafka's floors group.consumer.min.session.timeout.ms and
group.consumer.min.heartbeat.interval.ms are lowered to allow them) and group.initial.rebalance.delay.ms=0.
Classic members ask for session.timeout.ms=6000 and heartbeat.interval.ms=1000 themselves, and use
librdkafka's default eager assignors (range,roundrobin); consumer-protocol members get the broker's
default server-side assignor (uniform). The members are confluent-kafka processes
(bench/groups/kip848_member.py), or with --client java Java consumers (bench/groups/Kip848Member.java,
the kafka-clients of compat-tests; classic members use its default assignors, range first: eager); a
producer writes a record to every partition every 20 ms throughout.

- failover: 3 members over 6 partitions; one is SIGKILLed; the figure is the time from the kill until
  the survivors have polled a record from each of its partitions (the session timeout, 6 s, dominates).
- join10: 9 members over 10 partitions, stable; a 10th subscribes; the figure is the time from its
  subscribe() until every member owns one partition and every partition has been polled by its owner
  since (eager classic revokes everything; KIP-848 moves one partition).
- leave10: 11 members over 11 partitions; one closes (SIGTERM: it leaves the group); the figure is the
  time from the signal until the 10 that remain own all 11 partitions and have polled each since.

Prints each repetition and the medians with the Samsa/Kafka ratio, and writes
bench/results/kip848-<time>.json (or --out DIR).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "compat-tests"))

from oracle_fixture import OracleError, ensure_installed, kafka_cluster  # noqa: E402
from samsa_fixture import samsa_broker  # noqa: E402

from bench.group_workload import Trickle, create_topic  # noqa: E402

MEMBER = REPO / "bench" / "groups" / "kip848_member.py"
JAVA_MEMBER = REPO / "bench" / "groups" / "Kip848Member.java"
JAVA_LIB = REPO / "compat-tests" / "java" / "target" / "lib"
CLIENTS = ("confluent-kafka", "java")
SESSION_MS = 6000
HEARTBEAT_MS = 1000
PROTOCOLS = ("consumer", "classic")
SCENARIOS = ("failover", "join10", "leave10")
GROUP_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.initial.rebalance.delay.ms": "0",
}
KAFKA_FLOORS = {"group.consumer.min.session.timeout.ms": str(SESSION_MS),
                "group.consumer.min.heartbeat.interval.ms": str(HEARTBEAT_MS)}
WAIT_S = 120.0


class Bootstrapped(Protocol):
    @property
    def bootstrap(self) -> str: ...


@dataclass
class Member:
    """One member process and what it printed: its owned partitions and when it polled each partition."""

    name: str
    proc: subprocess.Popen[str]
    subscribed_at: float | None = None
    owned: frozenset[int] | None = None
    owned_from: dict[int, float] = field(default_factory=dict)  # partition -> when it was last assigned
    polls: dict[int, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, name: str, bootstrap: str, topic: str, group: str, protocol: str, workdir: Path) -> Member:
        tail = [bootstrap, topic, group, protocol, str(SESSION_MS), str(HEARTBEAT_MS)]
        command = [sys.executable, str(MEMBER), *tail] if JAVA_CLASSES is None else [
            "java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", f"{JAVA_CLASSES}:{JAVA_LIB}/*", "Kip848Member", *tail]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                stderr=open(workdir / f"{name}.stderr", "w"), text=True)
        member = cls(name, proc)
        threading.Thread(target=member._read, daemon=True).start()
        return member

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if e["event"] == "subscribed":
                    self.subscribed_at = e["t"]
                elif e["event"] == "owned":
                    self.owned = frozenset(e["partitions"])
                    self.owned_from = {p: self.owned_from.get(p, e["t"]) for p in self.owned}
                elif e["event"] == "polled":
                    self.polls.setdefault(e["p"], []).append(e["t"])

    def owned_now(self) -> frozenset[int]:
        with self.lock:
            return self.owned or frozenset()

    def first_poll(self, partition: int, since: float) -> float | None:
        """When this member first polled `partition` after `since` and after it was last assigned it."""
        with self.lock:
            times = self.polls.get(partition, [])
            i = bisect.bisect_right(times, max(since, self.owned_from.get(partition, since)))
            return times[i] if i < len(times) else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            self.proc.send_signal(sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


JAVA_CLASSES: Path | None = None  # set by --client java: the compiled Kip848Member


def compile_java_member(workdir: Path) -> Path:
    out = workdir / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", f"{JAVA_LIB}/*", "-d", str(out), str(JAVA_MEMBER)], check=True,
                   capture_output=True, timeout=180)
    return out


def consuming_since(members: Sequence[Member], partitions: int, since: float, per_member: int | None = None) -> bool:
    """Every partition owned by exactly one of `members` (`per_member` each, if given), and polled by its
    owner after `since`."""
    seen: list[int] = []
    for m in members:
        owned = m.owned_now()
        if per_member is not None and len(owned) != per_member:
            return False
        if any(m.first_poll(p, since) is None for p in owned):
            return False
        seen.extend(owned)
    return sorted(seen) == list(range(partitions))


def done_at(members: Sequence[Member], since: float) -> float:
    """Seconds from `since` until the condition held: the latest first poll after `since` of a partition
    by its current owner (`consuming_since` held)."""
    return max(m.first_poll(p, since) or since for m in members for p in m.owned_now()) - since


def wait(what: str, condition: Callable[[], bool], members: Sequence[Member]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    state = ", ".join(f"{m.name}: {sorted(m.owned_now())} alive={m.alive()}" for m in members)
    raise TimeoutError(f"timed out after {WAIT_S:.0f} s waiting for {what}: {state}")


class Group(AbstractContextManager["Group"]):
    """A fresh topic and group, a trickle producer on it, and member processes stopped on exit."""

    def __init__(self, bootstrap: str, protocol: str, partitions: int, workdir: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.bootstrap, self.protocol, self.workdir = bootstrap, protocol, workdir
        self.topic, self.group, self.partitions = f"b848-{tag}", f"b848-g-{tag}", partitions
        create_topic(bootstrap, self.topic, partitions)
        self.trickle = Trickle(bootstrap, self.topic, partitions)
        self.members: list[Member] = []

    def add(self, count: int = 1) -> list[Member]:
        new = [Member.start(f"m{len(self.members) + i}", self.bootstrap, self.topic, self.group, self.protocol,
                            self.workdir) for i in range(count)]
        self.members += new
        return new

    def stable(self, members: Sequence[Member], per_member: int) -> None:
        wait(f"{len(members)} members over {self.partitions} partitions",
             lambda: consuming_since(members, self.partitions, 0.0, per_member), members)
        time.sleep(1.0)

    def __exit__(self, *exc: object) -> None:
        for m in self.members:
            m.stop()
        self.trickle.close()


def failover(bootstrap: str, protocol: str, workdir: Path) -> float:
    with Group(bootstrap, protocol, 6, workdir) as g:
        members = g.add(3)
        g.stable(members, 2)
        victim, survivors = members[2], members[:2]
        killed = time.monotonic()
        victim.stop(signal.SIGKILL)
        wait("survivors consuming the victim's partitions", lambda: consuming_since(survivors, 6, killed), survivors)
        return done_at(survivors, killed)


def join10(bootstrap: str, protocol: str, workdir: Path) -> float:
    with Group(bootstrap, protocol, 10, workdir) as g:
        first = g.add(9)
        wait("9 members over 10 partitions", lambda: consuming_since(first, 10, 0.0) and all(
            len(m.owned_now()) >= 1 for m in first), first)
        time.sleep(1.0)
        (new,) = g.add(1)
        wait("the 10th member subscribing", lambda: new.subscribed_at is not None, [new])
        assert new.subscribed_at is not None
        joined = new.subscribed_at
        wait("10 members consuming one partition each", lambda: consuming_since(g.members, 10, joined, 1), g.members)
        return done_at(g.members, joined)


def leave10(bootstrap: str, protocol: str, workdir: Path) -> float:
    with Group(bootstrap, protocol, 11, workdir) as g:
        members = g.add(11)
        g.stable(members, 1)
        leaver, rest = members[0], members[1:]
        left = time.monotonic()
        leaver.proc.send_signal(signal.SIGTERM)
        wait("10 members consuming 11 partitions", lambda: consuming_since(rest, 11, left), rest)
        return done_at(rest, left)


MEASURES: dict[str, Callable[[str, str, Path], float]] = {"failover": failover, "join10": join10, "leave10": leave10}
LABELS = {"failover": "SIGKILL -> consumed again", "join10": "10th member joins", "leave10": "1 of 11 leaves"}


def run(target: str, bootstrap: str, reps: int, scenarios: Sequence[str],
        workdir: Path) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {p: {s: [] for s in scenarios} for p in PROTOCOLS}
    for rep in range(reps):
        for protocol in PROTOCOLS:
            for name in scenarios:
                seconds = MEASURES[name](bootstrap, protocol, workdir)
                out[protocol][name].append(seconds)
                print(f"{target:6} {protocol:8} rep {rep + 1}: {LABELS[name]:26} {seconds:6.2f} s", flush=True)
    return out


def brokers() -> Iterator[tuple[str, Callable[[], AbstractContextManager[Bootstrapped]]]]:
    samsa_args = tuple(a for k, v in GROUP_SETTINGS.items() for a in ("--override", f"{k}={v}"))
    yield "samsa", lambda: samsa_broker(extra_args=samsa_args, ready_timeout=90.0)
    yield "kafka", lambda: kafka_cluster(1, overrides={**GROUP_SETTINGS, **KAFKA_FLOORS})


def summarize(results: dict[str, dict[str, dict[str, list[float]]]], scenarios: Sequence[str]) -> dict[str, object]:
    summary: dict[str, object] = {}
    print()
    print(f"{'median (s)':40} {'samsa':>7} {'kafka':>7} {'samsa/kafka':>12}")
    for protocol in PROTOCOLS:
        for name in scenarios:
            sm = statistics.median(results["samsa"][protocol][name])
            km = statistics.median(results["kafka"][protocol][name])
            summary[f"{protocol}.{name}"] = {"samsa_median_s": sm, "kafka_median_s": km, "ratio": sm / km}
            print(f"{protocol + ': ' + LABELS[name]:40} {sm:7.2f} {km:7.2f} {sm / km:12.2f}")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one repetition of failover and join10 only")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--client", choices=CLIENTS, default="confluent-kafka",
                        help="the members' client: librdkafka (default) or the Java consumer (make compat-deps)")
    args = parser.parse_args(argv)
    global JAVA_CLASSES
    try:
        ensure_installed()
    except OracleError as e:
        print(f"Apache Kafka is not installed ({e}): make compat-deps", file=sys.stderr)
        return 2
    reps, scenarios = (1, ("failover", "join10")) if args.smoke else (args.reps, SCENARIOS)
    load_start = os.getloadavg()[0]
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpus, python "
          f"{platform.python_version()}, load {load_start:.1f}; members: {args.client}; session {SESSION_MS} ms, "
          f"heartbeat {HEARTBEAT_MS} ms; {reps} rep(s)", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="samsa-kip848-bench-"))
    if args.client == "java":
        if not JAVA_LIB.is_dir():
            print(f"the Java client is not there ({JAVA_LIB}): make compat-deps", file=sys.stderr)
            return 2
        JAVA_CLASSES = compile_java_member(workdir)
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    for target, broker in brokers():
        with broker() as b:
            results[target] = run(target, b.bootstrap, reps, scenarios, workdir)
    summary = summarize(results, scenarios)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.client == "confluent-kafka" else f"-{args.client}"
    out = args.out / f"kip848{suffix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    out.write_text(json.dumps({
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_1m_start": load_start, "load_1m_end": os.getloadavg()[0]},
        "members": args.client, "session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": HEARTBEAT_MS,
        "broker_settings": GROUP_SETTINGS, "kafka_only_settings": KAFKA_FLOORS, "runs": results,
        "summary": summary}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
