"""librdkafka (confluent-kafka) load: many producer processes into a multi-partition topic, and end-to-end
latency at a fixed rate with an assign-mode consumer (no consumer group)."""

from __future__ import annotations

from typing import Any

from bench.compare.common import MIB, ScenarioResult, create_topics, delete_topics, percentiles, short_error
from bench.compare.context import Context
from bench.compare.targets import Target, Window
from bench.compare.workers import run_workers


def rdkafka_load(t: Target, topic: str, records: int, size: int, producers: int) -> dict[str, Any]:
    per = [records // producers + (1 if i < records % producers else 0) for i in range(producers)]
    specs = [("produce", {"bootstrap": t.bootstrap, "topic": topic, "records": n, "size": size, "acks": "1"})
             for n in per]
    with Window(t) as w:
        results = run_workers(specs, timeout=120 + records * size / 1e6)  # >= 1 MB/s, else it is broken
    bad = [r for r in results if r["errors"] or r["undelivered"]]
    if bad:
        raise RuntimeError(f"{sum(r['errors'] for r in bad)} delivery errors, {sum(r['undelivered'] for r in bad)} "
                           f"undelivered; first: {bad[0]['first_error']}")
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    out = {"records": records, "seconds": round(elapsed, 3), "records_per_s": records / elapsed,
           "mib_per_s": records * size / elapsed / MIB}
    out.update(w.as_dict())
    return out


def run_rdkafka(ctx: Context) -> ScenarioResult:
    a = ctx.args
    r = ScenarioResult("rdkafka", f"librdkafka producers: {a.producers} processes, {a.partitions} partitions")
    r.notes.append(f"confluent-kafka {_version()}, acks=1, no compression, librdkafka defaults otherwise "
                   "(linger.ms 5, batch.size 1 MB); records without keys (sticky partitioner)")
    for size, records in ((100, ctx.records), (10240, max(1, ctx.records // 10))):
        label = "100 B" if size == 100 else "10 KiB"
        r.notes.append(f"{label}: {records:,} records")
        rate = r.metric(f"{label} records", "records/s", "higher")
        mib = r.metric(f"{label} records", "MiB/s", "higher")
        topic = f"rd-{size}"
        for t in ctx.each():
            try:
                create_topics(t.bootstrap, {topic: a.partitions})
                out = rdkafka_load(t, topic, records, size, a.producers)
            except Exception as e:
                if t.name == "kafka":
                    raise
                rate.set(t.name, None, f"failed: {short_error(e)}")
                mib.set(t.name, None, f"failed: {short_error(e)}")
                ctx.log(f"  {t.title} {label}: FAILED {short_error(e)}")
                continue
            finally:
                if not ctx.smoke:
                    delete_topics(t.bootstrap, [topic])
            rate.set(t.name, out["records_per_s"])
            mib.set(t.name, out["mib_per_s"])
            r.details[f"{t.name} {label}"] = out
            ctx.log(f"  {t.title} {label}: {out['records_per_s']:,.0f} records/s, {out['mib_per_s']:.1f} MiB/s, "
                    f"broker {out['broker_cores']:.2f} cores, peak RSS {out['peak_rss_mib']:.0f} MiB")
    return r


def e2e(t: Target, topic: str, rate: int, seconds: float, size: int) -> dict[str, Any]:
    n = int(rate * seconds)
    common = {"bootstrap": t.bootstrap, "topic": topic}
    with Window(t) as w:
        cons, prod = run_workers([
            ("e2e-consume", {**common, "expect": n, "timeout": seconds + 60}),
            ("e2e-produce", {**common, "rate": rate, "seconds": seconds, "size": size, "acks": "1"}),
        ], timeout=seconds + 90)
    if prod["errors"] or prod["undelivered"]:
        raise RuntimeError(f"{prod['errors']} delivery errors, {prod['undelivered']} undelivered: "
                           f"{prod['first_error']}")
    lat = cons["latencies_ms"]
    if len(lat) < n:
        raise RuntimeError(f"the consumer saw {len(lat)} of {n} records")
    warm = min(rate, n // 10)  # the first second (at most 10%) is connection set-up: not counted
    out: dict[str, Any] = {"records": n, "counted": n - warm, "late_sends": prod["late_sends"],
                           **{f"{k}_ms": round(v, 3) for k, v in percentiles(lat[warm:]).items()}}
    out.update(w.as_dict())
    return out


def run_e2e(ctx: Context) -> ScenarioResult:
    a = ctx.args
    r = ScenarioResult("e2e", f"End-to-end latency, {a.e2e_rate:,} records/s of 1 KiB for {a.e2e_seconds:g} s")
    r.notes.append("produce (confluent-kafka, acks=1, linger.ms=0, 1 partition) -> an assign-mode consumer "
                   "(librdkafka defaults: fetch.wait.max.ms 500, fetch.min.bytes 1) sees it; the send time travels "
                   "in the record; the first second is warm-up and not counted")
    ms = {p: r.metric(f"end-to-end {p}", "ms", "lower") for p in ("p50", "p99", "p99.9", "max")}
    for t in ctx.each():
        topic = "e2e"
        try:
            create_topics(t.bootstrap, {topic: 1})
            out = e2e(t, topic, a.e2e_rate, a.e2e_seconds, 1024)
        except Exception as e:
            if t.name == "kafka":
                raise
            for m in ms.values():
                m.set(t.name, None, f"failed: {short_error(e)}")
            ctx.log(f"  {t.title}: FAILED {short_error(e)}")
            continue
        for p, m in ms.items():
            m.set(t.name, out[f"{p}_ms"])
        r.details[t.name] = out
        ctx.log(f"  {t.title}: p50 {out['p50_ms']:.2f} ms, p99 {out['p99_ms']:.2f} ms, "
                f"p99.9 {out['p99.9_ms']:.2f} ms, max {out['max_ms']:.2f} ms ({out['late_sends']} sends late >10 ms)")
    return r


def _version() -> str:
    try:
        import confluent_kafka

        return f"{confluent_kafka.version()[0]} / librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        return "?"
