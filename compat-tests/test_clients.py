"""Each stock client runs its compat scenario program against each target (kafka, samsa).

The programs (clients/*_scenario.py, node/scenario.js, java/src/main/java/Scenario.java) create a
topic with 3 partitions, produce 30 keyed records, consume them back by assignment, read metadata
and list offsets by time, and check everything themselves (see clients/scenario_common.py). Here
we run them with a bounded timeout and also check that every client mapped the keys to the same
partitions as the Java client's default partitioner (murmur2).

Run against Kafka only: ``pytest compat-tests -m kafka``; against Samsa only: ``-m samsa``.
Missing tools (kcat, node_modules, the Java build) fail with "run make compat-deps".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from compat_targets import Target

sys.path.insert(0, str(Path(__file__).resolve().parent / "clients"))
from scenario_common import java_partition

HERE = Path(__file__).resolve().parent
PY = sys.executable
SCENARIO_TIMEOUT = 90  # inside each program; the subprocess gets 30 s more

CLIENTS: dict[str, list[str]] = {
    "kafka-python": [PY, str(HERE / "clients" / "kafka_python_scenario.py")],
    "aiokafka": [PY, str(HERE / "clients" / "aiokafka_scenario.py")],
    "confluent-kafka": [PY, str(HERE / "clients" / "confluent_scenario.py")],
    "kcat": [PY, str(HERE / "clients" / "kcat_scenario.py")],
    "kafkajs": ["node", str(HERE / "node" / "scenario.js")],
    "java": [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",  # a short-lived client: start fast
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-Dorg.slf4j.simpleLogger.logFile=System.err",
        "-cp",
        f"{HERE / 'java' / 'target' / 'classes'}:{HERE / 'java' / 'target' / 'lib' / '*'}",
        "Scenario",
    ],
}

PREREQUISITES: dict[str, list[Path | str]] = {
    "kcat": ["kcat"],
    "kafkajs": ["node", HERE / "node" / "node_modules" / "kafkajs" / "package.json"],
    "java": ["java", HERE / "java" / "target" / "classes" / "Scenario.class"],
}


def check_prerequisites(client: str) -> None:
    for need in PREREQUISITES.get(client, []):
        if isinstance(need, Path):
            ok = need.exists()
        else:
            ok = shutil.which(need) is not None
        if not ok:
            pytest.fail(f"{client}: {need} is missing: run `make compat-deps`", pytrace=False)


def run_scenario(client: str, bootstrap: str, topic: str) -> dict[str, object]:
    cmd = [*CLIENTS[client], bootstrap, topic]
    env = {**os.environ, "SCENARIO_TIMEOUT": str(SCENARIO_TIMEOUT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=HERE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=SCENARIO_TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        out, err = "", ""
        pytest.fail(f"{client} scenario did not exit within {SCENARIO_TIMEOUT + 30}s", pytrace=False)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    if proc.returncode != 0:
        lines = [ln for ln in err.splitlines() if ln.startswith(("MISMATCH", "ERROR"))]
        headline = lines[-1] if lines else f"{client} scenario exited {proc.returncode}"
        pytest.fail(
            f"{headline}\n$ {' '.join(cmd)}\n--- exit code {proc.returncode}\n--- stdout\n{out[-3000:]}"
            f"\n--- stderr\n{err[-6000:]}",
            pytrace=False,
        )
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.mark.timeout(SCENARIO_TIMEOUT + 60)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_scenario(broker: Target, client: str) -> None:
    check_prerequisites(client)
    topic = f"compat-{client}-{uuid.uuid4().hex[:8]}"
    result = run_scenario(client, broker.bootstrap, topic)

    assert result["client"] == client
    key_partition = result["key_partition"]
    assert isinstance(key_partition, dict)
    expected = {k: java_partition(k, 3) for k in key_partition}
    assert key_partition == expected, f"{client}: keys were not partitioned like the Java client (murmur2)"
    records = result["records"]
    assert isinstance(records, list) and len(records) == 30
