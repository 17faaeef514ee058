"""kafka-features.sh (the reference Kafka's FeatureCommand) against Samsa: `describe` lists the supported ranges and
finalized levels, `downgrade`/`upgrade --feature transaction.version=N` change the level (UpdateFeatures),
and `describe` shows the change. ``TOOLS_AGAINST_KAFKA=1`` runs it against Apache Kafka too, which proves
the expectations right."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oracle_fixture import QUICK_JVM_OPTS, kafka_cluster, run_kafka_tool
from samsa_fixture import start_samsa

FEATURES = "org.apache.kafka.tools.FeatureCommand"
TARGETS = ["kafka", "samsa"] if os.environ.get("TOOLS_AGAINST_KAFKA") == "1" else ["samsa"]


@pytest.fixture(params=TARGETS)
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "kafka":
        with kafka_cluster(nodes=1) as cluster:
            yield cluster.bootstrap
    else:
        s = start_samsa(ready_timeout=90.0)
        try:
            yield s.bootstrap
        finally:
            s.stop()


def features(bootstrap: str, *args: str) -> str:
    return run_kafka_tool(FEATURES, "--bootstrap-server", bootstrap, *args, jvm_opts=QUICK_JVM_OPTS).stdout


def described(bootstrap: str) -> dict[str, tuple[str, str, str]]:
    """feature -> (SupportedMinVersion, SupportedMaxVersion, FinalizedVersionLevel) as the tool prints them."""
    out = features(bootstrap, "describe")
    rows = re.findall(r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                      r"FinalizedVersionLevel: (\S+)", out)
    assert rows, out
    return {name: (lo, hi, level) for name, lo, hi, level in rows}


@pytest.mark.samsa
def test_kafka_features_describe_downgrade_upgrade(bootstrap: str) -> None:
    rows = described(bootstrap)
    assert rows["metadata.version"] == ("3.3-IV3", "4.4-IV2", "4.4-IV2")  # Kafka 4.4.0's
    assert rows["transaction.version"][:2] == ("0", "2")
    assert rows["group.version"] == ("0", "1", "1")
    assert rows["kraft.version"] == ("0", "1", "1")

    out = features(bootstrap, "downgrade", "--feature", "transaction.version=1")
    assert "transaction.version was downgraded to 1." in out, out
    assert described(bootstrap)["transaction.version"] == ("0", "2", "1")

    out = features(bootstrap, "upgrade", "--feature", "transaction.version=2")
    assert "transaction.version was upgraded to 2." in out, out
    assert described(bootstrap)["transaction.version"] == ("0", "2", "2")

    refused = run_kafka_tool(FEATURES, "--bootstrap-server", bootstrap, "upgrade", "--feature",
                             "transaction.version=3", jvm_opts=QUICK_JVM_OPTS, check=False)
    assert refused.returncode != 0
    assert "only supports versions 0-2" in refused.stdout + refused.stderr
