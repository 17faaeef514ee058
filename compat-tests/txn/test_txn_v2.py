"""Exactly-once with the Java producer (the reference version) and consumer on both transaction paths (KIP-890 part 2).

transaction.version=2 (what the reference Kafka and Samsa finalize on a fresh node) puts the Java producer on its V2
path: no AddPartitionsToTxn / AddOffsetsToTxn (the partition leader adds the partition, TxnOffsetCommit v5
adds the group), and EndTxn v5 bumps the producer epoch at every transaction end, the markers carrying
the bumped epoch. transaction.version=1 (set with UpdateFeatures, then restored) keeps it on the V1 path.
On each: read-process-write with sendOffsetsToTransaction and an abort must leave exactly one copy of each
input record; a second producer with the same transactional.id fences the first, whose open transaction is
aborted. Which path ran is observable: the epoch of the markers in the output partition (DescribeProducers)
grows with every transaction on V2 only. Runs against Samsa and the reference Kafka (``-m samsa`` / ``-m kafka``).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compat_targets import Target

from samsa.broker.client import Connection

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_txn_clients import create, fill_input, read_committed

JAVA = Path(__file__).resolve().parent.parent / "java"
COUNT = 300  # fill_input writes this many
SAFE_DOWNGRADE, UPGRADE = 2, 1


def connect(target: Target) -> Connection:
    host, _, port = target.bootstrap.split(",")[0].rpartition(":")
    return Connection(host, int(port))


def set_transaction_version(target: Target, level: int) -> None:
    with connect(target) as conn:
        r = conn.request(57, {"timeout": 10000, "validate_only": False, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": level,
             "upgrade_type": UPGRADE if level >= 2 else SAFE_DOWNGRADE}]}, version=1)
        assert r.error_code.value == 0, r
        # Kafka answers once the controller committed the level; its broker finalizes it a moment later
        # (under load, later than the next ApiVersions): wait for it, bounded.
        deadline = time.monotonic() + 15
        while True:
            features = conn.request(18, {"client_software_name": "t", "client_software_version": "1"}, version=3)
            finalized = {f.name: f.max_version_level for f in features.finalized_features}
            if finalized.get("transaction.version") == level or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert finalized.get("transaction.version") == level, finalized


def marker_epochs(target: Target, topic: str) -> list[int]:
    with connect(target) as conn:
        r = conn.request(61, {"topics": [{"name": topic, "partition_indexes": [0]}]}, version=0)
        return [p.producer_epoch for t in r.topics for part in t.partitions for p in part.active_producers]


@pytest.mark.parametrize("transaction_version", [2, 1])
def test_java_exactly_once_on_both_transaction_paths(broker: Target, transaction_version: int) -> None:
    classes = JAVA / "target" / "classes"
    if not (classes / "TxnExactlyOnce.class").exists():
        pytest.fail("the Java programs are not built: run `make compat-java`")
    suffix = uuid.uuid4().hex[:8]
    src, dst = f"eos-in-{suffix}", f"eos-out-{suffix}"
    create(broker, src, 2)
    create(broker, dst, 1)
    values = fill_input(broker, src)
    set_transaction_version(broker, transaction_version)
    try:
        r = subprocess.run(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-cp", f"{classes}:{JAVA / 'target' / 'lib' / '*'}", "TxnExactlyOnce", broker.bootstrap, src, dst,
             f"eos-{suffix}", str(COUNT)],
            capture_output=True, timeout=300, check=False)
    finally:
        set_transaction_version(broker, 2)
    output = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == 0, output[-3000:]
    summary = dict(item.split("=") for item in r.stdout.decode().strip().splitlines()[-1].split())
    assert int(summary["aborts"]) == 1 and int(summary["commits"]) >= 2, summary
    assert summary["fenced"] in ("ProducerFencedException", "InvalidProducerEpochException"), output[-3000:]
    out = read_committed(broker, dst, COUNT + 1)
    assert sorted(out) == sorted([b"out-" + v for v in values] + [b"from-second"]), (len(out), len(set(out)))
    transactions = int(summary["commits"]) + int(summary["aborts"])
    [epoch] = marker_epochs(broker, dst)
    if transaction_version >= 2:
        assert epoch >= transactions, (epoch, summary)  # a bump at every transaction end
    else:
        assert epoch <= 3, (epoch, summary)  # bumped only by the second producer's initialization
