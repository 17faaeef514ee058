"""KIP-848's online migration over the wire against `samsa serve`: a classic group upgraded by a consumer-protocol
member, the classic member handing a partition over through JoinGroup/SyncGroup/Heartbeat, the mixed group
reloaded after a restart, and the downgrade when the consumer-protocol member leaves."""

from __future__ import annotations

import struct
from typing import Any

from samsa.broker.client import Connection
from samsa.broker.group.consumer_protocol import assigned_partitions, encode_assignment

from .conftest import Broker
from .test_heartbeat_wire import GROUP, heartbeat, join, owned_of
from .test_offsets_and_restart import commit

REBALANCE_IN_PROGRESS = 27


def subscription(owned: list[int]) -> bytes:
    """ConsumerProtocolSubscription v1 of topic "t", owning `owned` (a cooperative consumer's rejoin)."""
    out = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1)
    if not owned:
        return out + struct.pack(">i", 0)
    return out + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", len(owned)) + b"".join(
        struct.pack(">i", p) for p in owned)


def classic_join(conn: Connection, member_id: str, owned: list[int]) -> Any:
    return conn.request(11, {"group_id": GROUP, "session_timeout": 10000, "rebalance_timeout": 10000,
                             "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
                             "protocols": [{"name": "cooperative-sticky", "metadata": subscription(owned)}]},
                        version=5 if member_id else 3)


def classic_sync(conn: Connection, member_id: str, generation: int,
                 assignments: dict[str, bytes] | None = None) -> tuple[int, list[int]]:
    r = conn.request(14, {"group_id": GROUP, "generation_id": generation, "member_id": member_id,
                          "group_instance_id": None, "protocol_type": "consumer",
                          "protocol_name": "cooperative-sticky",
                          "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]},
                     version=5)
    parts = assigned_partitions(bytes(r.assignment)) or []
    return int(r.error_code.value), sorted(p for _, ps in parts for p in ps)


def classic_heartbeat(conn: Connection, member_id: str, generation: int) -> int:
    r = conn.request(12, {"group_id": GROUP, "generation_id": generation, "member_id": member_id,
                          "group_instance_id": None}, version=3)
    return int(r.error_code.value)


def group_type(conn: Connection) -> str:
    listed = conn.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
    assert [g.group_id for g in listed] == [GROUP]
    return str(listed[0].group_type)


def test_upgrade_hand_over_restart_and_downgrade(broker: Broker) -> None:
    broker.create_topic("t", 2)
    with broker.connect() as conn:
        first = classic_join(conn, "", [])
        a = first.member_id
        assert first.error_code.value == 0 and first.leader == a and first.generation_id == 1
        assert classic_sync(conn, a, 1, {a: encode_assignment(1, [("t", [0, 1])])}) == (0, [0, 1])
        assert classic_heartbeat(conn, a, 1) == 0 and group_type(conn) == "classic"
        # A consumer-protocol member joins: the group is upgraded; B waits for a partition A still holds.
        b = join(conn, "m-b", ["t"])
        assert b.error_code.value == 0 and b.member_epoch == 2 and owned_of(b) == []
        assert group_type(conn) == "consumer"
        assert commit(conn, a, 1, offset=3, version=8) == 0  # A commits with its generation
        assert classic_heartbeat(conn, a, 1) == REBALANCE_IN_PROGRESS
    broker.stop()
    broker.start()  # the mixed group comes back from __consumer_offsets
    with broker.connect() as conn:
        described = conn.request(69, {"group_ids": [GROUP], "include_authorized_operations": False},
                                 version=0).groups[0]
        assert described.error_code.value == 0 and sorted(m.member_id for m in described.members) == sorted([a, "m-b"])
        assert classic_heartbeat(conn, a, 1) == REBALANCE_IN_PROGRESS  # still a classic member, at its generation
        # A rejoins owning both, is told to keep one, gives the other up and rejoins at the new epoch.
        rejoined = classic_join(conn, a, [0, 1])
        assert (rejoined.error_code.value, rejoined.generation_id, rejoined.leader) == (0, 1, "")
        error, kept = classic_sync(conn, a, 1)
        assert error == 0 and len(kept) == 1
        assert classic_heartbeat(conn, a, 1) == REBALANCE_IN_PROGRESS
        rejoined = classic_join(conn, a, kept)
        assert (rejoined.error_code.value, rejoined.generation_id) == (0, 2)
        assert classic_sync(conn, a, 2) == (0, kept)
        assert classic_heartbeat(conn, a, 2) == 0
        got = heartbeat(conn, "m-b", 2, owned=[])
        assert got.error_code.value == 0 and [p for _, ps in owned_of(got) for p in ps] == sorted({0, 1} - set(kept))
        # B leaves: only the classic member remains, and the group is a classic group again, rebalancing.
        assert heartbeat(conn, "m-b", -1).error_code.value == 0
        assert group_type(conn) == "classic"
        assert classic_heartbeat(conn, a, 2) == REBALANCE_IN_PROGRESS
        again = classic_join(conn, a, kept)
        assert (again.error_code.value, again.leader, again.generation_id) == (0, a, 3)
        assert fetch_offset(conn) == 3


def fetch_offset(conn: Connection) -> int:
    r = conn.request(9, {"groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1,
                                     "topics": [{"name": "t", "partition_indexes": [0]}]}],
                         "require_stable": False}, version=9)
    return int(r.groups[0].topics[0].partitions[0].committed_offset)
