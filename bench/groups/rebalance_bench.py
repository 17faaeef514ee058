"""Group failover and rebalance times, Samsa vs Apache Kafka (compat-tests/KAFKA_VERSION), same settings, one run.

    .venv/bin/python bench/groups/rebalance_bench.py [--reps 3] [--client confluent-kafka]

Both brokers: one node, group.initial.rebalance.delay.ms=0; members use the classic protocol,
session.timeout.ms=6000, heartbeat.interval.ms=1000 (the member programs of compat-tests/groups).

- failover: 3 members over 6 partitions, a producer writing to every partition every 20 ms; one
  member is SIGKILLed; the figure is the time from the kill until a survivor has polled a record
  from each of the victim's partitions (the session timeout dominates: about 6 s + rebalance).
- rebalance of a 10-member group: 11 members over 11 partitions, stable; one leaves gracefully
  (SIGTERM: the client sends LeaveGroup); the figure is the time from the signal until the 10 that
  remain own all 11 partitions (the join and sync of all 10, plus the leaver's close).

Prints each repetition, the medians and the Samsa/Kafka ratio, and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "compat-tests"))
sys.path.insert(0, str(REPO / "compat-tests" / "groups"))
sys.path.insert(0, str(REPO))  # bench.group_workload

from harness import Member, wait_until  # noqa: E402
from oracle_fixture import kafka_cluster  # noqa: E402
from samsa_fixture import samsa_broker  # noqa: E402

from bench.group_workload import Trickle, create_topic  # noqa: E402

SESSION_MS = 6000


def owners(members: list[Member], partitions: int) -> bool:
    seen: list[int] = []
    for m in members:
        if m.assignment is None:
            return False
        seen.extend(m.assignment)
    return sorted(seen) == list(range(partitions))


def failover(bootstrap: str, client: str, workdir: Path) -> float:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"fo-{tag}", f"fo-g-{tag}"
    create_topic(bootstrap, topic, 6)
    trickle = Trickle(bootstrap, topic, 6)
    members = [Member.start(client, f"m{i}", bootstrap, topic, group, session_ms=SESSION_MS, workdir=workdir)
               for i in range(3)]
    try:
        wait_until("3 members over 6 partitions", lambda: owners(members, 6) and all(
            len(m.assignment or ()) == 2 for m in members), 120, members)
        time.sleep(1.0)
        victim, survivors = members[2], members[:2]
        victim_parts = set(victim.assignment or ())
        killed = time.monotonic()
        victim.kill()

        def polled() -> bool:
            got = {p for m in survivors for t, p, _ in m.seen() if t > killed}
            return victim_parts <= got

        wait_until("survivors polling the victim's partitions", polled, 120, survivors)
        first = {p: min(t for m in survivors for t, q, _ in m.seen() if t > killed and q == p) for p in victim_parts}
        return max(first.values()) - killed
    finally:
        trickle.close()
        for m in members:
            if m.alive():
                m.kill()


def rebalance_10(bootstrap: str, client: str, workdir: Path) -> float:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"rb-{tag}", f"rb-g-{tag}"
    create_topic(bootstrap, topic, 11)
    members = [Member.start(client, f"m{i}", bootstrap, topic, group, session_ms=SESSION_MS, workdir=workdir)
               for i in range(11)]
    try:
        wait_until("11 members over 11 partitions", lambda: owners(members, 11) and all(
            len(m.assignment or ()) == 1 for m in members), 180, members)
        time.sleep(2.0)
        leaver, rest = members[0], members[1:]
        before = {m.name: len(m.assignments) for m in rest}
        left = time.monotonic()
        leaver.terminate()
        wait_until("10 members owning 11 partitions", lambda: all(
            len(m.assignments) > before[m.name] for m in rest) and owners(rest, 11), 120, rest)
        return max(m.assignments[-1][0] for m in rest) - left
    finally:
        for m in members:
            if m.alive():
                m.kill()


def run(target: str, bootstrap: str, client: str, reps: int, workdir: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"failover": [], "rebalance10": []}
    for i in range(reps):
        f = failover(bootstrap, client, workdir)
        out["failover"].append(f)
        print(f"{target:6} rep {i + 1}: SIGKILL -> next poll of its partitions {f:6.2f} s", flush=True)
        r = rebalance_10(bootstrap, client, workdir)
        out["rebalance10"].append(r)
        print(f"{target:6} rep {i + 1}: 10-member rebalance after a leave  {r:6.2f} s", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--client", default="confluent-kafka")
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpus, {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}; client {args.client}; session.timeout.ms={SESSION_MS}")
    workdir = Path(tempfile.mkdtemp(prefix="samsa-group-bench-"))
    results: dict[str, dict[str, list[float]]] = {}
    with samsa_broker(extra_args=("--override", "group.initial.rebalance.delay.ms=0"), ready_timeout=90.0) as s:
        results["samsa"] = run("samsa", s.bootstrap, args.client, args.reps, workdir)
    with kafka_cluster(1) as c:
        results["kafka"] = run("kafka", c.bootstrap, args.client, args.reps, workdir)
    print()
    print(f"{'median (s)':28} {'samsa':>8} {'kafka':>8} {'samsa/kafka':>12}")
    summary: dict[str, dict[str, float]] = {}
    for name, label in (("failover", "SIGKILL -> next poll"), ("rebalance10", "10-member rebalance")):
        sm, km = statistics.median(results["samsa"][name]), statistics.median(results["kafka"][name])
        summary[name] = {"samsa_median_s": sm, "kafka_median_s": km, "ratio": sm / km}
        print(f"{label:28} {sm:8.2f} {km:8.2f} {sm / km:12.2f}")
    out = REPO / "bench" / "results" / f"groups-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": {"node": platform.node(), "cpus": os.cpu_count(),
                                           "python": platform.python_version(), "load_1m": os.getloadavg()[0]},
                               "client": args.client, "session_timeout_ms": SESSION_MS, "runs": results,
                               "summary": summary}, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
