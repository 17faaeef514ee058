"""What metrics cost: /metrics scrape time with 10,000 partitions, and produce/consume throughput with
the metrics listener on (scraped every second) vs off, in one run on the same machine.

    .venv/bin/python -m bench.metrics [--partitions 10000] [--records 1000000] [--rounds 6] [--smoke]

The figures are printed and written to bench/results/metrics-<UTC timestamp>.json (--smoke: not written).

Throughput rounds alternate which broker goes first (off/on, then on/off) and the medians are compared:
this machine is shared, so single runs vary by more than the effect being measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.broker import consume, create_topic, produce
from bench.machine import cpu_seconds, describe
from samsa.broker.launcher import ServeOptions, free_ports, start_serve

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SCRAPE_COST_SAMPLES = 200
TOPIC_PARTITIONS = 100  # per topic: 10,000 partitions are 100 topics of 100


def scrape_time(partitions: int, tmp: Path) -> dict[str, Any]:
    """The scrape's figures: per series selection, its time in one go and as /metrics serves it."""
    from samsa.broker.broker import Broker
    from samsa.broker.config import BrokerConfig
    from samsa.broker.controller import TopicSpec
    from samsa.broker.group.classic_group import OffsetAndMetadata
    from samsa.broker.observability.collectors import MetricsOptions, broker_collectors, collect_all
    from samsa.broker.observability.http import ObservabilityServer
    from samsa.broker.observability.series import exposition
    from samsa.kproto.records import encode_batch

    broker = Broker(BrokerConfig(overrides={"offsets.topic.num.partitions": "1"}, data_dir=tmp / "scrape"))
    figures: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        per_topic = min(partitions, TOPIC_PARTITIONS)
        topics = [f"t{i}" for i in range(max(1, partitions // per_topic))]
        for name in topics:
            broker.controller.create_topics([TopicSpec(name, per_topic, 1)], validate_only=False).result()
        now = int(time.time() * 1000)
        offsets = {}
        for name in topics:
            for p in range(per_topic):
                part = broker.replica_manager.get_partition(name, p)
                assert part is not None
                for i in range(2):
                    part.append_as_leader(bytearray(encode_batch([(None, b"x" * 100, ())], timestamp_ms=now + i)),
                                          now)
                offsets[(name, p)] = OffsetAndMetadata(1, -1, "", now)  # one record unread everywhere
        broker.groups.coordinator.commit_offsets("bench-group", "", offsets, now)
        hosted = sum(1 for _ in broker.replica_manager.partitions())
        figures.update(partitions_hosted=hosted, committed_offsets=len(offsets))
        print(f"scrape: {hosted} partitions hosted, one group with {len(offsets)} committed offsets "
              f"(set up in {time.perf_counter() - t0:.1f} s)")
        for label, options in (("all series", MetricsOptions()),
                               ("per-group series off", MetricsOptions(per_group=False)),
                               ("per-partition and per-group off", MetricsOptions(False, False))):
            collectors = broker_collectors(broker, options=options)
            times, size = [], 0
            for _ in range(5):
                t = time.perf_counter()
                size = len(exposition(collect_all(collectors)))
                times.append(time.perf_counter() - t)
            total, held = asyncio.run(_served_scrape(ObservabilityServer(broker, options=options)))
            print(f"scrape ({label}): in one go: median {statistics.median(times) * 1000:.0f} ms, "
                  f"{size / 1e6:.1f} MB of text; as /metrics serves it: {total * 1000:.0f} ms in all, the loop "
                  f"held at most {held * 1000:.1f} ms at a time")
            figures[label] = {"in_one_go_median_ms": statistics.median(times) * 1000, "text_bytes": size,
                              "served_ms": total * 1000, "loop_held_max_ms": held * 1000}
    finally:
        broker.close()
    return figures


async def _served_scrape(server: Any) -> tuple[float, float]:
    """(wall time of one /metrics body, the longest the event loop went without running a 1 ms ticker)."""
    longest = 0.0
    done = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last - 0.001)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    await server.metrics()
    total = time.perf_counter() - start
    done = True
    await task
    return total, longest


class Served:
    def __init__(self, data_dir: Path, metrics: bool) -> None:
        self.port, self.metrics_port = free_ports(2)
        extra = ("--metrics-listen", f"127.0.0.1:{self.metrics_port}") if metrics else ()
        self.served = start_serve(ServeOptions(data_dir=data_dir, port=self.port, log_level="WARNING",
                                               extra_args=extra), data_dir.parent / f"samsa-{self.port}.log",
                                  cwd=REPO)
        self.served.wait_listening(60)
        self.metrics = metrics
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scrape, daemon=True) if metrics else None
        if self._thread is not None:
            self._thread.start()

    def _scrape(self) -> None:
        while not self._stop.wait(1.0):  # Prometheus' usual interval is 15 s: every second is harsher
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
                    r.read()
                self.scrapes += 1
            except OSError:
                pass

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._stop.set()
        self.served.stop(20)


def throughput(records: int, size: int, partitions: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """Wall-clock records/s, and records per broker CPU-second (less sensitive to other load on a shared
    machine: the broker's own CPU time is what metrics could add to); returns the medians and ratios."""
    rates: dict[tuple[bool, str], list[float]] = {}
    per_cpu: dict[tuple[bool, str], list[float]] = {}
    scrape_cpu_ms: list[float] = []
    for r in range(rounds):
        for metrics in (False, True) if r % 2 == 0 else (True, False):  # alternate who goes first
            broker = Served(tmp / f"tp-{r}-{int(metrics)}", metrics)
            pid = broker.served.pid
            try:
                topic = "bench"
                create_topic(broker.bootstrap, topic, partitions)
                cpu0 = cpu_seconds(pid)
                elapsed = produce(broker.bootstrap, topic, records, size, "1")
                cpu1 = cpu_seconds(pid)
                rates.setdefault((metrics, "produce"), []).append(records / elapsed)
                per_cpu.setdefault((metrics, "produce"), []).append(records / max(cpu1 - cpu0, 1e-9))
                elapsed = consume(broker.bootstrap, topic, partitions, records)
                cpu2 = cpu_seconds(pid)
                rates.setdefault((metrics, "consume"), []).append(records / elapsed)
                per_cpu.setdefault((metrics, "consume"), []).append(records / max(cpu2 - cpu1, 1e-9))
                scrapes = broker.scrapes
                if metrics:  # the broker's CPU per /metrics request, idle, over HTTP as Prometheus asks
                    cpu3 = cpu_seconds(pid)
                    for _ in range(SCRAPE_COST_SAMPLES):
                        with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as u:
                            u.read()
                    scrape_cpu_ms.append((cpu_seconds(pid) - cpu3) * 1000 / SCRAPE_COST_SAMPLES)
            finally:
                broker.stop()
                shutil.rmtree(tmp / f"tp-{r}-{int(metrics)}", ignore_errors=True)
            print(f"round {r + 1} metrics {'on ' if metrics else 'off'}: produce "
                  f"{rates[(metrics, 'produce')][-1]:,.0f} records/s ({per_cpu[(metrics, 'produce')][-1]:,.0f} per "
                  f"broker CPU-s), consume {rates[(metrics, 'consume')][-1]:,.0f} records/s "
                  f"({per_cpu[(metrics, 'consume')][-1]:,.0f} per CPU-s)" + (f", {scrapes} scrapes" if metrics else ""))
    print(f"broker CPU per /metrics request (idle, {SCRAPE_COST_SAMPLES} in a row): median "
          f"{statistics.median(scrape_cpu_ms):.2f} ms")
    figures: dict[str, Any] = {"records": records, "record_bytes": size, "partitions": partitions, "rounds": rounds,
                               "scrape_cpu_ms_median": statistics.median(scrape_cpu_ms), "target_ratio": 0.97}
    for what in ("produce", "consume"):
        on, off = statistics.median(rates[(True, what)]), statistics.median(rates[(False, what)])
        con, coff = statistics.median(per_cpu[(True, what)]), statistics.median(per_cpu[(False, what)])
        print(f"{what}: metrics on/off, medians of {rounds}: {on:,.0f} / {off:,.0f} records/s = {on / off:.3f}; "
              f"{con:,.0f} / {coff:,.0f} records per broker CPU-second = {con / coff:.3f} (target >= 0.97)")
        figures[what] = {"on_records_per_s": on, "off_records_per_s": off, "ratio": on / off,
                         "on_records_per_cpu_s": con, "off_records_per_cpu_s": coff, "cpu_ratio": con / coff,
                         "rounds_records_per_s": {"on": rates[(True, what)], "off": rates[(False, what)]}}
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000, help="for the scrape-time measurement")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--skip-scrape", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes to check the benchmark runs")
    parser.add_argument("--output", type=Path, default=None,
                        help="where to write the figures (default bench/results/metrics-<UTC timestamp>.json; "
                             "with --smoke, nowhere unless given)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.partitions, args.records, args.rounds = 200, 2000, 1
    machine = describe()
    print(f"machine: {machine}")
    started = time.gmtime()
    results: dict[str, Any] = {"machine": machine, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", started),
                               "smoke": args.smoke}
    with tempfile.TemporaryDirectory(prefix="samsa-bench-metrics-") as tmp:
        if not args.skip_scrape:
            results["scrape"] = {"partitions": args.partitions, **scrape_time(args.partitions, Path(tmp))}
        if not args.skip_throughput:
            results["throughput"] = throughput(args.records, args.size, 4, args.rounds, Path(tmp))
    out = args.output
    if out is None and not args.smoke:
        out = RESULTS / f"metrics-{time.strftime('%Y%m%dT%H%M%SZ', started)}.json"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"figures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
