"""Another client's produce latency while one client sends a burst of metadata writes, single node.

    .venv/bin/python bench/quorum/metadata_burst_bench.py [--reps 3] [--rate 50] [--burst-s 10]
        [--baseline-pythonpath DIR] [--out F]

Each repetition starts a fresh `samsa serve` (one-voter quorum), creates the topic `latency`, and runs
a confluent-kafka producer (acks=1, linger.ms=0, 100-byte values, --produce-rate records/s) for
--quiet-s seconds alone, then --burst-s seconds while another client sends CreateTopics (1 partition
each) at --rate requests/s in all over --burst-connections connections (raw protocol client). The
producer's per-record latency is librdkafka's own (Message.latency(): produce() to delivery report);
p50/p99/max are printed for the quiet and the burst phase, with the CreateTopics latencies and rate.

--baseline-pythonpath runs a second broker build side by side in the same run, repetitions
interleaved: the same interpreter with PYTHONPATH=DIR, where DIR holds a `samsa` directory whose
kproto/storage/raft/broker point at another checkout (e.g. main at 37cf301, the metadata driver
fsyncing on the event loop):

    git worktree add /work/wt/quorum-base 37cf301
    mkdir -p /tmp/qbase/pkg/samsa && for p in kproto broker storage raft; do
        ln -sfn /work/wt/quorum-base/$p /tmp/qbase/pkg/samsa/$p; done
    .venv/bin/python bench/quorum/metadata_burst_bench.py --baseline-pythonpath /tmp/qbase/pkg

Prints each repetition, the medians over repetitions, and the machine (including the fsync latency
of the data directory's file system, which is what the baseline's event loop waits for).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.machine import describe  # noqa: E402
from samsa.broker import launcher  # noqa: E402
from samsa.broker.client import Connection  # noqa: E402

VALUE = b"v" * 100


@contextmanager
def broker(pythonpath: str | None, data_dir: Path) -> Iterator[int]:
    """A `samsa serve` of this tree, or of the build at `pythonpath` (run from outside this repository, so
    that the checkout's own folders do not shadow it), through the launcher every test and bench uses."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    options = launcher.ServeOptions(data_dir=data_dir, port=launcher.free_port(), log_level="WARNING")
    process = launcher.start_serve(options, data_dir.parent / "samsa.log", env=env,
                                   cwd=Path(tempfile.gettempdir()) if pythonpath is not None else REPO)
    try:
        process.wait_listening()
        yield options.port
    finally:
        process.stop()


def create_topic(conn: Connection, name: str) -> int:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 30000, "validate_only": False})
    return int(r.topics[0].error_code.value)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary_ms(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {"count": len(ms), "p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3),
            "max_ms": round(max(ms), 3) if ms else float("nan")}


class Burst:
    """CreateTopics at `rate` per second in all, from `connections` connections (a broker answers one
    request per connection at a time, so one connection could not keep the rate once a CreateTopics
    takes longer than 1/rate), each request timed."""

    def __init__(self, port: int, rate: float, duration_s: float, prefix: str, connections: int) -> None:
        self.port, self.rate, self.duration_s, self.prefix = port, rate, duration_s, prefix
        self.latencies_s: list[float] = []
        self.errors: dict[int, int] = {}
        self.elapsed_s = 0.0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(k, connections), daemon=True)
                         for k in range(connections)]

    def start(self) -> None:
        self._start = time.perf_counter()
        for t in self._threads:
            t.start()

    def join(self, timeout_s: float) -> None:
        for t in self._threads:
            t.join(timeout_s)
        self.elapsed_s = time.perf_counter() - self._start

    def _run(self, k: int, connections: int) -> None:
        interval = connections / self.rate
        with Connection("127.0.0.1", self.port) as conn:
            i = 0
            while True:
                due = self._start + (k / connections + i) * interval
                if due - self._start >= self.duration_s:
                    break
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                t0 = time.perf_counter()
                code = create_topic(conn, f"{self.prefix}-{k}-{i}")
                took = time.perf_counter() - t0
                with self._lock:
                    self.latencies_s.append(took)
                    if code:
                        self.errors[code] = self.errors.get(code, 0) + 1
                i += 1


def produce_phase(producer: Any, duration_s: float, rate: float) -> list[float]:
    latencies: list[float] = []
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            latencies.append(msg.latency())

    start = time.perf_counter()
    interval = 1 / rate
    i = 0
    while True:
        due = start + i * interval
        if due - start >= duration_s:
            break
        delay = due - time.perf_counter()
        if delay > 0:
            producer.poll(delay)
        producer.produce("latency", VALUE, on_delivery=delivered)
        producer.poll(0)
        i += 1
    producer.flush(30)
    if failed:
        raise RuntimeError(f"{len(failed)} records failed, e.g. {failed[0]}")
    return latencies


def one_run(pythonpath: str | None, args: argparse.Namespace, rep: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    with tempfile.TemporaryDirectory(prefix="samsa-burst-") as tmp, broker(pythonpath, Path(tmp) / "data") as port:
        with Connection("127.0.0.1", port) as conn:
            assert create_topic(conn, "latency") == 0
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1", "linger.ms": 0,
                             "enable.idempotence": False})
        produce_phase(producer, 1.0, args.produce_rate)  # warm-up: metadata, connection
        quiet = produce_phase(producer, args.quiet_s, args.produce_rate)
        burst = Burst(port, args.rate, args.burst_s, f"burst-{rep}", args.burst_connections)
        burst.start()
        during = produce_phase(producer, args.burst_s, args.produce_rate)
        burst.join(120)
        del producer  # disconnect before the broker stops (no librdkafka "connection closed" noise)
        return {
            "quiet": summary_ms(quiet),
            "burst": summary_ms(during),
            "create_topics": {**summary_ms(burst.latencies_s),
                              "rate_per_s": round(len(burst.latencies_s) / burst.elapsed_s, 1) if burst.elapsed_s
                              else 0.0, "errors": burst.errors},
        }


def fsync_latency_ms(directory: Path, count: int = 50) -> dict[str, float]:
    """What one small write + fsync costs on this file system (the baseline's loop waits for it)."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    times: list[float] = []
    try:
        for _ in range(count):
            os.write(fd, b"x" * 128)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    s = summary_ms(times)
    return {"p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0, help="CreateTopics per second during the burst")
    parser.add_argument("--burst-s", type=float, default=10.0)
    parser.add_argument("--burst-connections", type=int, default=8)
    parser.add_argument("--quiet-s", type=float, default=5.0)
    parser.add_argument("--produce-rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--baseline-pythonpath", default=None,
                        help="also run the build found at this PYTHONPATH (a dir holding samsa/)")
    parser.add_argument("--out", default=None, help="write the JSON result here")
    args = parser.parse_args()

    variants: list[tuple[str, str | None]] = [("this tree", None)]
    if args.baseline_pythonpath:
        variants.insert(0, ("baseline", args.baseline_pythonpath))
    with tempfile.TemporaryDirectory(prefix="samsa-burst-") as tmp:
        machine = {**describe(), "fsync_128b": fsync_latency_ms(Path(tmp))}
    print("machine:", json.dumps(machine))
    print(f"producer: confluent-kafka acks=1 linger.ms=0, {len(VALUE)}-byte values at {args.produce_rate:g}/s; "
          f"burst: CreateTopics (1 partition) at {args.rate:g}/s for {args.burst_s:g} s over "
          f"{args.burst_connections} connections")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in variants}
    for rep in range(args.reps):
        for name, pythonpath in variants:
            result = one_run(pythonpath, args, rep)
            runs[name].append(result)
            q, b, c = result["quiet"], result["burst"], result["create_topics"]
            print(f"rep {rep + 1} {name:>9}: produce quiet p50 {q['p50_ms']:.2f} p99 {q['p99_ms']:.2f} ms | "
                  f"during burst p50 {b['p50_ms']:.2f} p99 {b['p99_ms']:.2f} max {b['max_ms']:.1f} ms | "
                  f"CreateTopics p50 {c['p50_ms']:.2f} p99 {c['p99_ms']:.2f} ms at {c['rate_per_s']}/s "
                  f"errors {c['errors']}", flush=True)
    medians: dict[str, dict[str, float]] = {}
    for name, results in runs.items():
        medians[name] = {
            "quiet_p99_ms": statistics.median(r["quiet"]["p99_ms"] for r in results),
            "burst_p50_ms": statistics.median(r["burst"]["p50_ms"] for r in results),
            "burst_p99_ms": statistics.median(r["burst"]["p99_ms"] for r in results),
            "burst_max_ms": statistics.median(r["burst"]["max_ms"] for r in results),
            "create_p99_ms": statistics.median(r["create_topics"]["p99_ms"] for r in results),
        }
        m = medians[name]
        print(f"median {name:>9}: produce p99 quiet {m['quiet_p99_ms']:.2f} ms, during burst "
              f"{m['burst_p99_ms']:.2f} ms (p50 {m['burst_p50_ms']:.2f}, max {m['burst_max_ms']:.1f}); "
              f"CreateTopics p99 {m['create_p99_ms']:.2f} ms")
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": machine, "args": vars(args), "runs": runs,
                                              "medians": medians}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
