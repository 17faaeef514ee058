"""kcat (Debian's package, librdkafka inside) compat scenario (see scenario_common.py).

Usage: BOOTSTRAP TOPIC. kcat has no admin API: the topic is created with kafka-python's admin
client; everything else is the ``kcat`` binary run as a subprocess (``-L`` metadata, ``-P`` produce,
``-C`` consume by partition assignment, ``-Q`` offsets by timestamp). kcat cannot set a record's
timestamp nor report the offsets of what it produced: timestamps are the producer's clock, and the
partition and offset of each record are learnt by consuming it back (the order checks still hold:
record i of a key must come after record i-5 of the same key, at the next offset of the partition).
"""

from __future__ import annotations

import json
import shutil
import subprocess

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from scenario_common import (
    PARTITIONS,
    Rec,
    check_consumed,
    check_metadata,
    check_offsets,
    check_produced,
    expect,
    plan,
    retry_until,
    run,
    summary,
)

CLIENT = "kcat"
KCAT_CONFIG = ["-X", "enable.idempotence=false", "-X", "socket.timeout.ms=15000"]


def kcat(args: list[str], *, stdin: str | None = None, timeout: float = 30) -> str:
    exe = shutil.which("kcat")
    expect(exe is not None, "kcat is not installed (make compat-deps installs Debian's kcat)")
    res = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=timeout)  # type: ignore[list-item]
    if res.returncode != 0 or "% ERROR" in res.stderr:  # kcat's own errors; not librdkafka's log lines
        raise AssertionError(f"kcat {' '.join(args)} exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    return res.stdout


def scenario(bootstrap: str, topic: str) -> dict[str, object]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-kcat-admin", request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], timeout_ms=15000)
    finally:
        admin.close()

    def describe() -> tuple[dict[int, int], set[int]] | None:
        md = json.loads(kcat(["-L", "-J", "-b", bootstrap, "-t", topic, *KCAT_CONFIG]))
        (t,) = [t for t in md["topics"] if t["topic"] == topic]
        if t.get("error") or len(t["partitions"]) != PARTITIONS:
            return None
        leaders = {p["partition"]: p["leader"] for p in t["partitions"]}
        if min(leaders.values()) < 0:
            return None
        return leaders, {b["id"] for b in md["brokers"]}

    leaders, brokers = retry_until(describe, "topic metadata")  # type: ignore[misc]
    check_metadata(leaders, brokers)

    recs = plan(None)
    lines = "".join(f"{r.key}\t{r.value}\n" for r in recs)
    kcat(["-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "acks=all",
          "-X", "partitioner=murmur2_random", *KCAT_CONFIG], stdin=lines)

    # -C without -G: kcat assigns the partitions itself (no group); -e: exit at the end of all of them
    out = kcat(["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q", *KCAT_CONFIG])
    consumed = []
    for line in out.splitlines():
        m = json.loads(line)
        consumed.append(Rec(i=-1, key=m["key"], value=m["payload"], ts=m["ts"],
                            partition=m["partition"], offset=m["offset"]))
    expect(len(consumed) == len(recs), f"consumed {len(consumed)} records, produced {len(recs)}")
    by_value = {c.value: c for c in consumed}
    for r in recs:
        c = by_value.get(r.value)
        expect(c is not None, f"record {r.value} was not consumed back")
        r.partition, r.offset, r.ts = c.partition, c.offset, c.ts  # type: ignore[union-attr]
    check_produced(recs)
    check_consumed(recs, sorted(consumed, key=lambda c: (c.partition, c.offset)), headers=False)

    def query(t: int) -> dict[int, int]:
        args = ["-Q", "-J", "-b", bootstrap, *KCAT_CONFIG]
        for p in range(PARTITIONS):
            args += ["-t", f"{topic}:{p}:{t}"]
        res = json.loads(kcat(args))[topic]
        return {int(k): v["offset"] for k, v in res.items() if k != "topic"}

    earliest, latest = query(-2), query(-1)  # librdkafka's logical offsets BEGINNING / END
    ts = sorted(r.ts for r in recs if r.ts is not None)
    times = [ts[0] - 1000, recs[len(recs) // 2].ts, ts[-1] + 1000]
    # librdkafka reports "no offset for this time" as -1
    by_time = {t: {p: (None if o < 0 else o) for p, o in query(t).items()} for t in times}  # type: ignore[arg-type]
    check_offsets(recs, earliest, latest, by_time)  # type: ignore[arg-type]
    return summary(CLIENT, recs)


if __name__ == "__main__":
    run(CLIENT, scenario)
