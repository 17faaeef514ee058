"""DeleteGroups v3 (Kafka 4.4: an error_message per group) on a broker in this process with ACLs on.

Kafka 4.4 leaves the message null for every outcome Samsa can give (deleted, GROUP_ID_NOT_FOUND,
NON_EMPTY_GROUP, GROUP_AUTHORIZATION_FAILED); only its streams topology description plugin's failures carry
one. A group named twice is answered once (KafkaApis takes the distinct names)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.broker import Broker
from samsa.broker.group.coordinator import TIMER_RESOLUTION_MS, JoinRequest
from samsa.kproto.errors import ErrorCode
from tests.acl.harness import ADMIN, MALLORY, acl_broker, call, create_topic

TOPIC = "t"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = acl_broker(tmp_path)
    create_topic(b, TOPIC)
    yield b
    b.close()


def commit_as_admin(broker: Broker, group: str) -> None:
    """An offset committed outside any generation: the group exists, Empty."""
    r = call(broker, 8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                                {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                 "committed_metadata": ""}]}]}, ADMIN)
    assert r.topics[0].partitions[0].error_code == ErrorCode.none


def join(broker: Broker, group: str) -> None:
    """A member joins through the coordinator (no initial delay): the group is not Empty."""
    now_ms = int(time.time() * 1000)
    pending = broker.groups.coordinator.join_group(
        JoinRequest(group, "", None, "c", "/127.0.0.1", 10_000, 30_000, "consumer", (("range", b"m"),),
                    require_known_member_id=False), now_ms)
    broker.groups.on_tick(now_ms + TIMER_RESOLUTION_MS)  # the initial join's timer, as the service fires it
    assert broker.groups.persist() == ErrorCode.none
    assert pending.result is not None and pending.result.error == ErrorCode.none


def results(r: Any) -> list[tuple[str, ErrorCode, str | None]]:
    return [(x.group_id, ErrorCode(x.error_code), x.error_message) for x in r.results]


def test_v3_answers_each_group_once_with_a_null_message(broker: Broker) -> None:
    commit_as_admin(broker, "idle")
    join(broker, "busy")
    r = call(broker, 42, 3, {"groups_names": ["idle", "busy", "nope", "idle"]}, ADMIN)
    assert results(r) == [("idle", ErrorCode.none, None), ("busy", ErrorCode.non_empty_group, None),
                          ("nope", ErrorCode.group_id_not_found, None)]
    again = call(broker, 42, 3, {"groups_names": ["idle"]}, ADMIN)
    assert results(again) == [("idle", ErrorCode.group_id_not_found, None)]


def test_v3_refuses_an_unauthorized_group_with_a_null_message(broker: Broker) -> None:
    commit_as_admin(broker, "idle")
    r = call(broker, 42, 3, {"groups_names": ["idle", "nope"]}, MALLORY)
    assert results(r) == [("idle", ErrorCode.group_authorization_failed, None),
                          ("nope", ErrorCode.group_authorization_failed, None)]
    assert results(call(broker, 42, 3, {"groups_names": ["idle"]}, ADMIN)) == [("idle", ErrorCode.none, None)]


def test_v2_answers_a_duplicate_once_too(broker: Broker) -> None:
    commit_as_admin(broker, "idle")
    r = call(broker, 42, 2, {"groups_names": ["idle", "idle"]}, ADMIN)
    assert [(x.group_id, ErrorCode(x.error_code)) for x in r.results] == [("idle", ErrorCode.none)]
