"""Partition replication figures, Samsa vs the reference Apache Kafka's KRaft, three combined nodes each, one run.

    .venv/bin/python bench/replication/replication_bench.py [--records 200000] [--warmup-records 0] [--rate R]
        [--rate-seconds 30] [--reps 3] [--broker-session-timeout-ms 9000] [--replica-lag-time-max-ms 30000]
        [--skip-kafka] [--out F]

Every topic has 3 partitions, replication.factor=3 and min.insync.replicas=2 (CreateTopics with the
same request on both systems); both clusters get the same replica.lag.time.max.ms and
broker.session.timeout.ms (Kafka's defaults, 30000 and 9000, unless told otherwise).

- throughput: Kafka's own ProducerPerformance (the reference kafka-tools), --records records of 1 KiB,
  unthrottled, acks=all, enable.idempotence=true, the Java client's defaults otherwise (linger.ms 5,
  batch.size 16384) -> records/s, MiB/s, and the CPU the three brokers used meanwhile.
  --warmup-records first runs the tool unmeasured (JVMs start cold: in one run on a loaded 2-core
  machine Kafka's acks=all rate went from 916 to 2,383 records/s between a first and a second run).
- latency: the same tool at a fixed rate -> p50/p99/p99.9 (send() to acknowledgement, as the tool
  measures it). The rates are --rate, or else 50% of Kafka's unthrottled rate and, when lower, 50% of
  the slower system's, so that one point is a rate both systems sustain (a rate above a system's
  capacity measures its queue, not its latency; the achieved rate is printed beside).
- failover: a confluent-kafka producer (acks=all, idempotent, linger.ms 0) sends one record every
  5 ms to one partition; its leader gets SIGKILL. The figure is the time from the kill to the first
  acknowledgement of a record sent after the kill; also the longest gap between two acknowledgements,
  and when a survivor's Metadata first names a new leader. The victim leads that partition but is not
  the active controller (when a partition allows it), so that the figure is the data path's failover,
  not a controller election on top. The killed broker is then restarted; the time until every
  partition of that topic has its full ISR again is reported. A fresh topic per repetition.

Order: Samsa's throughput, then Kafka (throughput, latency, failover), then Samsa again (latency,
failover) on a fresh cluster, so that the latency rates can depend on both throughputs and only one
cluster runs at a time. Prints each figure, the medians, the Samsa/Kafka ratios (saying which way is
better) and the machine; the JSON result goes to bench/results/replication.json.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "compat-tests"))
sys.path.insert(0, str(REPO))

import oracle_fixture  # noqa: E402

from bench import cluster_probes  # noqa: E402
from bench.cluster_probes import connect  # noqa: E402
from bench.compare.perf_tools import RECORD_SIZE, parse_producer, tool_timeout  # noqa: E402
from bench.machine import cpu_seconds, describe  # noqa: E402
from samsa.broker.client import Connection, KafkaClientError  # noqa: E402

PARTITIONS = 3
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
POLL_S = 0.05
SEND_INTERVAL_S = 0.005
FAILOVER_TIMEOUT_S = 120.0
ISR_TIMEOUT_S = 180.0
AFTER_RECOVERY_S = 0.5  # keep sending this long after the first post-kill acknowledgement
PRODUCER = "org.apache.kafka.tools.ProducerPerformance"


# --- the two clusters ---------------------------------------------------------------------------------


@dataclass
class Cluster:
    label: str
    nodes: dict[int, str]  # node id -> host:port
    pids: Callable[[], list[int]]
    kill: Callable[[int], None]
    restart: Callable[[int], None]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes.values())

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                total += cpu_seconds(pid)
        return total


@contextlib.contextmanager
def kafka_nodes(overrides: dict[str, str]) -> Iterator[Cluster]:
    with oracle_fixture.kafka_cluster(nodes=3, overrides=dict(overrides)) as kc:
        by_id = {kn.node_id: kn for kn in kc.nodes}

        def kill(node_id: int) -> None:
            kn = by_id[node_id]
            if kn.proc is not None and kn.proc.poll() is None:
                os.kill(kn.proc.pid, signal.SIGKILL)
                kn.proc.wait()

        def restart(node_id: int) -> None:
            kc.restart_node(by_id[node_id])

        yield Cluster("kafka", {kn.node_id: kn.bootstrap for kn in kc.nodes}, lambda: kc.pids, kill, restart)


@contextlib.contextmanager
def samsa_nodes(overrides: dict[str, str]) -> Iterator[Cluster]:
    """Three combined nodes started the way `samsa cluster up` starts them (broker.cluster_cli)."""
    from samsa.broker.cli import cluster as cluster_cli

    with tempfile.TemporaryDirectory(prefix="samsa-replication-bench-") as tmp:
        plan = cluster_cli.plan_cluster(Path(tmp), 3, log_level="WARNING",
                                        overrides=[f"{k}={v}" for k, v in overrides.items()])
        processes = cluster_cli.start_cluster(plan, die_with_parent=True)
        try:
            def kill(node_id: int) -> None:
                proc = processes[node_id]
                proc.send_signal(signal.SIGKILL)
                proc.wait()

            def restart(node_id: int) -> None:
                spec = plan.node(node_id)
                processes[node_id] = cluster_cli.start_node(plan, spec, die_with_parent=True)
                if wait_for(lambda: cluster_cli.port_open(spec.broker_port), 60) is None:
                    raise RuntimeError(f"samsa node {node_id} did not reopen its port\n"
                                       + cluster_cli.log_tail(spec.log_path))

            def pids() -> list[int]:
                return [p.pid for p in processes.values() if p.poll() is None]

            yield Cluster("samsa", {s.node_id: s.bootstrap for s in plan.nodes}, pids, kill, restart)
        finally:
            cluster_cli.stop_pids([cluster_cli.owned(p) for p in processes.values()])


# --- raw protocol probes --------------------------------------------------------------------------------


def _conn(bootstrap: str) -> Connection:
    return connect(bootstrap, "replication-bench")


def wait_for(what: Callable[[], bool], timeout_s: float) -> float | None:
    return cluster_probes.wait_for(what, timeout_s, POLL_S)


def brokers_listed(bootstrap: str) -> set[int]:
    try:
        with _conn(bootstrap) as c:
            r = c.request(3, {"topics": [], "allow_auto_topic_creation": False})
    except (OSError, KafkaClientError):
        return set()
    return {int(b.node_id) for b in r.brokers}


def partitions(bootstrap: str, topic: str) -> dict[int, Any] | None:
    """Metadata for `topic` from one broker: partition index -> partition, None if unknown/unreachable."""
    try:
        with _conn(bootstrap) as c:
            r = c.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    except (OSError, KafkaClientError):
        return None
    t = r.topics[0]
    if t.error_code.value != 0 or len(t.partitions) != PARTITIONS:
        return None
    return {int(p.partition_index): p for p in t.partitions}


def isr_full(bootstrap: str, topic: str) -> bool:
    parts = partitions(bootstrap, topic)
    return parts is not None and all(
        int(p.leader_id) >= 0 and len(p.replica_nodes) == REPLICATION_FACTOR
        and sorted(map(int, p.isr_nodes)) == sorted(map(int, p.replica_nodes)) for p in parts.values())


def quorum_leader(bootstrap: str) -> int | None:
    """The active controller (the metadata quorum's leader) as DescribeQuorum tells it."""
    found = cluster_probes.quorum_leader_and_epoch(bootstrap)
    return None if found is None else found[0]


def create_topic(cluster: Cluster, topic: str) -> None:
    """3 partitions, RF 3, min.insync.replicas=2, through the first node; returns once every node
    lists it with a full ISR."""
    first = next(iter(cluster.nodes.values()))
    with _conn(first) as c:
        r = c.request(19, {"timeout": 30000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": PARTITIONS, "replication_factor": REPLICATION_FACTOR,
            "assignments": [],
            "configs": [{"name": "min.insync.replicas", "value": str(MIN_INSYNC_REPLICAS)}]}]})
    error = r.topics[0].error_code.value
    if error not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
        raise RuntimeError(f"{cluster.label}: CreateTopics {topic} failed with error {error}")
    for node in cluster.nodes.values():
        if wait_for(lambda node=node: isr_full(node, topic), 60) is None:  # type: ignore[misc]
            raise RuntimeError(f"{cluster.label}: {topic} never showed a full ISR on {node}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- throughput and latency: Kafka's ProducerPerformance --------------------------------------------------


def producer_perf(cluster: Cluster, topic: str, records: int, throughput: int) -> dict[str, Any]:
    t0, cpu0 = time.monotonic(), cluster.cpu_seconds()
    res = oracle_fixture.run_kafka_tool(
        PRODUCER, "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_SIZE),
        "--throughput", str(throughput), "--producer-props", f"bootstrap.servers={cluster.bootstrap}",
        "acks=all", "enable.idempotence=true", timeout=tool_timeout(records))
    wall, cpu = time.monotonic() - t0, cluster.cpu_seconds() - cpu0
    out: dict[str, Any] = parse_producer(res.stdout)
    if out["records"] != records:
        raise RuntimeError(f"{cluster.label}: ProducerPerformance sent {out['records']} of {records}")
    out["brokers_cpu_s"] = round(cpu, 2)
    out["brokers_cpu_us_per_record"] = round(cpu / records * 1e6, 1)  # the three brokers together
    out["brokers_cores"] = round(cpu / wall, 2)  # over the tool's whole run, JVM start included
    return out


def throughput(cluster: Cluster, records: int, warmup_records: int) -> dict[str, Any]:
    if warmup_records > 0:  # lets the JVMs compile their hot paths first; not measured
        topic = unique("repl-warmup")
        create_topic(cluster, topic)
        warm = producer_perf(cluster, topic, warmup_records, -1)
        print(f"  {cluster.label} warm-up ({warmup_records:,} records, not counted): "
              f"{warm['records_per_s']:,.0f} records/s", flush=True)
    topic = unique("repl-tput")
    create_topic(cluster, topic)
    out = producer_perf(cluster, topic, records, -1)
    print(f"  {cluster.label} acks=all unthrottled: {out['records_per_s']:,.0f} records/s "
          f"({out['mib_per_s']:.1f} MiB/s), p99 {out['p99_ms']:.0f} ms; "
          f"brokers used {out['brokers_cores']:.2f} cores, {out['brokers_cpu_us_per_record']:.0f} µs of CPU per record",
          flush=True)
    return out


def latency(cluster: Cluster, rate: int, records: int) -> dict[str, Any]:
    topic = unique("repl-rate")
    create_topic(cluster, topic)
    out = producer_perf(cluster, topic, records, rate)
    out["target_rate"] = rate
    print(f"  {cluster.label} acks=all at {rate:,}/s (achieved {out['records_per_s']:,.0f}): "
          f"p50 {out['p50_ms']:.0f} ms, p99 {out['p99_ms']:.0f} ms, p99.9 {out['p99.9_ms']:.0f} ms; "
          f"brokers used {out['brokers_cores']:.2f} cores", flush=True)
    return out


# --- failover -----------------------------------------------------------------------------------------------


class PacedProducer:
    """One record every SEND_INTERVAL_S to one partition (acks=all, idempotent, linger.ms 0), recording
    when each was sent and when it was acknowledged (time.monotonic())."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        from confluent_kafka import Producer

        self.topic, self.partition = topic, partition
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 0, "message.timeout.ms": int(FAILOVER_TIMEOUT_S * 1000 * 2),
                                  "log_level": 2})
        self.sent: list[float] = []
        self.acked: list[tuple[int, float]] = []  # (sequence, when), in callback order
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((int(msg.value()), now))

    def _run(self) -> None:
        next_send = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_send:
                self.sent.append(now)
                self.producer.produce(self.topic, str(len(self.sent) - 1).encode(), partition=self.partition,
                                      on_delivery=self._delivered)
                next_send += SEND_INTERVAL_S
                if next_send < now:  # fell behind (a loaded machine): do not burst to catch up
                    next_send = now + SEND_INTERVAL_S
            self.producer.poll(max(0.0, next_send - time.monotonic()))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> int:
        """Stop sending, wait for outstanding acknowledgements; returns how many never came."""
        self._stop.set()
        self._thread.join(10)
        return int(self.producer.flush(30))

    def first_ack_sent_after(self, t: float) -> float | None:
        """When the first record sent after `t` was acknowledged."""
        times = [at for seq, at in self.acked if self.sent[seq] > t]
        return min(times) if times else None


def pick_victim(cluster: Cluster, topic: str) -> tuple[int, int, int | None]:
    """(partition, its leader, the active controller): a partition whose leader is not the controller,
    when there is one."""
    first = next(iter(cluster.nodes.values()))
    parts = partitions(first, topic)
    controller = quorum_leader(first)
    if parts is None:
        raise RuntimeError(f"{cluster.label}: no metadata for {topic}")
    ordered = sorted(parts.values(), key=lambda p: (int(p.leader_id) == controller, int(p.partition_index)))
    p = ordered[0]
    return int(p.partition_index), int(p.leader_id), controller


def failover(cluster: Cluster, rep: int) -> dict[str, Any]:
    topic = unique("repl-failover")
    create_topic(cluster, topic)
    partition, victim, controller = pick_victim(cluster, topic)
    survivors = [b for n, b in cluster.nodes.items() if n != victim]
    old_epoch = int(partitions(survivors[0], topic)[partition].leader_epoch)  # type: ignore[index]
    producer = PacedProducer(cluster.bootstrap, topic, partition)
    producer.start()
    if wait_for(lambda: len(producer.acked) >= 50, 30) is None:
        producer.stop()
        raise RuntimeError(f"{cluster.label}: the paced producer got no acknowledgements before the kill")
    killed_at = time.monotonic()
    cluster.kill(victim)

    def new_leader() -> bool:
        for b in survivors:
            parts = partitions(b, topic)
            if parts is not None and int(parts[partition].leader_id) not in (victim, -1) \
                    and int(parts[partition].leader_epoch) > old_epoch:
                return True
        return False

    elected = wait_for(new_leader, FAILOVER_TIMEOUT_S)
    if wait_for(lambda: producer.first_ack_sent_after(killed_at) is not None, FAILOVER_TIMEOUT_S) is None:
        producer.stop()
        raise RuntimeError(f"{cluster.label}: no produce succeeded within {FAILOVER_TIMEOUT_S:.0f} s of the kill")
    time.sleep(AFTER_RECOVERY_S)
    undelivered = producer.stop()
    recovered_at = producer.first_ack_sent_after(killed_at)
    assert recovered_at is not None
    ack_times = sorted(at for _, at in producer.acked)
    longest_gap = max((b - a for a, b in itertools.pairwise(ack_times)), default=0.0)

    restart_at = time.monotonic()
    cluster.restart(victim)
    port_open_s = time.monotonic() - restart_at
    full = wait_for(lambda: isr_full(survivors[0], topic), ISR_TIMEOUT_S)
    if full is None:
        raise RuntimeError(f"{cluster.label}: broker {victim} did not rejoin the ISR of {topic} "
                           f"within {ISR_TIMEOUT_S:.0f} s of its restart")
    result = {
        "partition": partition, "victim": victim, "victim_was_controller": victim == controller,
        "failover_ms": (recovered_at - killed_at) * 1000,
        "longest_ack_gap_ms": longest_gap * 1000,
        "new_leader_visible_ms": None if elected is None else elected * 1000,
        "sent": len(producer.sent), "acked": len(producer.acked), "errors": len(producer.errors),
        "undelivered": undelivered,
        "restart_port_open_s": port_open_s,
        "isr_full_after_restart_s": time.monotonic() - restart_at,
    }
    print(f"  {cluster.label} failover {rep + 1}: killed broker {victim} (leader of partition {partition}"
          f"{', also the controller' if result['victim_was_controller'] else ''}); "
          f"produces succeed again after {result['failover_ms']:.0f} ms, longest ack gap "
          f"{result['longest_ack_gap_ms']:.0f} ms, new leader visible after "
          f"{'?' if elected is None else f'{elected * 1000:.0f}'} ms; restarted: port open "
          f"{port_open_s:.1f} s, ISR full {result['isr_full_after_restart_s']:.1f} s after the restart; "
          f"{result['acked']}/{result['sent']} acknowledged, {result['errors']} errors", flush=True)
    return result


def failovers(cluster: Cluster, reps: int) -> dict[str, Any]:
    runs = [failover(cluster, rep) for rep in range(reps)]
    summary: dict[str, Any] = {
        key: statistics.median(r[key] for r in runs)
        for key in ("failover_ms", "longest_ack_gap_ms", "isr_full_after_restart_s")
    }
    visible = [r["new_leader_visible_ms"] for r in runs if r["new_leader_visible_ms"] is not None]
    summary["new_leader_visible_ms"] = statistics.median(visible) if visible else None
    summary["runs"] = runs
    print(f"  {cluster.label} failover medians: produces succeed again after {summary['failover_ms']:.0f} ms, "
          f"longest ack gap {summary['longest_ack_gap_ms']:.0f} ms, ISR full "
          f"{summary['isr_full_after_restart_s']:.1f} s after the restart", flush=True)
    return summary


# --- the run ------------------------------------------------------------------------------------------------


def wait_ready(cluster: Cluster) -> None:
    want = set(cluster.nodes)
    if wait_for(lambda: all(brokers_listed(b) == want for b in cluster.nodes.values()), 180) is None:
        raise RuntimeError(f"{cluster.label}: the brokers never all listed each other")


def rate_records(args: argparse.Namespace, rate: int) -> int:
    return min(int(args.records), max(500, int(rate * args.rate_seconds)))


# (figure, JSON path, which way is better)
RATIOS: list[tuple[str, tuple[str, ...], str]] = [
    ("acks=all throughput records/s", ("throughput", "records_per_s"), "higher"),
    ("acks=all throughput MiB/s", ("throughput", "mib_per_s"), "higher"),
    ("brokers' CPU per record, µs (three brokers)", ("throughput", "brokers_cpu_us_per_record"), "lower"),
    ("failover (kill -> first ack of a later record) ms", ("failover", "failover_ms"), "lower"),
    ("longest ack gap ms", ("failover", "longest_ack_gap_ms"), "lower"),
    ("new leader visible ms", ("failover", "new_leader_visible_ms"), "lower"),
    ("ISR full after restart s", ("failover", "isr_full_after_restart_s"), "lower"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="records in the unthrottled run")
    parser.add_argument("--warmup-records", type=int, default=0,
                        help="an unmeasured unthrottled run before the measured one (0: none, the brokers start cold)")
    parser.add_argument("--rate", type=int, default=None, help="one fixed rate for the latency runs (records/s)")
    parser.add_argument("--rate-seconds", type=float, default=30.0, help="at most this long per latency run")
    parser.add_argument("--reps", type=int, default=3, help="failover repetitions")
    parser.add_argument("--broker-session-timeout-ms", type=int, default=9000)
    parser.add_argument("--replica-lag-time-max-ms", type=int, default=30000)
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "replication.json")
    args = parser.parse_args(argv)
    overrides = {"broker.session.timeout.ms": str(args.broker_session_timeout_ms),
                 "replica.lag.time.max.ms": str(args.replica_lag_time_max_ms)}
    machine = describe()
    print(f"machine: {machine}; load average {os.getloadavg()}", flush=True)
    print(f"both clusters: {overrides}; topics: {PARTITIONS} partitions, replication.factor={REPLICATION_FACTOR}, "
          f"min.insync.replicas={MIN_INSYNC_REPLICAS}", flush=True)
    results: dict[str, Any] = {
        "machine": machine, "load_average_before": os.getloadavg(), "args": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "settings": {**overrides, "partitions": PARTITIONS, "replication.factor": REPLICATION_FACTOR,
                     "min.insync.replicas": MIN_INSYNC_REPLICAS, "record_bytes": RECORD_SIZE}}
    samsa: dict[str, Any] = {}
    kafka: dict[str, Any] = {}

    def rates(kafka_rps: float | None) -> dict[str, int]:
        if args.rate is not None:
            return {"fixed": args.rate}
        samsa_rps = samsa["throughput"]["records_per_s"]
        if kafka_rps is None:
            return {"half_samsa": max(1, int(samsa_rps / 2))}
        out = {"half_kafka": max(1, int(kafka_rps / 2))}
        slower = min(samsa_rps, kafka_rps)
        if slower / 2 < 0.8 * out["half_kafka"]:
            out["half_slower"] = max(1, int(slower / 2))
        return out

    def finish(cluster: Cluster, into: dict[str, Any], kafka_rps: float | None) -> None:
        into["latency"] = {}
        for name, rate in rates(kafka_rps).items():
            into["latency"][name] = latency(cluster, rate, rate_records(args, rate))
        into["failover"] = failovers(cluster, args.reps)

    print("samsa: starting 3 nodes", flush=True)
    with samsa_nodes(overrides) as cluster:
        wait_ready(cluster)
        samsa["throughput"] = throughput(cluster, args.records, args.warmup_records)
        if args.skip_kafka:
            finish(cluster, samsa, None)
    if not args.skip_kafka:
        print("kafka: starting 3 nodes", flush=True)
        with kafka_nodes(overrides) as cluster:
            wait_ready(cluster)
            kafka["throughput"] = throughput(cluster, args.records, args.warmup_records)
            finish(cluster, kafka, kafka["throughput"]["records_per_s"])
        print("samsa: starting 3 fresh nodes for the latency and failover runs", flush=True)
        with samsa_nodes(overrides) as cluster:
            wait_ready(cluster)
            finish(cluster, samsa, kafka["throughput"]["records_per_s"])
    results["samsa"] = samsa
    if kafka:
        results["kafka"] = kafka
        ratios: dict[str, Any] = {}
        print("ratios (Samsa / Kafka):")
        rows = list(RATIOS)
        for name in samsa["latency"]:
            rate = samsa["latency"][name]["target_rate"]
            for p in ("p50_ms", "p99_ms", "p99.9_ms"):
                rows.append((f"latency {p} at {rate:,}/s", ("latency", name, p), "lower"))
            rows.append((f"achieved rate at {rate:,}/s", ("latency", name, "records_per_s"), "higher"))
        for label, path, better in rows:
            s, k = _dig(samsa, path), _dig(kafka, path)
            ratio = s / k if isinstance(s, (int, float)) and isinstance(k, (int, float)) and k else None
            ratios[label] = {"samsa": s, "kafka": k, "ratio": ratio, "better": better}
            shown = "n/a" if ratio is None else f"{ratio:.2f}"
            print(f"  {label}: samsa {_fmt(s)}, kafka {_fmt(k)} -> {shown} ({better} is better)")
        results["ratios"] = ratios
    results["load_average_after"] = os.getloadavg()
    print(f"load average after: {results['load_average_after']}")
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def _dig(d: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _fmt(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"


if __name__ == "__main__":
    sys.exit(main())
