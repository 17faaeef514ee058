"""Kafka's own command-line tools (from the oracle's jars) against Samsa, as a user runs them.

kafka-topics, kafka-configs, kafka-console-producer/-consumer, kafka-get-offsets, kafka-delete-records
and kafka-dump-log (reading Samsa's segment files directly: same on-disk format). Every test checks what
the tool prints -- offsets, counts, values, configs -- not only its exit code.

By default the tools run against Samsa only (each JVM start costs 3-8 s). ``TOOLS_AGAINST_KAFKA=1``
runs every test against Apache Kafka too, which proves the expectations right; they were written that
way. ``kafka-consumer-groups`` is tested with the groups work (compat-tests/groups/).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from differential.framework import Ctx, context, err
from oracle_fixture import QUICK_JVM_OPTS, run_kafka_tool

from samsa.kproto.records import encode_batch

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"

TARGETS = ["kafka", "samsa"] if os.environ.get("TOOLS_AGAINST_KAFKA") == "1" else ["samsa"]


@dataclass
class ToolTarget:
    name: str
    bootstrap: str
    data_dir: Path  # where the broker keeps <topic>-<partition>/ directories


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[ToolTarget]:
    if request.param == "kafka":
        cluster = request.getfixturevalue("kafka_oracle")
        yield ToolTarget("kafka", cluster.bootstrap, cluster.nodes[0].data_dir)
    else:
        proc = request.getfixturevalue("samsa_server")
        yield ToolTarget("samsa", proc.bootstrap, proc.data_dir)


@pytest.fixture
def ctx(target: ToolTarget) -> Iterator[Ctx]:
    with context(target.name, target.bootstrap, "tools", int(time.time() * 1000)) as c:
        yield c


def tool(main_class: str, *args: str, input: str | None = None, check: bool = True,
         timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    return run_kafka_tool(main_class, *args, input=input, check=check, jvm_opts=QUICK_JVM_OPTS, timeout=timeout)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def segment(target: ToolTarget, topic: str, partition: int, suffix: str = "log") -> Path:
    path = target.data_dir / f"{topic}-{partition}" / f"{0:020d}.{suffix}"
    assert path.exists(), f"{target.name} has no {path}"
    return path


def get_offsets(target: ToolTarget, topic: str, time_arg: str) -> dict[int, int]:
    out = tool(GET_OFFSETS, "--bootstrap-server", target.bootstrap, "--topic", topic, "--time", time_arg).stdout
    got = {}
    for line in out.split():
        t, p, o = line.rsplit(":", 2)
        assert t == topic, out
        got[int(p)] = int(o)
    return got


# --- kafka-topics ------------------------------------------------------------------------------


def describe(target: ToolTarget, topic: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe: the topic line's fields and one dict per partition line."""
    out = tool(TOPICS, "--bootstrap-server", target.bootstrap, "--describe", "--topic", topic).stdout
    lines = [line.strip() for line in out.splitlines() if line.strip()]

    def fields(line: str) -> dict[str, str]:
        return {k.strip(): v.strip() for k, v in (f.split(":", 1) for f in line.split("\t") if ":" in f)}

    head = fields(lines[0])
    parts = [fields(line) for line in lines[1:]]
    return head, parts


def test_kafka_topics(target: ToolTarget, ctx: Ctx) -> None:
    topic = unique("tools-topics")
    b = ("--bootstrap-server", target.bootstrap)
    r = tool(TOPICS, *b, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
             "--config", "retention.ms=123456", "--config", "cleanup.policy=compact")
    assert r.stdout.strip() == f"Created topic {topic}."
    head, parts = describe(target, topic)
    assert head["Topic"] == topic and head["PartitionCount"] == "3" and head["ReplicationFactor"] == "1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head["TopicId"]), head
    configs = dict(kv.split("=", 1) for kv in head["Configs"].split(","))
    assert configs["retention.ms"] == "123456" and configs["cleanup.policy"] == "compact", head
    assert [p["Partition"] for p in parts] == ["0", "1", "2"]
    assert all(p["Leader"] == "1" and p["Replicas"] == "1" and p["Isr"] == "1" for p in parts), parts

    r = tool(TOPICS, *b, "--alter", "--topic", topic, "--partitions", "5")
    assert r.returncode == 0
    head, parts = describe(target, topic)
    assert head["PartitionCount"] == "5" and [p["Partition"] for p in parts] == ["0", "1", "2", "3", "4"]
    # the new partitions take writes (keyed: the topic is compacted)
    assert err(ctx.produce(ctx.connect(), topic, 4, ctx.batch([(b"k", b"x", ())]))) == "NONE(0)"

    r = tool(TOPICS, *b, "--alter", "--topic", topic, "--partitions", "2", check=False)
    assert r.returncode == 1
    assert "InvalidPartitionsException" in r.stderr and "currently has 5 partition" in r.stdout, r

    r = tool(TOPICS, *b, "--delete", "--topic", topic)
    assert r.returncode == 0
    deadline = time.monotonic() + 30
    while True:  # Kafka deletes asynchronously
        listed = tool(TOPICS, *b, "--list").stdout.split()
        if topic not in listed or time.monotonic() > deadline:
            break
    assert topic not in listed
    assert "__consumer_offsets" in listed or all(not t.startswith("__") for t in listed)


# --- kafka-configs -----------------------------------------------------------------------------


def config_lines(out: str) -> dict[str, str]:
    """ConfigCommand --describe: {name: the rest of the line}."""
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s+([a-z0-9.]+)=(\S*) sensitive=(true|false) synonyms=\{(.*)\}$", line)
        if m:
            got[m.group(1)] = f"{m.group(2)} synonyms={{{m.group(4)}}}"
    return got


def test_kafka_configs(target: ToolTarget, ctx: Ctx) -> None:
    topic = unique("tools-configs")
    assert err(ctx.create_topic(ctx.connect(), topic, 1)) == "NONE(0)"
    e = ("--bootstrap-server", target.bootstrap, "--entity-type", "topics", "--entity-name", topic)
    r = tool(CONFIGS, *e, "--alter", "--add-config", "retention.ms=5000,cleanup.policy=compact")
    assert r.stdout.strip() == f"Completed updating config for topic {topic}."
    r = tool(CONFIGS, *e, "--describe")
    assert r.stdout.splitlines()[0] == f"Dynamic configs for topic {topic} are:"
    got = config_lines(r.stdout)
    assert set(got) == {"retention.ms", "cleanup.policy"}, r.stdout
    assert got["retention.ms"].startswith("5000 synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000"), got
    assert got["cleanup.policy"].startswith("compact synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact"), got

    r = tool(CONFIGS, *e, "--alter", "--delete-config", "cleanup.policy")
    assert r.returncode == 0
    # (--describe --all lists the defaults: those are compared with Kafka's by differential/describe_configs_defaults)
    c = ctx.connect().request(32, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                   "configuration_keys": ["cleanup.policy", "retention.ms"]}],
                                   "include_synonyms": False, "include_documentation": False}, version=4)
    assert {x.name: (x.value, x.config_source) for x in c.results[0].configs} == {
        "cleanup.policy": ("delete", 5), "retention.ms": ("5000", 1)}

    r = tool(CONFIGS, *e, "--alter", "--add-config", "retention.ms=soon", check=False)
    assert r.returncode != 0 and "InvalidConfigurationException" in r.stderr, r.stderr[-2000:]


# --- console producer and consumer -------------------------------------------------------------


def java_string_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_console_producer_and_consumer(target: ToolTarget, ctx: Ctx) -> None:
    topic = unique("tools-console")
    conn = ctx.connect()
    assert err(ctx.create_topic(conn, topic, 1)) == "NONE(0)"
    lines = [f"h1:a{i},h2:b{i}\tkey{i % 3}\tvalue-{i}" for i in range(6)]
    args = ["--bootstrap-server", target.bootstrap, "--topic", topic,
            "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true"]
    if 22 not in conn.versions:  # without InitProducerId the Java producer must not be idempotent
        args += ["--command-property", "enable.idempotence=false"]
    tool(PRODUCER, *args, input="\n".join(lines) + "\n")
    # What the broker has: six records, in order, keys, values and headers as typed.
    got = []
    for batch in _fetch_all(ctx, topic):
        for rec in batch["records"]:
            got.append((rec["offset"], rec["key"], rec["value"], rec["headers"]))
    assert got == [(i, f"key{i % 3}", f"value-{i}", [["h1", f"a{i}"], ["h2", f"b{i}"]]) for i in range(6)]

    # --partition/--offset: no group involved.
    r = tool(CONSUMER, "--bootstrap-server", target.bootstrap, "--topic", topic, "--partition", "0",
             "--offset", "2", "--max-messages", "3", "--timeout-ms", "20000",
             "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
             "--formatter-property", "print.partition=true", "--formatter-property", "print.headers=true")
    assert r.stdout.splitlines() == [f"Partition:0\tOffset:{i}\th1:a{i},h2:b{i}\tkey{i % 3}\tvalue-{i}"
                                     for i in (2, 3, 4)], r.stdout
    assert "Processed a total of 3 messages" in r.stderr

    # In a group (what the console consumer does without --partition): all six, then the commit is on disk.
    group = unique("tools-group")
    r = tool(CONSUMER, "--bootstrap-server", target.bootstrap, "--topic", topic, "--group", group,
             "--from-beginning", "--max-messages", "6", "--timeout-ms", "30000")
    assert r.stdout.splitlines() == [f"value-{i}" for i in range(6)], r.stdout
    partition = abs(java_string_hash(group)) % 50  # Kafka's group -> __consumer_offsets partition (50 partitions)
    r = tool(DUMP_LOG, "--files", str(segment(target, "__consumer_offsets", partition)), "--offsets-decoder")
    commits = [json.loads(m.group(1)) for m in re.finditer(r"payload: (\{.*\})$", r.stdout, re.M)
               if '"offset"' in m.group(1)]
    keys = [json.loads(m.group(1)) for m in re.finditer(r"key: (\{.*?\}) payload", r.stdout)]
    mine = [k["data"] for k in keys if k["type"] == "1" and k["data"]["group"] == group]
    assert mine and all(k["topic"] == topic and k["partition"] == 0 for k in mine), r.stdout[-3000:]
    assert commits and commits[-1]["data"]["offset"] == 6, r.stdout[-3000:]


def _fetch_all(ctx: Ctx, topic: str, partition: int = 0) -> list[dict[str, Any]]:
    from differential.framework import records_of

    p = ctx.fetch(ctx.connect(), topic, partition, 0)
    assert err(p) == "NONE(0)"
    return records_of(p.records)


# --- kafka-get-offsets and kafka-delete-records ------------------------------------------------


def test_get_offsets_and_delete_records(target: ToolTarget, ctx: Ctx, tmp_path: Path) -> None:
    topic = unique("tools-offsets")
    conn = ctx.connect()
    assert err(ctx.create_topic(conn, topic, 3)) == "NONE(0)"
    base = ctx.t0 - 60_000
    for i in range(4):  # partition 0: offsets 0..3 at base, base+1s, base+2s, base+3s
        assert err(ctx.produce(conn, topic, 0, encode_batch([(None, b"p0-%d" % i, ())],
                                                             timestamp_ms=base + i * 1000))) == "NONE(0)"
    assert err(ctx.produce(conn, topic, 1, encode_batch([(None, b"p1", ())], timestamp_ms=base))) == "NONE(0)"
    assert get_offsets(target, topic, "-1") == {0: 4, 1: 1, 2: 0}  # latest
    # (partitions without an answer, offset -1, are not printed)
    assert get_offsets(target, topic, str(base + 1500)) == {0: 2}  # by timestamp
    assert get_offsets(target, topic, "max-timestamp") == {0: 3, 1: 0}

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 2},
                                                             {"topic": topic, "partition": 1, "offset": 5}]}))
    r = tool(DELETE_RECORDS, "--bootstrap-server", target.bootstrap, "--offset-json-file", str(spec))
    lines = sorted(r.stdout.splitlines())
    assert f"partition: {topic}-0\tlow_watermark: 2" in lines, r.stdout
    assert any(line.startswith(f"partition: {topic}-1\terror: ") and "OffsetOutOfRangeException" in line
               for line in lines), r.stdout
    assert get_offsets(target, topic, "earliest") == {0: 2, 1: 0, 2: 0}


# --- kafka-dump-log on the broker's own files --------------------------------------------------

BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*? producerId: (-?\d+) .*?"
                        r"position: (\d+) CreateTime: (\d+) size: (\d+) magic: 2 compresscodec: (\w+) "
                        r"crc: (\d+) isvalid: (true|false)$")
RECORD_LINE = re.compile(r"^\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: (-?\d+) "
                         r"sequence: (-?\d+) headerKeys: \[(.*?)\](?: key: (.*?))? payload: (.*)$")


def _dump_sections(out: str) -> dict[str, str]:
    """DumpLogSegments output of several files: {file name: its part of the output}."""
    parts = re.split(r"^Dumping (\S+)$", out, flags=re.M)
    return {Path(parts[i]).name: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_dump_log_reads_the_segments(target: ToolTarget, ctx: Ctx) -> None:
    topic = unique("tools-dump")
    conn = ctx.connect()
    # 1 MiB segments (Kafka 4's minimum): ~1.3 MB of batches make two, the first one rolled (indexes final).
    assert err(ctx.create_topic(conn, topic, 1, {"segment.bytes": "1048576"})) == "NONE(0)"
    expected = []  # (offset, key, value, header keys)
    offset = 0
    chunk = hashlib.sha256(ctx.scenario.encode()).hexdigest().encode()
    for i in range(24):
        codec = (0, 1, 4)[i % 3]  # none, gzip, zstd
        recs = []
        for j in range(5):
            value = b"batch%02d-rec%d-" % (i, j)
            while len(value) < 16_000:
                chunk = hashlib.sha256(chunk).hexdigest().encode()
                value += chunk
            recs.append((b"k%d" % i, value, [("h", b"v"), ("i", b"%d" % i)]))
        p = ctx.produce(conn, topic, 0, encode_batch(recs, timestamp_ms=ctx.t0 + i * 10, compression=codec))
        assert err(p) == "NONE(0)" and p.base_offset == offset
        expected += [(offset + j, k.decode(), v.decode(), "h,i") for j, (k, v, _) in enumerate(recs)]
        offset += len(recs)

    logs = sorted((target.data_dir / f"{topic}-0").glob("*.log"))
    assert len(logs) >= 2, f"{target.name} did not roll the segment: {logs}"
    r = tool(DUMP_LOG, "--files", ",".join(map(str, logs)), "--print-data-log")
    sections = _dump_sections(r.stdout)
    assert list(sections) == [p.name for p in logs], list(sections)
    got = []
    last_offset_at: dict[int, int] = {}  # position -> last offset of the batch there (first segment)
    codecs = []
    for n, log in enumerate(logs):
        lines = sections[log.name].splitlines()
        batches = [BATCH_LINE.match(line) for line in lines if line.startswith("baseOffset:")]
        assert batches and all(batches), sections[log.name][:3000]
        assert all(m.group(3) == "5" and m.group(10) == "true" for m in batches)  # type: ignore[union-attr]
        codecs += [m.group(8) for m in batches]  # type: ignore[union-attr]
        # contiguous: each batch starts where the previous one ended; the last one ends at the file's size
        pos = [(int(m.group(5)), int(m.group(7))) for m in batches]  # type: ignore[union-attr]
        assert pos[0][0] == 0 and all(a + size == b for (a, size), (b, _) in itertools.pairwise(pos))
        assert pos[-1][0] + pos[-1][1] == log.stat().st_size
        assert int(log.stem) == int(batches[0].group(1))  # type: ignore[union-attr]  # named by base offset
        if n == 0:
            last_offset_at = {int(m.group(5)): int(m.group(2)) for m in batches}  # type: ignore[union-attr]
        records = [RECORD_LINE.match(line) for line in lines if line.startswith("| offset:")]
        assert all(records)
        got += [(int(m.group(1)), m.group(7), m.group(8), m.group(6)) for m in records]  # type: ignore[union-attr]
    assert got == expected
    assert codecs == ["none", "gzip", "zstd"] * 8

    # The first segment's offset and time indexes: the tool checks each entry against the log.
    index, timeindex = logs[0].with_suffix(".index"), logs[0].with_suffix(".timeindex")
    r = tool(DUMP_LOG, "--files", f"{index},{timeindex}")
    out = r.stdout
    assert "mismatch" not in out.lower() and "not found" not in out and "is empty" not in out, out[-3000:]
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", out, re.M)
    assert entries, out[-2000:]
    for o, position in entries:  # each entry: a batch's last offset and the position where that batch starts
        assert last_offset_at.get(int(position)) == int(o), (o, position)
    time_entries = [(int(t), int(o)) for t, o in re.findall(r"^timestamp: (\d+) offset: (\d+)$", out, re.M)]
    assert time_entries, out[-2000:]
    assert all(ctx.t0 <= t < ctx.t0 + 240 and o in last_offset_at.values() for t, o in time_entries), time_entries
    r = tool(DUMP_LOG, "--files", str(index), "--index-sanity-check")
    assert "passed sanity check" in r.stdout, r.stdout


def test_dump_log_cluster_metadata(target: ToolTarget) -> None:
    """kafka-dump-log --cluster-metadata-decoder on __cluster_metadata-0: Kafka's metadata record schemas."""
    log = segment(target, "__cluster_metadata", 0)
    r = tool(DUMP_LOG, "--files", str(log), "--cluster-metadata-decoder")
    batches = [line for line in r.stdout.splitlines() if line.startswith("baseOffset:")]
    assert batches and all("isvalid: true" in b for b in batches), r.stdout[:2000]
    undecodable = [line for line in r.stdout.splitlines() if "Could not deserialize metadata record" in line]
    if target.name == "samsa" and undecodable:
        pytest.xfail(f"Samsa's __cluster_metadata records are its own JSON, not Kafka's metadata record schemas "
                     f"({len(undecodable)} records: {undecodable[0][:200]})")
    assert not undecodable, undecodable[:3]
    assert re.search(r'payload: \{"type":"TOPIC_RECORD"', r.stdout) or "TOPIC_RECORD" in r.stdout, r.stdout[-2000:]


def test_dump_log_transactions(target: ToolTarget, ctx: Ctx) -> None:
    """A committed and an aborted transaction: markers, the .txnindex and __transaction_state, read by the tool."""
    from differential.scenarios import transactional_visibility

    conn = ctx.connect()
    if not {22, 24, 26} <= set(conn.versions):
        pytest.skip("transactions not implemented (issue 5)")
    ctx.scenario = unique("tools-txn")
    outcome = transactional_visibility(ctx)  # committed: c1 c2 COMMIT; aborted: a1 ABORT (offsets 0..4)
    assert outcome["committed"]["end_txn"] == outcome["aborted"]["end_txn"] == "NONE(0)", outcome
    topic, txn_id = ctx.topic(), ctx.topic("txn")
    log = segment(target, topic, 0)
    r = tool(DUMP_LOG, "--files", f"{log.with_suffix('.txnindex')},{log}", "--print-data-log")
    sections = _dump_sections(r.stdout)
    aborted = re.findall(r"^version: 0 producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)$",
                         sections[log.with_suffix(".txnindex").name], re.M)
    assert [(int(f), int(last)) for _, f, last, _ in aborted] == [(3, 4)], r.stdout[:2000]
    batches = [BATCH_LINE.match(line) for line in sections[log.name].splitlines() if line.startswith("baseOffset:")]
    assert [int(m.group(1)) for m in batches] == [0, 2, 3, 4]  # type: ignore[union-attr]
    assert all(f"producerId: {aborted[0][0]} " in line and "isTransactional: true" in line
               for line in sections[log.name].splitlines() if line.startswith("baseOffset:"))
    markers = re.findall(r"^\| offset: (\d+) .*endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (\d+)$",
                         sections[log.name], re.M)
    assert [(int(o), kind) for o, kind, _ in markers] == [(2, "COMMIT"), (4, "ABORT")], sections[log.name][-2000:]
    payloads = re.findall(r"^\| offset: (\d+) .* payload: (\w+)$", sections[log.name], re.M)
    assert [(int(o), v) for o, v in payloads] == [(0, "c1"), (1, "c2"), (3, "a1")]

    # The coordinator's log: Kafka's TransactionLog records, state by state (TransactionState ids).
    partition = abs(java_string_hash(txn_id)) % 50  # transaction.state.log.num.partitions = 50
    r = tool(DUMP_LOG, "--files", str(segment(target, "__transaction_state", partition)), "--transaction-log-decoder")
    states = [json.loads(v)["data"]["transactionStatus"]
              for k, v in re.findall(r"key: (\{.*?\}) payload: (\{.*\})$", r.stdout, re.M)
              if json.loads(k)["data"].get("transactionalId") == txn_id]
    # TransactionState ids 0, 1, 2, 4, 1, 3, 5, which Kafka 4.4's decoder prints by name
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                      "CompleteAbort"], (states, r.stdout[-3000:])
