"""`samsa topics|produce|consume` speak the wire protocol to any broker: Apache Kafka and Samsa alike."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from compat_targets import Target

REPO = Path(__file__).resolve().parents[1]


def samsa(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], cwd=REPO, input=stdin,
                          capture_output=True, timeout=90, check=False)


def test_cli_topics_produce_consume(broker: Target) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    b = ("--bootstrap-server", broker.bootstrap)
    r = samsa("topics", "create", "--topic", topic, "--partitions", "3", "--replication-factor", "1", *b)
    assert r.returncode == 0, r.stderr.decode()
    r = samsa("topics", "list", *b)
    assert topic in r.stdout.decode().split()
    r = samsa("topics", "describe", "--topic", topic, *b)
    assert r.stdout.decode().count("Partition:") == 3
    lines = b"".join(b"key%d:value-%d\n" % (i % 4, i) for i in range(20))
    r = samsa("produce", topic, "--key-separator", ":", *b, stdin=lines)
    assert r.returncode == 0, r.stderr.decode()
    r = samsa("consume", topic, "--max-messages", "20", "--print-key", "--timeout-ms", "20000", *b)
    assert r.returncode == 0, r.stderr.decode()
    got = [line.split("\t") for line in r.stdout.decode().splitlines()]
    assert sorted(v for _, v in got) == sorted(f"value-{i}" for i in range(20))
    # Within a key, order is kept (each key lives in one partition).
    for k in range(4):
        values = [int(v.split("-")[1]) for key, v in got if key == f"key{k}"]
        assert values == sorted(values)
    r = samsa("topics", "delete", "--topic", topic, *b)
    assert r.returncode == 0, r.stderr.decode()
