"""kafka-acls.sh (org.apache.kafka.tools.AclCommand, the reference's) against a live Samsa with the ACL authorizer on:
adding, listing and removing ACLs, as an operator runs it, and the Java producer refused by one. Every step
checks what the tool prints.

The first broker runs with super.users=User:ANONYMOUS, the way the first ACLs are written on a cluster without
authentication (Kafka's own bootstrap); once TLS / SASL land, the same steps can run as a named admin."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle_fixture import QUICK_JVM_OPTS, run_kafka_tool
from samsa_fixture import SamsaProcess, samsa_broker

ACLS = "org.apache.kafka.tools.AclCommand"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def samsa() -> Iterator[SamsaProcess]:
    with samsa_broker(extra_args=["--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
                                  "--override", "super.users=User:ANONYMOUS"]) as s:
        yield s


def acls(samsa: SamsaProcess, *args: str) -> str:
    done = run_kafka_tool(ACLS, "--bootstrap-server", samsa.bootstrap, *args, jvm_opts=QUICK_JVM_OPTS, timeout=120)
    return done.stdout


def test_kafka_acls_adds_lists_and_removes(samsa: SamsaProcess) -> None:
    added = acls(samsa, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                 "--topic", "orders")
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added
    acls(samsa, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "Write",
         "--topic", "pay-", "--resource-pattern-type", "prefixed")
    acls(samsa, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g1")
    acls(samsa, "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite", "--cluster")

    listed = acls(samsa, "--list")
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    assert "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)" in listed
    assert "(principal=User:mallory, host=10.0.0.9, operation=WRITE, permissionType=DENY)" in listed
    assert "ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)" in listed
    assert "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)" in listed
    assert "operation=IDEMPOTENT_WRITE" in listed

    # --list --topic pay-in matches what applies to that topic: the prefixed ACL (patternType MATCH)
    matching = acls(samsa, "--list", "--topic", "pay-in", "--resource-pattern-type", "match")
    assert "name=pay-, patternType=PREFIXED" in matching and "name=orders" not in matching

    acls(samsa, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    after = acls(samsa, "--list", "--topic", "orders")
    assert "operation=DESCRIBE" in after and "operation=READ" not in after

    acls(samsa, "--remove", "--force", "--topic", "orders")
    acls(samsa, "--remove", "--force", "--topic", "pay-", "--resource-pattern-type", "prefixed")
    acls(samsa, "--remove", "--force", "--group", "g1")
    acls(samsa, "--remove", "--force", "--cluster")
    assert "ResourcePattern" not in acls(samsa, "--list")


PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
TOPICS = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture
def open_samsa() -> Iterator[SamsaProcess]:
    """ACLs on, no super user; allow.everyone.if.no.acl.found lets the first ACLs (and everything they do
    not name) in."""
    with samsa_broker(extra_args=["--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
                                  "--override", "allow.everyone.if.no.acl.found=true"]) as s:
        yield s


def test_the_java_producer_is_refused_a_topic_its_principal_may_not_write(open_samsa: SamsaProcess) -> None:
    def tool(main_class: str, *args: str, input: str | None = None, check: bool = True) -> Any:
        return run_kafka_tool(main_class, "--bootstrap-server", open_samsa.bootstrap, *args, input=input,
                              check=check, jvm_opts=QUICK_JVM_OPTS, timeout=120)

    for topic in ("open", "secret"):
        tool(TOPICS, "--create", "--topic", topic, "--partitions", "1")
    tool(ACLS, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--topic", "secret")
    tool(PRODUCER, "--topic", "open", input="a\nb\n")
    refused = tool(PRODUCER, "--topic", "secret", "--command-property", "max.block.ms=10000",
                   "--command-property", "delivery.timeout.ms=10000", "--command-property", "request.timeout.ms=5000",
                   input="c\n", check=False)
    assert "TopicAuthorizationException" in refused.stderr + refused.stdout, refused.stderr[-2000:]
    # allow.everyone.if.no.acl.found no longer applies to "secret" (an ACL names it) and none allows
    # DESCRIBE: the topic is not listed, as Kafka's StandardAuthorizer decides
    assert tool(TOPICS, "--list").stdout.split() == ["open"]
