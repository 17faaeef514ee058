"""The log cleaner, Samsa vs the reference Apache Kafka in one run (issue 16): throughput, memory, a producer's latency.

Per broker (`samsa serve` and Kafka from compat-tests/oracle, one node each, the same cleaner settings:
log.cleaner.backoff.ms=200 so that neither waits 15 s before it looks, everything else default -- one
cleaner thread, a 128 MiB dedupe buffer, no I/O throttle):

1. load: --mib of records (--value-bytes values, keys cycling over --keys, uncompressed 1 MiB batches,
   acks=1) into a one-partition topic created with cleanup.policy=delete (nothing is cleaned while loading),
   segment.bytes=--segment-mib, retention off;
2. quiet: a second client produces one small record (acks=1, to another topic) every 10 ms for --quiet-s
   seconds, each round trip timed -- the baseline;
3. cleaning: the topic is switched to cleanup.policy=compact with min.cleanable.dirty.ratio=0.01 and
   segment.ms=1000 (IncrementalAlterConfigs, dynamic on both), and after 1.1 s one more record rolls the
   active segment, which makes everything before it cleanable; the same producer keeps going. The cleaning
   is done when the broker's cleaner-offset-checkpoint (the same file on both) names the topic at the roll
   record's offset.

Figures: the partition's segment bytes on disk before and after (the *.log files, so files renamed
.deleted are not counted); cleaning time as each broker reports it, summed over the topic's cleanings from the
config switch to the checkpoint (the closed segments may be cleaned before the roll, the rest after it): Samsa's
"log cleaner: cleaned" INFO line, Kafka's log-cleaner.log from "Beginning cleaning of log" to its stats block
(log4j timestamps; its printed seconds have one decimal); throughput = bytes before / that time in MB/s (the
wait from the roll to the checkpoint, backoff and polling included, is kept as roll_to_checkpoint_s); the
broker's peak RSS while cleaning vs just before, and the concurrent producer's p50 / p99 / max quiet vs
cleaning (from the config switch to the checkpoint). Written to
bench/results/cleaner-<UTC>.json (not with --smoke).

    .venv/bin/python -m bench.cleaner [--mib 256] [--keys 100000] [--value-bytes 1000] [--rounds 1] [--no-kafka]
                                      [--smoke]

`--off-loop` measures instead where the cleaning's heavy part should run (issue 16: "a thread or a process"),
without brokers: the same data set as a log on disk, one cleaning pass (transaction scan, offset map, recopy
into .cleaned files, no swap) run from an asyncio event loop in a worker thread with the Python walks, in a
worker thread with the native walks, and in a warmed-up worker process (spawn) with the native walks, each on
a fresh copy of the log; an event-loop ticker (sleep 1 ms, lateness recorded) gives the loop's lag p50 / p99 /
max quiet and during each cleaning, and the wall time of each.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import multiprocessing
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.compare.targets import Sampler, rss_bytes
from bench.machine import describe
from samsa.broker.client import Connection
from samsa.broker.launcher import ServeOptions, free_port, start_serve
from samsa.kproto.records import encode_batch
from samsa.storage import Log, LogConfig
from samsa.storage.cleaner import Cleaner
from samsa.storage.cleaner_manager import cleanable_range

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "compat-tests"))
TOPIC = "cleaner-bench"
OTHER = "cleaner-bench-producer"
BATCH_BYTES = 1 << 20  # under both brokers' default message.max.bytes
CLEANER_SETTINGS = {"log.cleaner.backoff.ms": "200"}
PRODUCE_INTERVAL_S = 0.01
CLEAN_TIMEOUT_S = 1800.0


@dataclass
class Broker:
    name: str
    host: str
    port: int
    pid: int
    data_dir: Path
    log_file: Path  # where the broker reports each cleaning (Samsa's broker log, Kafka's log-cleaner.log)


# Samsa's one INFO line per cleaning (broker/log_cleaner.py), timed with time.monotonic() from the plan's start
# to the last swap, ms resolution.
_SAMSA_REPORT = re.compile(rb"log cleaner: cleaned (\S+)-(\d+) up to offset \d+ .*? in ([0-9.]+) s: "
                           rb"(\d+) segment\(s\), (\d+) -> (\d+) bytes")
# Kafka's Cleaner logs "Beginning cleaning of log T-P" as doClean starts and its cleaner thread logs the
# stats block ("Log cleaner thread N cleaned log T-P ...", "X MB of log processed in Y seconds") as clean()
# returns, before the checkpoint; Y has one decimal, so the time is taken from the two lines' log4j
# timestamps (ms), which bracket the same span.
_KAFKA_LINE = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ", re.M)


def reported_cleanings(b: Broker, topic: str) -> list[dict[str, float]]:
    """Each cleaning of `topic`-0 the broker reported, in order: {"seconds", "bytes_read"?}."""
    data = b.log_file.read_bytes()
    if b.name == "samsa":
        return [{"seconds": float(m.group(3)), "bytes_read": int(m.group(5))}
                for m in _SAMSA_REPORT.finditer(data) if m.group(1).decode() == topic and m.group(2) == b"0"]
    out: list[dict[str, float]] = []
    began: float | None = None
    starts = list(_KAFKA_LINE.finditer(data))
    for i, m in enumerate(starts):
        entry = data[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(data)]
        at = time.mktime(time.strptime(m.group(1)[:19].decode(), "%Y-%m-%d %H:%M:%S")) + int(m.group(1)[20:]) / 1000
        if f"Beginning cleaning of log {topic}-0 ".encode() in entry:
            began = at
        elif began is not None and f"cleaned log {topic}-0 ".encode() in entry:
            processed = re.search(rb"([0-9,.]+) MB of log processed in ([0-9,.]+) seconds", entry)
            out.append({"seconds": round(at - began, 3), "bytes_read": float(processed.group(1).replace(b",", b""))
                        * 2**20 if processed else 0.0,
                        "kafka_printed_seconds": float(processed.group(2).replace(b",", b"")) if processed else -1.0})
            began = None
    return out


@contextmanager
def samsa_broker() -> Iterator[Broker]:
    with tempfile.TemporaryDirectory(prefix="cleaner-bench-") as work:
        port = free_port()
        data = Path(work) / "data"
        process = start_serve(ServeOptions(data_dir=data, port=port, log_level="INFO",
                                           overrides=tuple(f"{k}={v}" for k, v in CLEANER_SETTINGS.items())),
                              Path(work) / "samsa.log")
        try:
            process.wait_listening(60)
            yield Broker("samsa", "127.0.0.1", port, process.popen.pid, data, Path(work) / "samsa.log")
        finally:
            process.stop()


@contextmanager
def kafka_broker() -> Iterator[Broker]:
    import oracle_fixture

    overrides: dict[str, str | None] = dict(CLEANER_SETTINGS)
    cluster = oracle_fixture.start_kafka(1, heap="1g", overrides=overrides)
    try:
        host, _, port = cluster.bootstrap.rpartition(":")
        pid = cluster.pids[0]
        yield Broker("kafka", host, int(port), pid, cluster.nodes[0].data_dir,
                     cluster.nodes[0].log_dir / "log-cleaner.log")
    finally:
        cluster.stop()


def _produce(conn: Connection, topic: str, records: bytes) -> Any:
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 30_000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]},
                     version=9)
    return r.responses[0].partition_responses[0]


def _create(conn: Connection, name: str, configs: dict[str, str]) -> None:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                                      "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                          "timeout": 30_000, "validate_only": False}, version=5)
    assert r.topics[0].error_code.value == 0, r.topics[0]
    probe = encode_batch([(b"probe", b"probe", ())], timestamp_ms=int(time.time() * 1000))
    deadline = time.monotonic() + 60
    while _produce(conn, name, probe).error_code.value != 0:  # Kafka's leader may need a moment
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: no leader after 60 s")
        time.sleep(0.1)


def _alter(conn: Connection, name: str, configs: dict[str, str]) -> None:
    r = conn.request(44, {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
        {"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}], "validate_only": False},
        version=1)
    assert r.responses[0].error_code.value == 0, r.responses[0]


def _segment_bytes(b: Broker) -> int:
    return sum(p.stat().st_size for p in (b.data_dir / f"{TOPIC}-0").glob("*.log"))


def _checkpointed(b: Broker) -> int:
    """The topic's offset in cleaner-offset-checkpoint (Kafka's format on both: version, count, lines)."""
    try:
        lines = (b.data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    except OSError:
        return -1
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == TOPIC and parts[1] == "0":
            return int(parts[2])
    return -1


def _load(conn: Connection, total_bytes: int, keys: int, value_bytes: int) -> tuple[int, int]:
    """Batches of ~1 MiB until `total_bytes` of records are written; returns (records, batches)."""
    per_batch = max(1, BATCH_BYTES // (value_bytes + 40))
    value = os.urandom(value_bytes)  # the same bytes in every record: the cleaner does not look at values
    written = batches = 0
    while written * (value_bytes + 20) < total_bytes:
        recs = [(b"key-%08d" % ((written + i) % keys), value, ()) for i in range(per_batch)]
        p = _produce(conn, TOPIC, encode_batch(recs, timestamp_ms=int(time.time() * 1000)))
        assert p.error_code.value == 0, p
        written += per_batch
        batches += 1
    return written, batches


class Pinger:
    """One small acks=1 produce every PRODUCE_INTERVAL_S on its own connection, each round trip timed."""

    def __init__(self, b: Broker) -> None:
        self.conn = Connection(b.host, b.port, timeout_s=120)
        self.samples: list[tuple[float, float]] = []  # (monotonic start, round trip ms)
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = encode_batch([(b"k", b"v" * 100, ())], timestamp_ms=int(time.time() * 1000))
            t0 = time.monotonic()
            if _produce(self.conn, OTHER, batch).error_code.value != 0:
                self.errors += 1
            self.samples.append((t0, (time.monotonic() - t0) * 1000))
            self._stop.wait(PRODUCE_INTERVAL_S)

    def between(self, t0: float, t1: float) -> dict[str, float]:
        s = sorted(ms for at, ms in self.samples if t0 <= at < t1)
        if not s:
            return {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
        return {"count": len(s), "p50_ms": round(s[len(s) // 2], 2), "p99_ms": round(s[int(0.99 * (len(s) - 1))], 2),
                "max_ms": round(s[-1], 2)}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.conn.close()


def run(b: Broker, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"broker": b.name}
    with Connection(b.host, b.port, timeout_s=120) as conn:
        _create(conn, TOPIC, {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
                              "segment.bytes": str(args.segment_mib << 20)})
        _create(conn, OTHER, {})
        t = time.monotonic()
        records, batches = _load(conn, args.mib << 20, args.keys, args.value_bytes)
        out["load"] = {"records": records, "batches": batches, "seconds": round(time.monotonic() - t, 2)}
        sampler = Sampler(b.pid, interval=0.1)
        pinger = Pinger(b)
        try:
            quiet_start = time.monotonic()
            time.sleep(args.quiet_s)
            quiet_end = time.monotonic()
            rss_before = rss_bytes(b.pid)
            before = _segment_bytes(b)
            switched = time.monotonic()
            _alter(conn, TOPIC, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                 "min.compaction.lag.ms": "0", "segment.ms": "1000"})
            time.sleep(1.1)  # past segment.ms: the next append rolls the loaded data out of the active segment
            roll = _produce(conn, TOPIC, encode_batch([(b"roll", b"roll", ())], timestamp_ms=int(time.time() * 1000)))
            assert roll.error_code.value == 0, roll
            clean_start = time.monotonic()  # from now on the loaded data is cleanable
            while _checkpointed(b) < roll.base_offset:
                if time.monotonic() - clean_start > CLEAN_TIMEOUT_S:
                    raise RuntimeError(f"{b.name}: not cleaned within {CLEAN_TIMEOUT_S} s")
                time.sleep(0.05)
            clean_end = time.monotonic()
            time.sleep(0.5)  # the old files are renamed .deleted (not counted) as the swap ends
            after = _segment_bytes(b)
        finally:
            pinger.stop()
            sampler.stop()
        seconds = clean_end - clean_start
        reports = reported_cleanings(b, TOPIC)
        if not reports:
            raise RuntimeError(f"{b.name}: no cleaning of {TOPIC}-0 reported in {b.log_file}")
        reported = sum(r["seconds"] for r in reports)
        out["cleaning"] = {
            "segment_bytes_before": before, "segment_bytes_after": after,
            "seconds": round(reported, 3), "cleanings": reports, "roll_to_checkpoint_s": round(seconds, 3),
            "mb_per_s": round(before / 1e6 / reported, 2),
            "rss_before_mib": round(rss_before / 2**20, 1),
            "peak_rss_cleaning_mib": round(sampler.peak_rss_since(switched) / 2**20, 1)}
        out["producer"] = {"quiet": pinger.between(quiet_start, quiet_end),
                           "cleaning": pinger.between(switched, clean_end), "errors": pinger.errors}
    return out


def _print(r: dict[str, Any]) -> None:
    c, p = r["cleaning"], r["producer"]
    print(f"{r['broker']:5} cleaned {c['segment_bytes_before'] / 1e6:.1f} -> {c['segment_bytes_after'] / 1e6:.2f} MB "
          f"in {c['seconds']} s = {c['mb_per_s']} MB/s; RSS {c['rss_before_mib']} MiB before, "
          f"peak {c['peak_rss_cleaning_mib']} MiB cleaning; producer p50/p99/max quiet "
          f"{p['quiet']['p50_ms']}/{p['quiet']['p99_ms']}/{p['quiet']['max_ms']} ms (n={p['quiet']['count']}), "
          f"cleaning {p['cleaning']['p50_ms']}/{p['cleaning']['p99_ms']}/{p['cleaning']['max_ms']} ms "
          f"(n={p['cleaning']['count']}), {p['errors']} errors", flush=True)


def _write_log(directory: Path, args: argparse.Namespace) -> LogConfig:
    """The data set of `_load`, appended straight to a Log (no broker), everything but the last segment closed."""
    config = LogConfig(segment_bytes=args.segment_mib << 20, retention_ms=-1, cleanup_policy="compact",
                       file_delete_delay_ms=0)
    now = int(time.time() * 1000)
    log = Log.open(directory, config, now_ms=now)
    per_batch = max(1, BATCH_BYTES // (args.value_bytes + 40))
    value = os.urandom(args.value_bytes)
    written = 0
    while written * (args.value_bytes + 20) < args.mib << 20:
        recs = [(b"key-%08d" % ((written + i) % args.keys), value, ()) for i in range(per_batch)]
        log.append_as_leader(encode_batch(recs, timestamp_ms=now), leader_epoch=0, now_ms=now)
        written += per_batch
    log.roll(now)
    log.close()
    return config


def _clean_pass(directory: str, config: LogConfig, native: bool) -> float:
    """One cleaning of the log at `directory` up to its active segment, without the swap; its seconds."""
    t = time.monotonic()
    now = int(time.time() * 1000)
    log = Log.open(Path(directory), config, now_ms=now)
    log.update_high_watermark(log.log_end_offset)
    try:
        r = cleanable_range(log, None, now)
        cleaner = Cleaner(128 << 20, native=native)
        p = cleaner.begin(log, r.first_dirty_offset, r.first_uncleanable_offset, now)
        cleaner.plan(p)
        for group in p.groups:
            cleaner.clean_group(p, group).discard()
    finally:
        log.close()
    return time.monotonic() - t


def _warm() -> bool:
    return Cleaner is not None  # the worker process has imported the cleaner


async def _lag_during(work: Callable[[], Awaitable[float]]) -> tuple[dict[str, float], dict[str, float], float]:
    """The loop's lag (ms) quiet for 1 s, then while `work` runs; and the work's own seconds."""
    lags: list[tuple[float, float]] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            t = time.monotonic()
            await asyncio.sleep(0.001)
            lags.append((t, (time.monotonic() - t - 0.001) * 1000))

    task = asyncio.create_task(ticker())
    await asyncio.sleep(1.0)
    start = time.monotonic()
    t0 = time.monotonic()
    seconds = await work()
    wall = time.monotonic() - t0
    stop.set()
    await task

    def stats(sel: list[float]) -> dict[str, float]:
        s = sorted(sel) or [0.0]
        return {"count": len(sel), "p50_ms": round(s[len(s) // 2], 2), "p99_ms": round(s[int(0.99 * (len(s) - 1))], 2),
                "max_ms": round(s[-1], 2)}

    return (stats([ms for at, ms in lags if at < start]), stats([ms for at, ms in lags if at >= start]),
            round(max(wall, seconds), 3))


def off_loop(args: argparse.Namespace) -> dict[str, Any]:
    """Thread (Python walks), thread (native walks), process (native walks): the loop's lag and the time."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cleaner-offloop-") as work, \
            concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        source = Path(work) / "source" / f"{TOPIC}-0"
        config = _write_log(source, args)
        assert pool.submit(_warm).result(60)
        for name, native, executor in (("thread-python", False, None), ("thread-native", True, None),
                                       ("process-native", True, pool)):
            copy = Path(work) / name / f"{TOPIC}-0"
            shutil.copytree(source, copy)

            async def run(copy: Path = copy, native: bool = native,
                          executor: concurrent.futures.Executor | None = executor) -> float:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(executor, _clean_pass, str(copy), config, native)

            quiet, busy, seconds = asyncio.run(_lag_during(run))
            mb = sum(p.stat().st_size for p in source.glob("*.log")) / 1e6
            out[name] = {"seconds": seconds, "mb_per_s": round(mb / seconds, 1), "loop_lag_quiet": quiet,
                         "loop_lag_cleaning": busy}
            print(f"{name:14} {seconds:.3f} s = {mb / seconds:.0f} MB/s; loop lag p50/p99/max quiet "
                  f"{quiet['p50_ms']}/{quiet['p99_ms']}/{quiet['max_ms']} ms, cleaning "
                  f"{busy['p50_ms']}/{busy['p99_ms']}/{busy['max_ms']} ms", flush=True)
            shutil.rmtree(copy)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256, help="data set size in MiB")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys")
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--segment-mib", type=int, default=32, help="segment.bytes in MiB (at least 1)")
    parser.add_argument("--quiet-s", type=float, default=10.0, help="producer baseline before the cleaning")
    parser.add_argument("--smoke", action="store_true", help="16 MiB, 10,000 keys, 1 MiB segments, no JSON")
    parser.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka baseline")
    parser.add_argument("--rounds", type=int, default=1,
                        help="Samsa and Kafka this many times, alternating which goes first; median ratio")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    parser.add_argument("--off-loop", action="store_true", help="thread vs process, no brokers (see above)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.mib, args.keys, args.segment_mib, args.quiet_s = 16, 10_000, 1, 3.0
    machine = describe()
    print(machine, flush=True)
    settings = {k: getattr(args, k) for k in ("mib", "keys", "value_bytes", "segment_mib", "quiet_s")}
    print(f"settings: {settings}, broker {CLEANER_SETTINGS}", flush=True)
    result: dict[str, Any] = {"machine": machine, "settings": settings, "broker_settings": CLEANER_SETTINGS}
    if args.off_loop:
        result["off_loop"] = off_loop(args)
        if not args.smoke:
            RESULTS.mkdir(parents=True, exist_ok=True)
            out = RESULTS / f"cleaner-offloop-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
            out.write_text(json.dumps(result, indent=2) + "\n")
            print(f"wrote {out}")
        return 0
    brokers = {"samsa": samsa_broker} | ({} if args.no_kafka else {"kafka": kafka_broker})
    rounds: list[dict[str, Any]] = []
    for i in range(args.rounds):
        # alternate which broker goes first, so a change in the machine's load between the two halves of a
        # round favours each in turn
        order = list(brokers.items()) if i % 2 == 0 else list(reversed(brokers.items()))
        this: dict[str, Any] = {}
        for name, start in order:
            with start() as b:
                this[name] = run(b, args)
                _print(this[name])
        if "kafka" in this:
            s, k = this["samsa"], this["kafka"]
            this["samsa_vs_kafka"] = {
                "throughput_ratio": round(s["cleaning"]["mb_per_s"] / max(k["cleaning"]["mb_per_s"], 1e-9), 2),
                "p99_cleaning_over_quiet": {n: round(r["producer"]["cleaning"]["p99_ms"]
                                                     / max(r["producer"]["quiet"]["p99_ms"], 1e-9), 2)
                                            for n, r in (("samsa", s), ("kafka", k))}}
            print(f"round {i + 1}: samsa/kafka cleaner throughput {this['samsa_vs_kafka']['throughput_ratio']}; "
                  f"producer p99 cleaning/quiet {this['samsa_vs_kafka']['p99_cleaning_over_quiet']}", flush=True)
        rounds.append(this)
    result.update(rounds[-1])
    if args.rounds > 1:
        result["rounds"] = rounds
        if "kafka" in result:
            ratios = sorted(r["samsa_vs_kafka"]["throughput_ratio"] for r in rounds)
            p99_met = sum(r["samsa_vs_kafka"]["p99_cleaning_over_quiet"]["samsa"]
                          <= r["samsa_vs_kafka"]["p99_cleaning_over_quiet"]["kafka"] for r in rounds)
            p99_median = {n: statistics.median(r["samsa_vs_kafka"]["p99_cleaning_over_quiet"][n] for r in rounds)
                          for n in ("samsa", "kafka")}
            result["summary"] = {"throughput_ratios": ratios, "median_throughput_ratio": statistics.median(ratios),
                                 "rounds_p99_ratio_no_worse": p99_met, "median_p99_cleaning_over_quiet": p99_median}
            print(f"{args.rounds} rounds: samsa/kafka cleaner throughput {ratios} (median "
                  f"{statistics.median(ratios)}); producer p99 ratio no worse than Kafka's in {p99_met} of "
                  f"{args.rounds}, median p99 cleaning/quiet {p99_median}", flush=True)
    if args.json:
        print(json.dumps(result), flush=True)
    if not args.smoke:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"cleaner-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
