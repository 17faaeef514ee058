"""Differential test of a static quorum's kraft.version (KIP-853): a one-node Kafka 4.4.0 configured with
controller.quorum.voters and formatted without --standalone, and a one-node Samsa started with
--controller-quorum, are both at kraft.version 0. Same answers from both: ApiVersions lists no finalized
kraft.version, DescribeQuorum shows the voter without a directory id, AddRaftVoter / RemoveRaftVoter are
refused UNSUPPORTED_VERSION, UpdateFeatures kraft.version=1 (validate_only, a downgrade to the level in force,
then the upgrade) succeeds; after it kraft.version 1 is finalized, the voter has its directory id, the upgrade
again changes nothing, and AddRaftVoter gets past the kraft.version check. (The scenarios of
test_differential.py run on the --standalone Kafka and a single Samsa node: kraft.version 1 from the start.)"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oracle_fixture import free_ports, kafka_cluster
from samsa_fixture import SamsaProcess, samsa_broker

from differential.framework import compare, dumps, err
from samsa.broker.client import Connection

pytestmark = [pytest.mark.differential, pytest.mark.kafka, pytest.mark.samsa]

NAME = "static_quorum"
ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def kafka_static() -> Iterator[str]:
    with kafka_cluster(1, static_quorum=True) as cluster:
        yield cluster.bootstrap


@pytest.fixture(scope="module")
def samsa_static() -> Iterator[str]:
    port, controller = free_ports(2)
    args = ["--node-id", "1", "--controller-quorum", f"1@127.0.0.1:{controller}",
            "--controller-listen", f"127.0.0.1:{controller}"]
    with samsa_broker(port=port, extra_args=args) as s:
        assert isinstance(s, SamsaProcess)
        yield f"127.0.0.1:{port}"


def _run(bootstrap: str) -> dict[str, Any]:
    host, port = bootstrap.rsplit(":", 1)
    with Connection(host, int(port), client_id="samsa-differential", timeout_s=40) as c:
        def finalized() -> Any:
            r = c.request(18, {"client_software_name": "d", "client_software_version": "1"}, version=4)
            return ({f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
                    .get("kraft.version"), [(f.name, f.min_version, f.max_version) for f in r.supported_features
                                            if f.name == "kraft.version"])

        def voters() -> list[tuple[int, bool]]:
            r = c.request(55, {"topics": [{"topic_name": "__cluster_metadata",
                                           "partitions": [{"partition_index": 0}]}]}, version=2)
            return [(int(v.replica_id), v.replica_directory_id not in (None, ZERO))
                    for v in r.topics[0].partitions[0].current_voters]

        def add() -> tuple[str, str | None]:
            r = c.request(80, {"cluster_id": None, "timeout": 10_000, "voter_id": 7, "voter_directory_id": uuid.uuid4(),
                               "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}]}, version=1)
            return err(r), r.error_message

        def remove(voter_id: int) -> tuple[str, str | None]:
            r = c.request(81, {"cluster_id": None, "voter_id": voter_id, "voter_directory_id": uuid.uuid4()},
                          version=0)
            return err(r), r.error_message

        def update(level: int, validate_only: bool, kind: int = 1) -> Any:
            r = c.request(57, {"timeout": 30_000, "validate_only": validate_only, "feature_updates": [
                {"feature": "kraft.version", "max_version_level": level, "upgrade_type": kind}]}, version=1)
            return err(r), r.error_message, [(x.feature, err(x), x.error_message) for x in r.results]

        out: dict[str, Any] = {"finalized": finalized(), "voters": voters(), "add": add(), "remove": remove(1),
                               "remove_unknown": remove(99), "upgrade_validate_only": update(1, True)}
        out["finalized_after_validate_only"] = finalized()
        out["downgrade_to_the_level_in_force"] = update(0, True, 2)
        out["upgrade"] = update(1, False)
        deadline = time.monotonic() + 30
        while finalized()[0] is None and time.monotonic() < deadline:
            time.sleep(0.1)  # (Kafka's ApiVersions follows its metadata cache: a moment after the answer)
        out["finalized_after_upgrade"] = finalized()
        out["voters_after_upgrade"] = voters()
        out["upgrade_again"] = update(1, False)
        out["add_after_upgrade"] = add()[0]  # past the kraft.version check: its listener (port 1) is not there
        return out


def test_a_static_quorum_runs_kraft_version_0_until_upgraded(kafka_static: str, samsa_static: str) -> None:
    t0 = int(time.time() * 1000)
    outcomes = {"kafka": _run(kafka_static), "samsa": _run(samsa_static)}
    if os.environ.get("DIFF_DUMP"):
        out = Path(os.environ["DIFF_DUMP"])
        out.mkdir(parents=True, exist_ok=True)
        for target, outcome in outcomes.items():
            (out / f"{NAME}.{target}.json").write_text(dumps(outcome))
    c = compare(NAME, outcomes["kafka"], outcomes["samsa"], t0=t0, now=int(time.time() * 1000))
    assert c.equal, c.report()
    assert outcomes["kafka"]["finalized"][0] is None and outcomes["kafka"]["finalized_after_upgrade"][0] == (1, 1)
