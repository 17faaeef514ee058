"""The ACL matrix (acl_matrix.py) against the reference Kafka with its StandardAuthorizer and against Samsa: the same
users, ACLs and requests must get the same error codes and the same Metadata visibility.

One Kafka JVM and one Samsa process, module-scoped, each with a SASL_PLAINTEXT listener besides PLAINTEXT.
A failure prints the diff (``--- kafka`` / ``+++ samsa``), one key per ``user / API resource``;
``DIFF_DUMP=DIR`` writes both raw outcomes, ``DIFF_STRICT=1`` does not mask normalize.KNOWN_DIFFERENCES.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oracle_fixture import free_ports, kafka_cluster
from samsa_fixture import SamsaProcess, samsa_broker

from differential import acl_matrix, kip1242
from differential.framework import compare, dumps
from differential.normalize import KNOWN_DIFFERENCES

pytestmark = [pytest.mark.differential, pytest.mark.kafka, pytest.mark.samsa]

NAME = "acl_matrix"


@pytest.fixture(scope="module")
def kafka_sasl() -> Iterator[str]:
    with kafka_cluster(1, extra_listeners={acl_matrix.LISTENER: "SASL_PLAINTEXT"},
                       overrides=dict(acl_matrix.broker_settings())) as cluster:
        yield cluster.listener_bootstrap(acl_matrix.LISTENER)


@pytest.fixture(scope="module")
def samsa_sasl() -> Iterator[str]:
    plain, sasl = free_ports(2)
    settings = {**acl_matrix.broker_settings(),
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"}
    args = [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
    with samsa_broker(port=plain, extra_args=args) as s:
        assert isinstance(s, SamsaProcess)
        yield f"127.0.0.1:{sasl}"


def test_acl_matrix_same_errors_and_visibility(kafka_sasl: str, samsa_sasl: str) -> None:
    t0 = int(time.time() * 1000)
    outcomes: dict[str, Any] = {"samsa": acl_matrix.run(samsa_sasl), "kafka": acl_matrix.run(kafka_sasl)}
    if os.environ.get("DIFF_DUMP"):
        out = Path(os.environ["DIFF_DUMP"])
        out.mkdir(parents=True, exist_ok=True)
        for target, outcome in outcomes.items():
            (out / f"{NAME}.{target}.json").write_text(dumps(outcome))
    c = compare(NAME, outcomes["kafka"], outcomes["samsa"], t0=t0, now=int(time.time() * 1000),
                strict=os.environ.get("DIFF_STRICT") == "1")
    problems = []
    if not c.equal:
        problems.append(f"Samsa's answers under ACLs differ from Kafka's:\n{c.report()}")
    if c.fixed:
        reasons = dict(KNOWN_DIFFERENCES.get(NAME, []))
        problems.append("these known differences are gone -- remove them from normalize.KNOWN_DIFFERENCES: "
                        + "; ".join(f"{p} ({reasons[p]})" for p in c.fixed))
    assert not problems, "\n\n".join(problems)


def test_api_versions_v5_before_and_after_sasl_authentication(kafka_sasl: str, samsa_sasl: str) -> None:
    """KIP-1242 on a SASL listener (kip1242.api_versions_v5_sasl): Kafka checks the cluster and node named only
    once the client authenticated."""
    t0 = int(time.time() * 1000)
    outcomes = {target: kip1242.api_versions_v5_sasl(bootstrap, "alice", acl_matrix.USERS["alice"])
                for target, bootstrap in (("samsa", samsa_sasl), ("kafka", kafka_sasl))}
    c = compare("api_versions_v5_sasl", outcomes["kafka"], outcomes["samsa"], t0=t0, now=int(time.time() * 1000))
    assert c.equal, f"Samsa's answers differ from Kafka's:\n{c.report()}"
    errors = {k: v["error"] for k, v in outcomes["kafka"].items() if isinstance(v, dict)}
    assert errors == {"before_auth_invalid": "INVALID_REQUEST(42)", "before_auth_other_cluster": "NONE(0)",
                      "after_auth_other_cluster": "REBOOTSTRAP_REQUIRED(129)",
                      "after_auth_other_node": "REBOOTSTRAP_REQUIRED(129)", "after_auth_own": "NONE(0)",
                      "after_auth_invalid": "INVALID_REQUEST(42)"}, errors  # what the scenario shows of Kafka


def test_the_matrix_covers_every_user_and_denies_something(kafka_sasl: str) -> None:
    """A guard on the matrix itself (Kafka only): each user is both allowed and denied somewhere."""
    outcome = acl_matrix.run(kafka_sasl)
    for user in ("alice", "bob"):
        text = dumps(outcome[user])
        assert "AUTHORIZATION_FAILED" in text, user
        assert '"error_code": "NONE(0)"' in text, user
