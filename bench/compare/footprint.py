"""Start-up time and memory, and many partitions on one broker."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.compare.common import MIB, ScenarioResult, create_topics, short_error
from bench.compare.context import Context
from bench.compare.load import rdkafka_load
from bench.compare.targets import Target


def run_startup(ctx: Context) -> ScenarioResult:
    """Start-up time to the first acknowledged produce; RSS idle and under a librdkafka load."""
    r = ScenarioResult("startup", "Start-up time and resident memory")
    repeats = max(1, int(ctx.args.startup_repeats))
    r.notes.append("start-up = broker process start (/proc/PID/stat) -> first produce acknowledged (topic created, "
                   f"1 record, acks=1); median of {repeats} start(s) on an empty data directory")
    r.notes.append("Kafka's StorageTool format (a separate JVM run before the broker) is not counted: see details")
    r.notes.append("RSS: Samsa's process, Kafka's JVM (-Xms512m -Xmx512m); idle = 2 s after the first produce")
    first = r.metric("start-up to first produce", "s", "lower")
    port = r.metric("start-up to port open", "s", "lower")
    idle = r.metric("RSS idle", "MiB", "lower")
    loaded = r.metric("RSS peak under load", "MiB", "lower")
    fds = r.metric("open files idle", "files", "lower")
    for t in ctx.each():
        starts = [(t.first_produce_s, t.spawn_to_port_s, t.prepare_s)]
        for _ in range(repeats - 1):
            try:
                with ctx.fresh(t.name) as f:
                    starts.append((f.first_produce_s, f.spawn_to_port_s, f.prepare_s))
            except Exception as e:
                if t.name == "kafka":
                    raise
                ctx.log(f"  {t.title}: a fresh start failed: {short_error(e)}")
        first.set(t.name, statistics.median(s[0] for s in starts))
        port.set(t.name, statistics.median(s[1] for s in starts))
        idle.set(t.name, t.idle_rss / MIB)
        fds.set(t.name, t.idle_fds)
        details: dict[str, Any] = {"starts": [{"first_produce_s": round(a, 3), "port_open_s": round(b, 3),
                                               "before_process_s": round(c, 3)} for a, b, c in starts],
                                   "idle_rss_mib": round(t.idle_rss / MIB, 1), "idle_open_files": t.idle_fds,
                                   "threads": t.threads()}
        records = max(1000, ctx.records // 4)
        try:
            create_topics(t.bootstrap, {"startup-load": 4})
            out = rdkafka_load(t, "startup-load", records, 1024, 2)
        except Exception as e:
            if t.name == "kafka":
                raise
            loaded.set(t.name, None, f"failed: {short_error(e)}")
            out = {}
        if out:
            loaded.set(t.name, out["peak_rss_mib"])
            details["load"] = {"what": f"{records:,} x 1 KiB, 2 librdkafka producers, 4 partitions", **out}
        r.details[t.name] = details
        ctx.log(f"  {t.title}: first produce {getattr(first, t.name):.2f} s after process start "
                f"(port open {getattr(port, t.name):.2f} s), idle RSS {t.idle_rss / MIB:.0f} MiB, "
                f"{t.idle_fds} open files, "
                f"peak RSS under load {out.get('peak_rss_mib', 0):.0f} MiB")
    return r


def scale_once(t: Target, count: int, prefix: str) -> dict[str, Any]:
    """``count`` partitions (topics of at most 100 partitions): create, full metadata, one record each."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    per_topic = min(100, count)
    topics: dict[str, int] = {}
    left = count
    while left > 0:
        topics[f"{prefix}-{len(topics):04d}"] = min(per_topic, left)
        left -= per_topic
    out: dict[str, Any] = {"partitions": count, "topics": len(topics),
                           "before": {"rss_mib": round(t.rss() / MIB, 1), "open_files": t.fds()}}
    t0 = time.monotonic()
    names = list(topics)
    for i in range(0, len(names), 10):  # CreateTopics requests of at most 10 topics (1,000 partitions)
        create_topics(t.bootstrap, {n: topics[n] for n in names[i:i + 10]}, timeout=300)
    out["create_s"] = round(time.monotonic() - t0, 3)

    admin = AdminClient({"bootstrap.servers": t.bootstrap, "log_level": 2})
    t0 = time.monotonic()
    deadline = t0 + 120
    while True:  # until every partition has a leader in the metadata
        md = admin.list_topics(timeout=120)
        ok = sum(1 for n in topics for p in (md.topics[n].partitions.values() if n in md.topics else ())
                 if p.leader >= 0)
        if ok == count or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out["metadata_s"] = round(time.monotonic() - t0, 3)
    out["metadata_partitions_with_leader"] = ok
    if ok != count:
        raise RuntimeError(f"metadata shows {ok} of {count} partitions with a leader after 120 s")

    p = Producer({"bootstrap.servers": t.bootstrap, "acks": "1", "enable.idempotence": False, "linger.ms": 5,
                  "log_level": 2, "message.timeout.ms": 300000})
    errors: list[str] = []
    delivered = [0]

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            delivered[0] += 1
        else:
            errors.append(str(err))

    t0 = time.monotonic()
    for n, parts in topics.items():
        for i in range(parts):
            while True:
                try:
                    p.produce(n, b"x" * 100, partition=i, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
        p.poll(0)
    p.flush(300)
    out["produce_all_s"] = round(time.monotonic() - t0, 3)
    out["delivered"] = delivered[0]
    if delivered[0] != count:
        raise RuntimeError(f"{delivered[0]} of {count} records delivered; {len(errors)} errors, first {errors[:1]}")
    time.sleep(1.0)
    out["after"] = {"rss_mib": round(t.rss() / MIB, 1), "open_files": t.fds(), "threads": t.threads()}
    return out


def run_scale(ctx: Context) -> ScenarioResult:
    counts = [int(x) for x in str(ctx.args.scale).split(",") if x.strip()]
    fresh = not ctx.smoke and not ctx.args.scale_shared
    r = ScenarioResult("scale", f"Scale: {' and '.join(f'{c:,}' for c in counts)} partitions on one broker")
    r.notes.append("topics of at most 100 partitions, RF 1; create -> every partition has a leader in a full "
                   "Metadata -> one 100 B record produced to every partition (acks=1) -> RSS and open files "
                   "(/proc/PID/fd) one second later; "
                   + ("a freshly started broker per count" if fresh else "on the shared brokers"))
    for count in counts:
        ms = {
            "create_s": r.metric(f"{count:,} partitions: create", "s", "lower"),
            "metadata_s": r.metric(f"{count:,} partitions: metadata", "s", "lower"),
            "produce_all_s": r.metric(f"{count:,} partitions: produce to all", "s", "lower"),
            "rss_mib": r.metric(f"{count:,} partitions: RSS", "MiB", "lower"),
            "open_files": r.metric(f"{count:,} partitions: open files", "files", "lower"),
        }
        for name in ("kafka", "samsa"):
            try:
                if fresh:
                    with ctx.fresh(name) as t:
                        out = scale_once(t, count, f"scale{count}")
                else:
                    t = ctx.targets[name]
                    t.check_alive()
                    out = scale_once(t, count, f"scale{count}")
            except Exception as e:
                if name == "kafka":
                    raise
                for m in ms.values():
                    m.set(name, None, f"failed: {short_error(e)}")
                ctx.log(f"  Samsa {count:,} partitions: FAILED {short_error(e)}")
                continue
            for key, m in ms.items():
                m.set(name, out["after"][key] if key in out["after"] else out[key])
            r.details[f"{name} {count}"] = out
            ctx.log(f"  {name.title()} {count:,} partitions: create {out['create_s']:.1f} s, metadata "
                    f"{out['metadata_s']:.2f} s, produce to all {out['produce_all_s']:.2f} s, RSS "
                    f"{out['after']['rss_mib']:.0f} MiB, {out['after']['open_files']} open files")
    return r
