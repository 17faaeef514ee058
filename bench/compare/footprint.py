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


def _produce_to_all(bootstrap: str, topics: dict[str, int], timeout: float) -> tuple[float, int, list[str]]:
    """One 100 B record to every partition with a new producer; (seconds, delivered, errors)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "enable.idempotence": False, "linger.ms": 5,
                  "log_level": 2, "message.timeout.ms": int(timeout * 1000)})
    p.list_topics(timeout=60)
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
    p.flush(timeout)
    return time.monotonic() - t0, delivered[0], errors


def scale_once(t: Target, count: int, prefix: str) -> dict[str, Any]:
    """``count`` partitions (topics of at most 100 partitions): create; wait until the metadata shows a leader
    for every partition; time one full Metadata; one record to every partition, twice (the first time pays
    for whatever a broker does on a partition's first write); RSS and open files.

    Measured failures (not ready in time, records not delivered) are returned in ``status``, not raised."""
    from confluent_kafka.admin import AdminClient

    per_topic = min(100, count)
    topics: dict[str, int] = {}
    left = count
    while left > 0:
        topics[f"{prefix}-{len(topics):04d}"] = min(per_topic, left)
        left -= per_topic
    limit = max(120.0, count * 0.05)
    out: dict[str, Any] = {"partitions": count, "topics": len(topics), "status": {},
                           "before": {"rss_mib": round(t.rss() / MIB, 1), "open_files": t.fds()}}
    t0 = time.monotonic()
    names = list(topics)
    for i in range(0, len(names), 10):  # CreateTopics requests of at most 10 topics (1,000 partitions)
        create_topics(t.bootstrap, {n: topics[n] for n in names[i:i + 10]}, timeout=limit)
    out["create_s"] = round(time.monotonic() - t0, 3)

    admin = AdminClient({"bootstrap.servers": t.bootstrap, "log_level": 2})
    t0 = time.monotonic()
    while True:  # until every partition has a leader in the metadata
        md = admin.list_topics(timeout=120)
        ok = sum(1 for n in topics for p in (md.topics[n].partitions.values() if n in md.topics else ())
                 if p.leader >= 0)
        if ok == count or time.monotonic() - t0 > limit:
            break
        time.sleep(0.5)
    out["partitions_with_leader"] = ok
    if ok != count:
        out["status"]["ready_s"] = f"timeout: {ok} of {count} partitions had a leader after {limit:.0f} s"
    else:
        out["ready_s"] = round(time.monotonic() - t0, 3)
    t1 = time.monotonic()
    md = admin.list_topics(timeout=120)
    out["metadata_s"] = round(time.monotonic() - t1, 3)
    out["metadata_partitions"] = sum(len(md.topics[n].partitions) for n in topics if n in md.topics)

    if ok == count:
        for key in ("produce_first_s", "produce_again_s"):
            seconds, delivered, errors = _produce_to_all(t.bootstrap, topics, limit)
            out[key.replace("_s", "_delivered")] = delivered
            if delivered == count:
                out[key] = round(seconds, 3)
            else:
                out["status"][key] = f"failed: {delivered} of {count} delivered, {len(errors)} errors {errors[:1]}"
                break
    time.sleep(1.0)
    out["rss_mib"] = round(t.rss() / MIB, 1)
    out["open_files"] = t.fds()
    out["threads"] = t.threads()
    return out


def run_scale(ctx: Context) -> ScenarioResult:
    counts = [int(x) for x in str(ctx.args.scale).split(",") if x.strip()]
    fresh = not ctx.smoke and not ctx.args.scale_shared
    r = ScenarioResult("scale", f"Scale: {' and '.join(f'{c:,}' for c in counts)} partitions on one broker")
    r.notes.append("topics of at most 100 partitions, RF 1, created 10 topics per CreateTopics request")
    r.notes.append("ready = until a full Metadata shows a leader for every partition; metadata = one full "
                   "Metadata request after that")
    r.notes.append("produce = one 100 B record to every partition (acks=1, new producer), first and second time")
    r.notes.append("RSS and open files (/proc/PID/fd) one second later; "
                   + ("a freshly started broker per count" if fresh else "on the shared brokers"))
    for count in counts:
        ms = {
            "create_s": r.metric(f"{count:,} partitions: create", "s", "lower"),
            "ready_s": r.metric(f"{count:,} partitions: ready", "s", "lower"),
            "metadata_s": r.metric(f"{count:,} partitions: metadata", "s", "lower"),
            "produce_first_s": r.metric(f"{count:,} partitions: produce, first", "s", "lower"),
            "produce_again_s": r.metric(f"{count:,} partitions: produce, again", "s", "lower"),
            "rss_mib": r.metric(f"{count:,} partitions: RSS", "MiB", "lower"),
            "open_files": r.metric(f"{count:,} partitions: open files", "files", "lower"),
        }
        for name in ("kafka", "samsa"):
            try:
                if fresh:
                    with ctx.fresh(name) as t:
                        out = scale_once(t, count, f"scale{count}")
                else:
                    t = ctx.target(name)
                    t.check_alive()
                    out = scale_once(t, count, f"scale{count}")
            except Exception as e:
                for m in ms.values():
                    m.set(name, None, f"failed: {short_error(e)}")
                ctx.log(f"  {name.title()} {count:,} partitions: FAILED {short_error(e)}")
                r.details[f"{name} {count}"] = {"error": short_error(e, 2000)}
                continue
            for key, m in ms.items():
                m.set(name, out.get(key), out["status"].get(key, "ok"))
            r.details[f"{name} {count}"] = out
            ctx.log(f"  {name.title()} {count:,} partitions: " + ", ".join(
                f"{key} {out[key]}" if key in out else f"{key} {out['status'].get(key, '-')}" for key in ms))
    return r
