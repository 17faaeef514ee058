"""Kafka's own ProducerPerformance and ConsumerPerformance (the reference kafka-tools jars), against both brokers.

Producer: 1 KiB records into a 1-partition topic (as ``compat-tests/oracle/perf.sh``), acks=1 and
acks=all, unthrottled (``--throughput -1``) -> records/s and MiB/s; then at a fixed rate of 50% of
Kafka's unthrottled rate for the same acks -> p50/p99/p99.9 produce latency, as the tool measures it
(send() to acknowledgement, so time queued in the producer counts). The fixed-rate runs use kafka-tools
4.2.1's ProducerPerformance (bench/perf-tools), the first with ``--warmup-records`` (KIP-1052): it reports
the whole run, as the 4.1 tool does, and apart from it the steady state after the first fifth. The whole
run's tail is the producer JVM's cold start (one run here: p99 195 ms whole, 4 ms steady; the 5-second
progress lines showed all of it in the first window).

Both brokers get ``enable.idempotence=false``: the Java producer turns idempotence on by default with
acks=all, and off it both acks runs measure the same plain producer. Everything else is the Java
client's defaults (batch.size 16384, linger.ms 5 in 4.x).

Every figure is the median of ``--repeats`` runs per broker, with the order alternated between
repetitions, after an unmeasured ``--warmup-records`` run on each broker (JIT warm-up). With one run
each and Kafka always first, acks=1 and acks=all (the same work on one broker) came out 1.12 and 0.88.

Consumer: ConsumerPerformance reads the acks=1 topic from the earliest offset with a new consumer
group (classic protocol; the figure includes the group join), -> records/s and MiB/s, overall and
for the fetch phase only (the tool's ``fetch.nMsg.sec``).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from typing import Any

from bench.compare import targets
from bench.compare.common import MIB, ScenarioResult, create_topics, delete_topics, short_error
from bench.compare.context import Context
from bench.compare.targets import Target, Window

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
RECORD_SIZE = 1024

_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)


# With --warmup-records (4.2+), after the whole run's line: "N steady state records sent, R records/sec ..."
_STEADY = re.compile(
    r"(\d+) steady state records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)
# kafka-tools 4.2.1 (bench/perf-tools, `make bench-deps`): the first ProducerPerformance with warm-up records
PERF_TOOLS_LIB = targets.REPO / "bench" / "perf-tools" / "lib"


def _summary(fields: tuple[str, ...], prefix: str = "") -> dict[str, float]:
    sent, rate, mb, avg, mx, p50, p95, p99, p999 = fields
    return {f"{prefix}records": int(sent), f"{prefix}records_per_s": float(rate), f"{prefix}mib_per_s": float(mb),
            f"{prefix}avg_ms": float(avg), f"{prefix}max_ms": float(mx), f"{prefix}p50_ms": float(p50),
            f"{prefix}p95_ms": float(p95), f"{prefix}p99_ms": float(p99), f"{prefix}p99.9_ms": float(p999)}


def parse_producer(stdout: str) -> dict[str, float]:
    """The tool's final line: ``N records sent, R records/sec (M MB/sec), A ms avg latency, ... 99.9th.``, and
    with warm-up records also its steady-state line, as the same keys prefixed ``steady_``."""
    matches = _FINAL.findall(stdout)
    if not matches:
        raise ValueError(f"no ProducerPerformance summary line in: {stdout[-500:]!r}")
    out = _summary(matches[-1])
    steady = _STEADY.findall(stdout)
    if steady:
        out.update(_summary(steady[-1], "steady_"))
    return out


def parse_consumer(stdout: str) -> dict[str, float]:
    """The tool's CSV line (header ``start.time, end.time, data.consumed.in.MB, MB.sec, ...``)."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.startswith("start.time"):
            keys = [k.strip() for k in line.split(",")]
            if i + 1 >= len(lines):
                break
            vals = [v.strip() for v in lines[i + 1].split(",")]
            row = dict(zip(keys, vals, strict=False))
            return {"records": int(row["data.consumed.in.nMsg"]), "records_per_s": float(row["nMsg.sec"]),
                    "mib_per_s": float(row["MB.sec"]), "rebalance_ms": float(row["rebalance.time.ms"]),
                    "fetch_ms": float(row["fetch.time.ms"]), "fetch_records_per_s": float(row["fetch.nMsg.sec"]),
                    "fetch_mib_per_s": float(row["fetch.MB.sec"])}
    raise ValueError(f"no ConsumerPerformance result line in: {stdout[-500:]!r}")


def tool_timeout(records: int) -> float:
    """Generous: even 2,000 records/s plus two minutes of JVM start on a loaded machine."""
    return 120.0 + records / 2000.0


def producer_perf(t: Target, topic: str, records: int, acks: str, throughput: int = -1,
                  jvm_opts: Sequence[str] = (), warmup_records: int = 0) -> dict[str, Any]:
    """One ProducerPerformance run; with ``warmup_records`` the 4.2.1 tool, which also reports the steady state
    (the records after the first ``warmup_records``) as ``steady_*``."""
    warm = ("--warmup-records", str(warmup_records)) if warmup_records > 0 else ()
    with Window(t) as w:
        res = targets.oracle_fixture.run_kafka_tool(
            PRODUCER, "--topic", topic, "--num-records", str(records), *warm, "--record-size", str(RECORD_SIZE),
            "--throughput", str(throughput), "--producer-props", f"bootstrap.servers={t.bootstrap}",
            f"acks={acks}", "enable.idempotence=false", timeout=tool_timeout(records), jvm_opts=jvm_opts,
            lib_dir=PERF_TOOLS_LIB if warm else None)
    out = parse_producer(res.stdout)
    if warm and "steady_p99_ms" not in out:
        raise RuntimeError(f"ProducerPerformance printed no steady-state line: {res.stdout[-500:]!r}")
    if out["records"] != records:
        raise RuntimeError(f"ProducerPerformance sent {out['records']} of {records}")
    out.update(w.as_dict())
    return out


def consumer_perf(t: Target, topic: str, records: int, jvm_opts: Sequence[str] = ()) -> dict[str, Any]:
    with Window(t) as w:
        res = targets.oracle_fixture.run_kafka_tool(
            CONSUMER, "--bootstrap-server", t.bootstrap, "--topic", topic, "--messages", str(records),
            "--timeout", "60000", timeout=tool_timeout(records), jvm_opts=jvm_opts)
    out = parse_consumer(res.stdout)
    if out["records"] < records:
        raise RuntimeError(f"ConsumerPerformance read {out['records']} of {records} records")
    out.update(w.as_dict())
    return out


def _median(outs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(o[key] for o in outs))


def _measure(ctx: Context, r: ScenarioResult, label: str, records: int, acks: str, throughput: int,
             keep_last: bool = False, warmup_records: int = 0) -> dict[str, list[dict[str, Any]]]:
    """``--repeats`` runs of the tool per broker, the order alternated between repetitions; each run gets a
    fresh topic, deleted afterwards (but for the last one when ``keep_last``). Returns each broker's runs."""
    runs: dict[str, list[dict[str, Any]]] = {}
    failed: set[str] = set()  # Samsa after a failed run: reported once, not run again
    repeats = max(1, int(ctx.args.repeats))
    for rep in range(repeats):
        for t in ctx.each(rep):
            if t.name in failed:
                continue
            topic = f"pp-{label}-{rep}"
            try:
                create_topics(t.bootstrap, {topic: 1})
                out = producer_perf(t, topic, records, acks, throughput=throughput, jvm_opts=ctx.tool_jvm_opts,
                                    warmup_records=warmup_records)
            except Exception as e:
                if t.name == "kafka":
                    raise
                failed.add(t.name)
                r.details[f"{t.name} {label} failed"] = short_error(e)
                ctx.log(f"  {t.title} {label} #{rep + 1}: FAILED {short_error(e)}")
                continue
            out["topic"] = topic
            runs.setdefault(t.name, []).append(out)
            r.details[f"{t.name} {label} #{rep + 1}"] = out
            ctx.log(f"  {t.title} {label} #{rep + 1}/{repeats}: {out['records_per_s']:,.0f} records/s, "
                    f"{out['mib_per_s']:.1f} MiB/s, p50 {out['p50_ms']:.0f} ms, p99 {out['p99_ms']:.0f} ms, "
                    f"p99.9 {out['p99.9_ms']:.0f} ms, broker {out['broker_cores']:.2f} cores, "
                    f"peak RSS {out['peak_rss_mib']:.0f} MiB"
                    + (f"; steady state p50 {out['steady_p50_ms']:.0f} ms, p99 {out['steady_p99_ms']:.0f} ms, "
                       f"p99.9 {out['steady_p99.9_ms']:.0f} ms" if "steady_p99_ms" in out else ""))
            if not (keep_last and rep == repeats - 1):
                delete_topics(t.bootstrap, [topic])  # 1 GiB a run: free the disk (and its writeback) now
    return {name: outs for name, outs in runs.items() if name not in failed}


def run_producer(ctx: Context) -> ScenarioResult:
    r = ScenarioResult("producer_perf", "Kafka ProducerPerformance, 1 KiB records, 1 partition")
    n = ctx.records
    repeats = max(1, int(ctx.args.repeats))
    r.notes.append(f"{n:,} records of {RECORD_SIZE} B per run; enable.idempotence=false on both brokers (the "
                   "same plain producer for acks=1 and acks=all); Java client defaults otherwise")
    r.notes.append(f"each figure is the median of {repeats} run(s) per broker, Kafka first in odd-numbered runs "
                   "and Samsa first in even-numbered ones; a fresh topic per run")
    warm = int(ctx.args.warmup_records)
    if warm > 0:
        # Kafka's JIT is cold in its first runs (its acks=all rate rose 14% from a first run to a second in
        # one of our runs); an unmeasured run on each broker first, so the figures compare warm brokers.
        r.notes.append(f"each broker first took an unmeasured run of {warm:,} records (JIT warm-up)")
        for t in ctx.each():
            create_topics(t.bootstrap, {"pp-warm-up": 1})
            producer_perf(t, "pp-warm-up", warm, "1", jvm_opts=ctx.tool_jvm_opts)
            delete_topics(t.bootstrap, ["pp-warm-up"])
            ctx.log(f"  {t.title}: warm-up run of {warm:,} records done")
    kafka_rate: dict[str, float] = {}
    for acks in ("1", "all"):
        rate = r.metric(f"acks={acks} throughput", "records/s", "higher")
        mib = r.metric(f"acks={acks} throughput", "MiB/s", "higher")
        runs = _measure(ctx, r, f"acks{acks}", n, acks, -1, keep_last=acks == "1")
        for name in ("kafka", "samsa"):
            outs = runs.get(name)
            if not outs:
                rate.set(name, None, "failed: see details")
                mib.set(name, None, "failed: see details")
                continue
            rate.set(name, _median(outs, "records_per_s"))
            mib.set(name, _median(outs, "mib_per_s"))
            if acks == "1":
                ctx.state.setdefault("filled", {})[name] = (outs[-1]["topic"], n)
        kafka_rate[acks] = _median(runs["kafka"], "records_per_s")
    for acks in ("1", "all"):
        target_rate = max(1, int(kafka_rate[acks] * 0.5))
        rn = min(n, max(200, int(target_rate * ctx.args.rate_seconds)))  # bounded in time on a slow machine
        warm = rn // 5
        r.notes.append(f"fixed rate acks={acks}: {target_rate:,} records/s (50% of Kafka's median unthrottled "
                       f"rate), {rn:,} records (at most {ctx.args.rate_seconds:g} s of sending), with Kafka 4.2.1's "
                       f"ProducerPerformance: 'whole run' counts every record, as the 4.1 tool does, so its tail is "
                       f"the producer JVM's cold start; 'steady' leaves out the first {warm:,} (--warmup-records, "
                       f"KIP-1052)")
        ms = {(phase, p): r.metric(f"acks={acks} @{target_rate:,}/s {phase} {p}", "ms", "lower")
              for phase in ("whole run", "steady") for p in ("p50", "p99", "p99.9")}
        achieved = r.metric(f"acks={acks} @{target_rate:,}/s achieved", "records/s", "higher")
        runs = _measure(ctx, r, f"rate-acks{acks}", rn, acks, target_rate, warmup_records=warm)
        for name in ("kafka", "samsa"):
            outs = runs.get(name)
            status = "ok" if outs else "failed: see details"
            for (phase, p), m in ms.items():
                key = f"{'steady_' if phase == 'steady' else ''}{p}_ms"
                m.set(name, _median(outs, key) if outs else None, status)
            # below the target rate: the latencies are queueing
            achieved.set(name, _median(outs, "records_per_s") if outs else None, status)
    return r


def warm_group_coordinator(t: Target, timeout: float = 90.0) -> float:
    """Join a throw-away group once, so that the measured run does not pay for creating ``__consumer_offsets``
    (50 partitions, on first use, in both brokers). Returns the seconds it took."""
    from confluent_kafka import Consumer

    t0 = time.monotonic()
    c = Consumer({"bootstrap.servers": t.bootstrap, "group.id": "bench-warm-up", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "log_level": 2})
    try:
        c.subscribe([targets.PROBE_TOPIC])
        while time.monotonic() - t0 < timeout:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                return time.monotonic() - t0
        raise RuntimeError(f"warm-up consumer group got no record within {timeout}s")
    finally:
        c.close()


GROUP_APIS = {10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 14: "SyncGroup", 8: "OffsetCommit"}


def run_consumer(ctx: Context) -> ScenarioResult:
    r = ScenarioResult("consumer_perf", "Kafka ConsumerPerformance, 1 KiB records, 1 partition")
    n = ctx.records
    r.notes.append(f"{n:,} records of {RECORD_SIZE} B from the earliest offset, a new consumer group per run "
                   "(the overall figure includes joining the group; a throw-away group joined first, so that "
                   "creating __consumer_offsets is not counted)")
    rate = r.metric("overall", "records/s", "higher")
    mib = r.metric("overall", "MiB/s", "higher")
    frate = r.metric("fetch phase", "records/s", "higher")
    rebalance = r.metric("group join", "ms", "lower")
    for t in ctx.each():
        missing = [name for key, name in GROUP_APIS.items() if key not in targets.api_versions(t.bootstrap)]
        if missing:
            for m in r.metrics:
                m.set(t.name, None, "unsupported")
            r.notes.append(f"{t.title}: unsupported (no {', '.join(missing)}: ConsumerPerformance needs groups)")
            ctx.log(f"  {t.title}: unsupported, it does not advertise {', '.join(missing)}")
            continue
        try:
            topic, filled = ctx.state.get("filled", {}).get(t.name, (None, 0))
            if topic is None or filled < n:
                topic = "cp-data"
                create_topics(t.bootstrap, {topic: 1})
                ctx.log(f"  {t.title}: filling {topic} with {n:,} records (ProducerPerformance, acks=1)")
                producer_perf(t, topic, n, "1", jvm_opts=ctx.tool_jvm_opts)
            warm_group_coordinator(t)
            out = consumer_perf(t, topic, n, jvm_opts=ctx.tool_jvm_opts)
        except Exception as e:
            if t.name == "kafka":
                raise
            for m in r.metrics:
                m.set(t.name, None, f"failed: {short_error(e)}")
            ctx.log(f"  {t.title}: FAILED {short_error(e)}")
            continue
        rate.set(t.name, out["records_per_s"])
        mib.set(t.name, out["mib_per_s"])
        frate.set(t.name, out["fetch_records_per_s"])
        rebalance.set(t.name, out["rebalance_ms"])
        r.details[t.name] = out
        ctx.log(f"  {t.title}: {out['records_per_s']:,.0f} records/s ({out['mib_per_s']:.1f} MiB/s) overall, "
                f"{out['fetch_records_per_s']:,.0f} records/s fetching, group join {out['rebalance_ms']:.0f} ms, "
                f"broker {out['broker_cores']:.2f} cores")
    return r


__all__ = ["MIB", "parse_consumer", "parse_producer", "run_consumer", "run_producer"]
