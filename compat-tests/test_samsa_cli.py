"""`samsa topics|produce|consume|groups|config|cluster info` speak the wire protocol to any broker: each test
runs against the reference Apache Kafka (the proof that the CLI is right) and against Samsa."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from compat_targets import Target

REPO = Path(__file__).resolve().parents[1]


def samsa(*args: str, stdin: bytes | None = None, timeout_s: float = 90) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], cwd=REPO, input=stdin,
                          capture_output=True, timeout=timeout_s, check=False)


def ok(r: subprocess.CompletedProcess[bytes]) -> str:
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    return r.stdout.decode()


def new_topic(broker: Target, partitions: int = 3, *extra: str) -> str:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    ok(samsa("topics", "create", topic, "-p", str(partitions), "-r", "1", *extra, "-b", broker.bootstrap))
    return topic


def test_cli_topics_produce_consume(broker: Target) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    ok(samsa("topics", "create", "--topic", topic, "--partitions", "3", "--replication-factor", "1", *b))
    listed = json.loads(ok(samsa("topics", "list", "--output", "json", *b)))
    assert {"name": topic, "partitions": 3, "replicas": 1} in listed
    described = json.loads(ok(samsa("topics", "describe", topic, "--output", "json", *b)))
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["isr"] == p["replicas"] for p in described[0]["partitions"])
    lines = b"".join(b"key%d:value-%d\n" % (i % 4, i) for i in range(20))
    ok(samsa("produce", topic, "--key-separator", ":", *b, stdin=lines))
    r = samsa("consume", topic, "--max-messages", "20", "--print-key", *b)
    got = [line.split("\t") for line in ok(r).splitlines()]
    assert sorted(v for _, v in got) == sorted(f"value-{i}" for i in range(20))
    for k in range(4):  # within a key, order is kept (each key lives in one partition)
        values = [int(v.split("-")[1]) for key, v in got if key == f"key{k}"]
        assert values == sorted(values)
    ok(samsa("topics", "delete", topic, *b))
    assert topic not in ok(samsa("topics", "list", *b)).split()


def test_json_lines_round_trip_key_value_headers_timestamp(broker: Target) -> None:
    topic = new_topic(broker, 1)
    now = int(time.time() * 1000)
    sent = [{"key": f"k{i}", "value": f"v{i}", "headers": {"h": f"x{i}", "n": None}, "timestamp": now - 1000 + i}
            for i in range(5)]
    lines = "".join(json.dumps(s) + "\n" for s in sent).encode()
    ok(samsa("produce", topic, "--format", "json", "-H", "origin=cli", "-b", broker.bootstrap, stdin=lines))
    got = [json.loads(line) for line in ok(samsa("consume", topic, "--format", "json", "-b", broker.bootstrap))
           .splitlines()]
    assert [g["offset"] for g in got] == list(range(5))
    assert [(g["key"], g["value"], g["timestamp"]) for g in got] == [(s["key"], s["value"], s["timestamp"])
                                                                      for s in sent]
    assert [g["headers"] for g in got] == [{"h": f"x{i}", "n": None, "origin": "cli"} for i in range(5)]
    template = ok(samsa("consume", topic, "--format", "%t/%p@%o %k=%v [%h] %d\\n", "-n", "1",
                        "-b", broker.bootstrap))
    assert template == f"{topic}/0@0 k0=v0 [h=x0,n=,origin=cli] {now - 1000}\n"
    # an input template
    ok(samsa("produce", topic, "--format", "%k|%v", "-b", broker.bootstrap, stdin=b"a|1\nb|2|3\n"))
    tail = ok(samsa("consume", topic, "-o", "-2", "--format", "%k %v\\n", "-b", broker.bootstrap))
    assert tail == "a 1\nb 2|3\n"


def test_produce_partition_flag_puts_every_record_there(broker: Target) -> None:
    from samsa.broker.cli.commands.produce import partition_for_key

    topic = new_topic(broker, 3)
    keys = [f"key{i}" for i in range(12)]
    assert {partition_for_key(k.encode(), 3) for k in keys} != {1}  # by key, they would spread
    lines = "".join(f"{k}:value-{i}\n" for i, k in enumerate(keys)).encode() + b"no key\n"
    ok(samsa("produce", topic, "-p", "1", "-k", ":", "-b", broker.bootstrap, stdin=lines))
    got = [json.loads(line) for line in ok(samsa("consume", topic, "--format", "json", "-b", broker.bootstrap))
           .splitlines()]
    assert [g["partition"] for g in got] == [1] * 13
    assert [(g["key"], g["value"]) for g in got] == [(k, f"value-{i}") for i, k in enumerate(keys)] + [
        (None, "no key")]
    assert [g["offset"] for g in got] == list(range(13))


def test_produce_template_headers_as_rpk(broker: Target) -> None:
    topic = new_topic(broker, 1)
    lines = b"2 trace=a1,tenant=x,first\n0 second\n1 empty=,third\n"
    ok(samsa("produce", topic, "--format", "%H %h{%k=%v,}%v", "-H", "origin=cli", "-b", broker.bootstrap,
             stdin=lines))
    got = [json.loads(line) for line in ok(samsa("consume", topic, "--format", "json", "-b", broker.bootstrap))
           .splitlines()]
    assert [(g["value"], g["headers"]) for g in got] == [
        ("first", {"trace": "a1", "tenant": "x", "origin": "cli"}), ("second", {"origin": "cli"}),
        ("third", {"empty": "", "origin": "cli"})]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_and_acks(broker: Target, codec: str) -> None:
    topic = new_topic(broker, 2)
    lines = b"".join(b"%d-%s\n" % (i, b"x" * 50) for i in range(500))
    r = samsa("produce", topic, "-z", codec, "--acks", "1", "-b", broker.bootstrap, stdin=lines)
    assert "produced 500 records" in (ok(r), r.stderr.decode())[1]
    got = ok(samsa("consume", topic, "-b", broker.bootstrap)).split()
    assert sorted(got) == sorted(line.decode() for line in lines.split())


def test_consume_never_creates_a_topic(broker: Target) -> None:
    topic = f"cli-nosuch-{uuid.uuid4().hex[:8]}"
    r = samsa("consume", topic, "-b", broker.bootstrap)
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert r.stderr.decode().splitlines() == [
        f"error: topic {topic!r}: UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition. "
        "Hint: check the name with `samsa topics list`, or create it with `samsa topics create NAME`."]
    time.sleep(0.5)  # a broker that auto-created it would list it by now
    assert topic not in ok(samsa("topics", "list", "-b", broker.bootstrap)).split()


def test_offsets_start_end_relative_and_timestamp(broker: Target) -> None:
    topic = new_topic(broker, 1)
    ok(samsa("produce", topic, "-b", broker.bootstrap, stdin=b"".join(b"r%d\n" % i for i in range(10))))
    mid = int(time.time() * 1000)
    time.sleep(0.05)
    ok(samsa("produce", topic, "-b", broker.bootstrap, stdin=b"s0\ns1\n"))

    def read(offset: str) -> list[str]:
        return ok(samsa("consume", topic, "-o", offset, "-b", broker.bootstrap)).split()

    assert read("start") == [f"r{i}" for i in range(10)] + ["s0", "s1"]
    assert read("end") == []
    assert read("7") == ["r7", "r8", "r9", "s0", "s1"]
    assert read("+9") == ["r9", "s0", "s1"]
    assert read("-3") == ["r9", "s0", "s1"]
    assert read(f"@{mid}") == ["s0", "s1"]
    r = samsa("consume", topic, "-o", "-3", "-b", broker.bootstrap)
    assert "reached the end" in r.stderr.decode() and "consumed 3 records" in r.stderr.decode()


def test_group_commits_and_resumes(broker: Target) -> None:
    topic = new_topic(broker, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    b = ("-b", broker.bootstrap)
    ok(samsa("produce", topic, "-k", ":", *b, stdin=b"".join(b"k%d:a%d\n" % (i, i) for i in range(10))))
    first = ok(samsa("consume", topic, "-g", group, "-n", "4", *b)).split()
    rest = ok(samsa("consume", topic, "-g", group, *b)).split()
    assert len(first) == 4 and sorted(first + rest) == sorted(f"a{i}" for i in range(10))
    ok(samsa("produce", topic, *b, stdin=b"late\n"))
    assert ok(samsa("consume", topic, "-g", group, *b)).split() == ["late"]
    described = json.loads(ok(samsa("groups", "describe", "-g", group, "--output", "json", *b)))
    assert sum(row["lag"] for row in described["partitions"]) == 0
    assert sum(row["current_offset"] for row in described["partitions"]) == 11
    assert group in ok(samsa("groups", "list", *b))


def test_topic_configs_and_partitions(broker: Target) -> None:
    topic = new_topic(broker, 1, "-c", "cleanup.policy=compact")
    b = ("-b", broker.bootstrap)
    ok(samsa("topics", "alter-config", topic, "--set", "retention.ms=123456", *b))
    configs = {c["name"]: c for c in json.loads(ok(samsa("topics", "describe-configs", topic, "--output", "json",
                                                         *b)))}
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "compact"
    ok(samsa("topics", "alter-config", topic, "--delete", "retention.ms", *b))
    overrides = ok(samsa("topics", "describe-configs", topic, "--overrides-only", *b))
    assert "retention.ms" not in overrides and "cleanup.policy" in overrides
    ok(samsa("topics", "add-partitions", topic, "--num", "2", *b))
    deadline = time.monotonic() + 20
    while True:
        described = json.loads(ok(samsa("topics", "describe", topic, "--output", "json", *b)))
        if len(described[0]["partitions"]) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(described[0]["partitions"]) == 3
    r = samsa("topics", "add-partitions", topic, "--total", "2", *b)
    assert r.returncode == 1 and r.stderr.decode().startswith(f"error: topic {topic!r}: INVALID_PARTITIONS: ")


def test_config_get_and_set_a_dynamic_broker_config(broker: Target) -> None:
    b = ("-b", broker.bootstrap)
    got = json.loads(ok(samsa("config", "get", "log.retention.ms", "--output", "json", *b)))
    assert [c["name"] for c in got] == ["log.retention.ms"]
    ok(samsa("config", "set", "log.retention.ms=3600000", *b))
    try:
        deadline = time.monotonic() + 20
        while True:
            dynamic = {c["name"]: c for c in json.loads(ok(samsa("config", "get", "--dynamic", "--output", "json",
                                                                 *b)))}
            if "log.retention.ms" in dynamic or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert dynamic["log.retention.ms"]["value"] == "3600000"
        assert dynamic["log.retention.ms"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    finally:
        ok(samsa("config", "set", "--delete", "log.retention.ms", *b))


def test_cluster_info_and_health(broker: Target) -> None:
    info = json.loads(ok(samsa("cluster", "info", "--output", "json", "-b", broker.bootstrap)))
    assert len(info["brokers"]) == 1 and info["controller"] >= 0
    assert info["quorum"] is not None and len(info["quorum"]["voters"]) == 1, info  # DescribeQuorum, forwarded
    assert info["brokers"][0]["port"] == int(broker.bootstrap.rpartition(":")[2])
    health = ok(samsa("cluster", "health", "--exit-status", "-b", broker.bootstrap))
    assert health.splitlines()[0].split() == ["Healthy:", "true"]


def test_read_committed_hides_aborted_transactions(broker: Target) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")  # a test dependency (pyproject [test])
    topic = new_topic(broker, 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{outcome}-{i}".encode())
        producer.flush(30)
        if outcome == "aborted":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    committed = ok(samsa("consume", topic, "--isolation", "read_committed", "-b", broker.bootstrap)).split()
    assert committed == [f"committed-{i}" for i in range(3)]
    everything = ok(samsa("consume", topic, "-b", broker.bootstrap)).split()
    assert everything == [f"aborted-{i}" for i in range(3)] + [f"committed-{i}" for i in range(3)]


def test_produce_streams_a_pipe_that_stays_open(broker: Target) -> None:
    topic = new_topic(broker, 1)
    proc = subprocess.Popen([sys.executable, "-m", "samsa.broker.cli", "produce", topic, "-b", broker.bootstrap],
                            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"one\ntwo\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        seen: list[str] = []
        while time.monotonic() < deadline and seen != ["one", "two"]:
            seen = ok(samsa("consume", topic, "-b", broker.bootstrap)).split()
            time.sleep(0.2)
        assert seen == ["one", "two"], "records on an open pipe were not sent (linger.ms) before stdin closed"
        assert proc.poll() is None
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_produce_three_megabytes_in_batches(broker: Target) -> None:
    topic = new_topic(broker, 3)
    lines = b"".join(b"%06d-%s\n" % (i, b"y" * 300) for i in range(10000))  # ~3 MB
    assert len(lines) > 3_000_000
    r = samsa("produce", topic, "-b", broker.bootstrap, stdin=lines)
    assert "produced 10000 records" in (ok(r), r.stderr.decode())[1]
    out = ok(samsa("consume", topic, "--format", "%v\\n", "-b", broker.bootstrap, timeout_s=120)).split()
    assert sorted(out) == sorted(line.decode() for line in lines.split())


def test_two_group_members_share_the_partitions_and_leave_at_exit(broker: Target) -> None:
    import signal
    import threading

    topic = new_topic(broker, 2)
    group = f"pair-{uuid.uuid4().hex[:8]}"
    b = ("-b", broker.bootstrap)
    argv = [sys.executable, "-m", "samsa.broker.cli", "consume", topic, "-g", group, "-f", "--format", "%p %v\\n", *b]
    procs = [subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    seen: list[list[str]] = [[], []]

    def drain(i: int) -> None:
        assert procs[i].stdout is not None
        for line in procs[i].stdout:
            seen[i].append(line.strip())

    readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(2)]
    for t in readers:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            d = samsa("groups", "describe", "-g", group, "--output", "json", *b)
            owners = {row["partition"]: row["consumer_id"] for row in json.loads(d.stdout or "{}").get(
                "partitions", [])} if d.returncode == 0 else {}
            state = json.loads(d.stdout).get("state") if d.returncode == 0 else None
            if state == "Stable" and len(set(owners.values()) - {None}) == 2:
                break
            assert time.monotonic() < deadline, f"two members never shared the partitions: {d.stdout}{d.stderr}"
            time.sleep(0.3)
        ok(samsa("produce", topic, "-k", ":", *b, stdin=b"".join(b"k%d:v%d\n" % (i, i) for i in range(40))))
        deadline = time.monotonic() + 30
        while len(seen[0]) + len(seen[1]) < 40 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(line.split()[1] for line in seen[0] + seen[1]) == sorted(f"v{i}" for i in range(40))
        partitions = [{line.split()[0] for line in s} for s in seen]
        assert partitions[0] and partitions[1] and not partitions[0] & partitions[1], partitions
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        codes = [p.wait(30) for p in procs]
    assert codes == [0, 0], [p.stderr.read() if p.stderr else "" for p in procs]
    described = json.loads(ok(samsa("groups", "describe", "-g", group, "--output", "json", *b)))
    assert described["state"] == "Empty" and described["members"] == 0  # both left the group
    assert sum(row["lag"] for row in described["partitions"]) == 0  # and committed what they printed


def test_ctrl_c_sends_what_produce_has_read(broker: Target) -> None:
    import signal

    topic = new_topic(broker, 1)
    proc = subprocess.Popen([sys.executable, "-m", "samsa.broker.cli", "produce", topic, "--linger-ms", "600000",
                             "-b", broker.bootstrap], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"held-1\nheld-2\n")
    proc.stdin.flush()
    time.sleep(2)  # read, and held back by linger.ms
    assert ok(samsa("consume", topic, "-b", broker.bootstrap)) == ""
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0
    assert "produced 2 records" in proc.stderr.read().decode()
    assert ok(samsa("consume", topic, "-b", broker.bootstrap)).split() == ["held-1", "held-2"]
