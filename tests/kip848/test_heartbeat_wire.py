"""ConsumerGroupHeartbeat and ConsumerGroupDescribe over the wire against a real `samsa serve`."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.broker.client import Connection

from .conftest import Broker

GROUP = "g848"


def heartbeat(conn: Connection, member_id: str, epoch: int, *, topics: list[str] | None = None,
              owned: list[tuple[uuid.UUID, list[int]]] | None = None, instance: str | None = None,
              rebalance_timeout_ms: int = -1, regex: str | None = None, assignor: str | None = None,
              group: str = GROUP) -> Any:
    return conn.request(68, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance,
        "rebalance_timeout": rebalance_timeout_ms, "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
        "server_assignor": assignor,
        "topic_partitions": None if owned is None else [{"topic_id": t, "partitions": ps} for t, ps in owned],
    }, version=1)


def join(conn: Connection, member_id: str, topics: list[str], **kw: Any) -> Any:
    return heartbeat(conn, member_id, 0, topics=topics, owned=[], rebalance_timeout_ms=30000, **kw)


def owned_of(response: Any) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t.topic_id, list(t.partitions)) for t in response.assignment.topic_partitions]


def count(response: Any) -> int:
    return sum(len(t.partitions) for t in response.assignment.topic_partitions)


def test_two_members_split_partitions_with_revocation_first(broker: Broker) -> None:
    broker.create_topic("t1", 4)
    with broker.connect() as conn:
        a = join(conn, "member-a", ["t1"])
        assert a.error_code.value == 0 and a.member_epoch > 0 and count(a) == 4
        a_owned = owned_of(a)
        b = join(conn, "member-b", ["t1"])
        assert b.error_code.value == 0
        # b may not get anything a still owns: nothing yet.
        assert count(b) == 0
        # a is asked to revoke two partitions and keeps its epoch until it does.
        a2 = heartbeat(conn, "member-a", a.member_epoch, owned=a_owned)
        assert a2.error_code.value == 0 and count(a2) == 2 and a2.member_epoch == a.member_epoch
        described = conn.request(69, {"group_ids": [GROUP], "include_authorized_operations": False}, version=1)
        assert described.groups[0].group_state == "Reconciling"
        a3 = heartbeat(conn, "member-a", a2.member_epoch, owned=owned_of(a2))
        assert a3.error_code.value == 0 and a3.member_epoch == b.member_epoch
        b2 = heartbeat(conn, "member-b", b.member_epoch, owned=[])
        assert b2.error_code.value == 0 and count(b2) == 2
        mine = {p for _, ps in owned_of(a3 if a3.assignment else a2) for p in ps}
        theirs = {p for _, ps in owned_of(b2) for p in ps}
        assert mine | theirs == {0, 1, 2, 3} and not mine & theirs
        described = conn.request(69, {"group_ids": [GROUP], "include_authorized_operations": False}, version=1)
        d = described.groups[0]
        assert d.error_code.value == 0 and d.group_state == "Stable" and d.assignor_name == "uniform"
        assert {m.member_id for m in d.members} == {"member-a", "member-b"}
        # a leaves: b gets everything on its next heartbeat.
        left = heartbeat(conn, "member-a", -1)
        assert left.error_code.value == 0 and left.member_epoch == -1
        b3 = heartbeat(conn, "member-b", b2.member_epoch, owned=owned_of(b2))
        assert count(b3) == 4


def test_errors_as_kafka_answers_them(broker: Broker) -> None:
    broker.create_topic("t2", 2)
    with broker.connect() as conn:
        assert heartbeat(conn, "", 0, topics=["t2"], owned=[], rebalance_timeout_ms=1000).error_code.value == 42
        assert heartbeat(conn, "m", 0, topics=["t2"], owned=[]).error_code.value == 42  # no rebalance timeout
        assert heartbeat(conn, "m", 3, group="nope").error_code.value == 69  # GROUP_ID_NOT_FOUND
        r = join(conn, "m1", ["t2"])
        assert heartbeat(conn, "stranger", 1).error_code.value == 25  # UNKNOWN_MEMBER_ID
        assert heartbeat(conn, "m1", r.member_epoch + 5).error_code.value == 110  # FENCED_MEMBER_EPOCH
        assert join(conn, "m2", ["t2"], assignor="nosuch").error_code.value == 112  # UNSUPPORTED_ASSIGNOR
        assert heartbeat(conn, "m3", 0, regex="(", owned=[], rebalance_timeout_ms=1000).error_code.value == 128


def test_static_member_rejoins_with_its_partitions(broker: Broker) -> None:
    broker.create_topic("t3", 3)
    with broker.connect() as conn:
        a = join(conn, "s1", ["t3"], instance="i1")
        assert count(a) == 3
        # The instance id is taken while its member is in the group.
        assert join(conn, "s2", ["t3"], instance="i1").error_code.value == 111  # UNRELEASED_INSTANCE_ID
        away = heartbeat(conn, "s1", -2, instance="i1")
        assert away.error_code.value == 0 and away.member_epoch == -2
        back = join(conn, "s2", ["t3"], instance="i1")
        assert back.error_code.value == 0 and count(back) == 3 and back.member_epoch == a.member_epoch


def test_regex_subscription(broker: Broker) -> None:
    broker.create_topic("rx-a", 1)
    broker.create_topic("rx-b", 2)
    broker.create_topic("other", 1)
    with broker.connect() as conn:
        r = heartbeat(conn, "m", 0, regex="rx-.*", owned=[], rebalance_timeout_ms=1000)
        assert r.error_code.value == 0 and count(r) == 3
