"""A group's own configs (the GROUP config resource) apply to its consumer-protocol members, as in Kafka
(GroupMetadataManager reads consumer.session.timeout.ms and consumer.heartbeat.interval.ms from the
GroupConfigManager at each heartbeat, else the broker's group.consumer.* settings)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection

from .conftest import HEARTBEAT_MS, Broker
from .test_heartbeat_wire import heartbeat, join

# The broker's own session is the longest Kafka allows, so a member expiring in this test's time can
# only be its group's short consumer.session.timeout.ms; the floors are lowered to allow that value.
BROKER_SESSION_MS = 60_000
EXTRA = (f"group.consumer.session.timeout.ms={BROKER_SESSION_MS}", "group.consumer.min.session.timeout.ms=1000",
         "group.consumer.min.heartbeat.interval.ms=100")


@pytest.fixture
def long_session_broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data", launcher.free_port(), extra_overrides=EXTRA)
    b.start()
    yield b
    b.stop()


def alter_group(conn: Connection, group: str, **configs: str) -> None:
    r = conn.request(44, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": False}, version=1)
    assert r.responses[0].error_code.value == 0, r.responses[0].error_message


def members(conn: Connection, group: str) -> set[str]:
    r = conn.request(69, {"group_ids": [group], "include_authorized_operations": False}, version=1)
    assert r.groups[0].error_code.value == 0
    return {m.member_id for m in r.groups[0].members}


def test_group_heartbeat_interval_is_in_the_heartbeat_response(long_session_broker: Broker) -> None:
    broker = long_session_broker
    broker.create_topic("hb", 2)
    with broker.connect() as conn:
        alter_group(conn, "tuned", consumer_heartbeat_interval_ms="700")
        tuned = join(conn, "a", ["hb"], group="tuned")
        plain = join(conn, "b", ["hb"], group="plain")
        assert (tuned.error_code.value, plain.error_code.value) == (0, 0)
        assert tuned.heartbeat_interval == timedelta(milliseconds=700)
        assert plain.heartbeat_interval == timedelta(milliseconds=HEARTBEAT_MS)  # the broker's
        # A change applies from the member's next heartbeat; deleting it brings back the broker's value.
        alter_group(conn, "tuned", consumer_heartbeat_interval_ms="900")
        again = heartbeat(conn, "a", tuned.member_epoch, group="tuned")
        assert again.error_code.value == 0 and again.heartbeat_interval == timedelta(milliseconds=900)
        r = conn.request(44, {"resources": [{"resource_type": 32, "resource_name": "tuned", "configs": [
            {"name": "consumer.heartbeat.interval.ms", "config_operation": 1, "value": None}]}],
            "validate_only": False}, version=1)
        assert r.responses[0].error_code.value == 0
        last = heartbeat(conn, "a", tuned.member_epoch, group="tuned")
        assert last.error_code.value == 0 and last.heartbeat_interval == timedelta(milliseconds=HEARTBEAT_MS)


def test_group_session_timeout_expires_a_silent_member(long_session_broker: Broker) -> None:
    broker = long_session_broker
    broker.create_topic("st", 2)
    with broker.connect() as conn:
        alter_group(conn, "short", consumer_session_timeout_ms="1500", consumer_heartbeat_interval_ms="500")
        assert join(conn, "quiet", ["st"], group="short").error_code.value == 0
        assert join(conn, "quiet", ["st"], group="long").error_code.value == 0
        assert members(conn, "short") == {"quiet"}
        # Never heartbeats again: fenced after its group's 1.5 s, long before the broker's 60 s.
        deadline = time.monotonic() + 30.0
        while members(conn, "short") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert members(conn, "short") == set()
        assert members(conn, "long") == {"quiet"}  # the broker's session: still there
        assert heartbeat(conn, "quiet", 1, group="short").error_code.value == 25  # UNKNOWN_MEMBER_ID


def describe_epochs(conn: Connection, group: str) -> tuple[str, int, int]:
    g = conn.request(69, {"group_ids": [group], "include_authorized_operations": False}, version=1).groups[0]
    return g.group_state, g.group_epoch, g.assignment_epoch


def test_assignment_interval_of_the_group_and_of_the_broker(broker: Broker) -> None:
    """KIP-1263: with a long consumer.assignment.interval.ms a second member waits in an Assigning group; setting
    it to 0 (the group's own, then the broker's dynamic group.consumer.assignment.interval.ms) computes at once."""
    broker.create_topic("batched", 2)
    with broker.connect() as conn:
        alter_group(conn, "slow", consumer_assignment_interval_ms="15000")
        a = join(conn, "a", ["batched"], group="slow")
        assert a.member_epoch == 2 and len(a.assignment.topic_partitions[0].partitions) == 2
        b = join(conn, "b", ["batched"], group="slow")
        assert b.error_code.value == 0 and b.member_epoch == 2 and not b.assignment.topic_partitions
        assert describe_epochs(conn, "slow") == ("Assigning", 3, 2)
        alter_group(conn, "slow", consumer_assignment_interval_ms="0")
        a2 = heartbeat(conn, "a", 2, group="slow", owned=[(t.topic_id, list(t.partitions))
                                                          for t in a.assignment.topic_partitions])
        assert a2.error_code.value == 0 and describe_epochs(conn, "slow") == ("Reconciling", 3, 3)
        # The broker's interval is dynamic: 15 s for every group without its own.
        r = conn.request(44, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "group.consumer.assignment.interval.ms", "config_operation": 0, "value": "15000"}]}],
            "validate_only": False}, version=1)
        assert r.responses[0].error_code.value == 0, r.responses[0].error_message
        join(conn, "c", ["batched"], group="plain-batched")  # a new group's first target: at once
        assert describe_epochs(conn, "plain-batched") == ("Stable", 2, 2)
        d = join(conn, "d", ["batched"], group="plain-batched")
        assert d.member_epoch == 2 and describe_epochs(conn, "plain-batched") == ("Assigning", 3, 2)
