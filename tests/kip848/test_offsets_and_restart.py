"""Offsets of a consumer group under member epochs, the group in ListGroups/DescribeGroups, and the group
reloaded from __consumer_offsets after a restart."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection

from .conftest import Broker
from .test_heartbeat_wire import GROUP, count, heartbeat, join, owned_of


def commit(conn: Connection, member_id: str, epoch: int, offset: int = 5, version: int = 9,
           partition: int = 0) -> int:
    r = conn.request(8, {"group_id": GROUP, "generation_id_or_member_epoch": epoch, "member_id": member_id,
                         "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                             {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                              "committed_metadata": ""}]}]}, version=version)
    return int(r.topics[0].partitions[0].error_code.value)


def fetch(conn: Connection, member_id: str | None, epoch: int) -> Any:
    return conn.request(9, {"groups": [{"group_id": GROUP, "member_id": member_id, "member_epoch": epoch,
                                        "topics": [{"name": "t", "partition_indexes": [0]}]}],
                            "require_stable": False}, version=9).groups[0]


def test_offsets_follow_member_epochs(broker: Broker) -> None:
    broker.create_topic("t", 2)
    with broker.connect() as conn:
        a = join(conn, "m-a", ["t"])
        assert commit(conn, "m-a", a.member_epoch) == 0
        assert commit(conn, "m-a", a.member_epoch - 1) == 113  # STALE_MEMBER_EPOCH
        assert commit(conn, "m-a", a.member_epoch + 1) == 113
        assert commit(conn, "nobody", a.member_epoch) == 25  # UNKNOWN_MEMBER_ID
        assert commit(conn, "m-a", a.member_epoch, version=8) == 35  # members of the consumer protocol use v9+
        assert commit(conn, "", -1) == 25  # an admin commit while the group has members
        got = fetch(conn, "m-a", a.member_epoch)
        assert got.error_code.value == 0 and got.topics[0].partitions[0].committed_offset == 5
        assert fetch(conn, "m-a", a.member_epoch + 3).error_code.value == 113
        assert fetch(conn, "nobody", 1).error_code.value == 25
        assert fetch(conn, None, -1).topics[0].partitions[0].committed_offset == 5  # admin tools
        listed = conn.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
            (GROUP, "consumer", "Stable", "consumer")]
        assert conn.request(16, {"states_filter": [], "types_filter": ["classic"]}, version=5).groups == ()
        described = conn.request(15, {"groups": [GROUP], "include_authorized_operations": False}, version=6)
        assert described.groups[0].error_code.value == 69 and described.groups[0].group_state == "Dead"
        # Leaving empties the group: an admin may commit, and DeleteGroups removes it.
        assert heartbeat(conn, "m-a", -1).error_code.value == 0
        assert commit(conn, "", -1, offset=7) == 0
        # An administrative reset of an empty consumer group is audited like a classic group's.
        history = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "groups", "history",
                                  "--bootstrap-server", broker.bootstrap, "--json", "--group", GROUP],
                                 capture_output=True, text=True, timeout=60)
        assert history.returncode == 0, history.stderr
        assert [c["to"] for line in history.stdout.splitlines() for c in json.loads(line)["changes"]] == [7]
        deleted = conn.request(42, {"groups_names": [GROUP]}, version=2)
        assert deleted.results[0].error_code.value == 0
        assert conn.request(16, {"states_filter": [], "types_filter": []}, version=5).groups == ()


def test_the_group_survives_a_restart(broker: Broker) -> None:
    broker.create_topic("t", 4)
    with broker.connect() as conn:
        a = join(conn, "m-a", ["t"], instance="ia")
        b = join(conn, "m-b", ["t"])
        a2 = heartbeat(conn, "m-a", a.member_epoch, owned=owned_of(a))
        a3 = heartbeat(conn, "m-a", a2.member_epoch, owned=owned_of(a2))
        b2 = heartbeat(conn, "m-b", b.member_epoch, owned=[])
        assert count(a2) == 2 and count(b2) == 2
        assert commit(conn, "m-b", b2.member_epoch, offset=11) == 0
        before = conn.request(69, {"group_ids": [GROUP], "include_authorized_operations": False}, version=1).groups[0]
    broker.stop()
    broker.start()
    with broker.connect() as conn:
        after = conn.request(69, {"group_ids": [GROUP], "include_authorized_operations": False}, version=1).groups[0]
        assert after.error_code.value == 0
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
            before.group_epoch, before.assignment_epoch, before.group_state)
        assert sorted((m.member_id, m.instance_id, m.member_epoch, m.assignment) for m in after.members) == sorted(
            (m.member_id, m.instance_id, m.member_epoch, m.assignment) for m in before.members)
        # The members carry on with their epochs: no fencing, no rebalance.
        assert heartbeat(conn, "m-a", a3.member_epoch, owned=owned_of(a2)).error_code.value == 0
        again = heartbeat(conn, "m-b", b2.member_epoch, owned=owned_of(b2))
        assert again.error_code.value == 0 and again.member_epoch == b2.member_epoch
        assert fetch(conn, "m-b", b2.member_epoch).topics[0].partitions[0].committed_offset == 11


def test_commits_are_checked_against_assignment_epochs_across_a_restart(broker: Broker) -> None:
    """KIP-1251: a member that has not heard of its new epoch yet commits what it held before; the partition it
    was given at the new epoch needs that epoch. The epochs come back from __consumer_offsets after a restart."""
    broker.create_topic("t", 2)
    with broker.connect() as conn:
        a = join(conn, "m-a", ["t"])
        assert count(a) == 2
        grown = conn.request(37, {"topics": [{"name": "t", "count": 3, "assignments": None}], "timeout_ms": 30000,
                                  "validate_only": False})
        assert grown.results[0].error_code.value == 0
        a2 = heartbeat(conn, "m-a", a.member_epoch, owned=owned_of(a))
        assert a2.error_code.value == 0 and count(a2) == 3 and a2.member_epoch > a.member_epoch
        assert commit(conn, "m-a", a.member_epoch, partition=0) == 0
        assert commit(conn, "m-a", a.member_epoch, partition=2) == 113  # STALE_MEMBER_EPOCH
        assert commit(conn, "m-a", a2.member_epoch, partition=2) == 0
        # A partition whose metadata is too large is answered so without the epoch check (Kafka skips it too).
        both = conn.request(8, {"group_id": GROUP, "generation_id_or_member_epoch": a.member_epoch, "member_id": "m-a",
                                "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                                    {"partition_index": p, "committed_offset": 1, "committed_leader_epoch": -1,
                                     "committed_metadata": m} for p, m in ((0, ""), (2, "x" * 5000))]}]}, version=9)
        assert [(q.partition_index, q.error_code.value) for q in both.topics[0].partitions] == [(0, 0), (2, 12)]
    broker.stop()
    broker.start()
    with broker.connect() as conn:
        assert commit(conn, "m-a", a.member_epoch, partition=1) == 0
        assert commit(conn, "m-a", a.member_epoch, partition=2) == 113
        assert commit(conn, "m-a", a2.member_epoch + 1, partition=0) == 113


def classic_join(conn: Connection, timeout_ms: int = 10000) -> Any:
    sub = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0: topic "t"
    return conn.request(11, {"group_id": GROUP, "session_timeout": timeout_ms, "rebalance_timeout": timeout_ms,
                             "member_id": "", "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": sub}]}, version=3)


def test_classic_and_consumer_protocols_share_a_group_id(broker: Broker) -> None:
    broker.create_topic("t", 2)
    with broker.connect() as conn:
        a = join(conn, "m-a", ["t"])
        assert commit(conn, "m-a", a.member_epoch, offset=4) == 0
        # A classic member joins the consumer group as one of its members (KIP-848's online migration): answered
        # at once, its epoch as the generation and no leader, so it syncs as a follower.
        c = classic_join(conn)
        assert c.error_code.value == 0 and c.generation_id >= a.member_epoch and c.leader == "" and c.member_id
        assert classic_leave(conn, c.member_id) == 0
        assert heartbeat(conn, "m-a", -1).error_code.value == 0
        # Empty, the group turns classic, and keeps its offsets.
        joined = classic_join(conn)
        assert joined.error_code.value == 0 and joined.member_id
        listed = conn.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
        assert [(g.group_id, g.group_type) for g in listed] == [(GROUP, "classic")]
        assert fetch(conn, None, -1).topics[0].partitions[0].committed_offset == 4
        # A consumer-protocol member joining the classic group that has members upgrades it.
        assert join(conn, "m-b", ["t"]).error_code.value == 0
        listed = conn.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
        assert [(g.group_id, g.group_type) for g in listed] == [(GROUP, "consumer")]
        assert fetch(conn, None, -1).topics[0].partitions[0].committed_offset == 4


@pytest.fixture
def patient_broker(tmp_path: Path) -> Iterator[Broker]:
    """Kafka's default consumer session (45 s): the tests that run the CLI in a subprocess between heartbeats must
    not lose a member to the fixture's 3 s session while a loaded machine starts that subprocess."""
    b = Broker(tmp_path / "data", launcher.free_port(), extra_overrides=(
        "group.consumer.session.timeout.ms=45000", "group.consumer.heartbeat.interval.ms=5000"))
    b.start()
    yield b
    b.stop()


def test_samsa_groups_describe_shows_a_consumer_group(patient_broker: Broker) -> None:
    broker = patient_broker
    broker.create_topic("t", 2)
    with broker.connect() as conn:
        a = join(conn, "m-a", ["t"])
        assert commit(conn, "m-a", a.member_epoch, offset=3) == 0
        out = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "groups", "describe", "--bootstrap-server",
                              broker.bootstrap, "--output", "json", "--group", GROUP], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        described = json.loads(out.stdout)
        assert (described["state"], described["protocol_type"], described["protocol"], described["members"]) == (
            "Stable", "consumer", "uniform", 1)
        rows = {(r["topic"], r["partition"]): r for r in described["partitions"]}
        assert set(rows) == {("t", 0), ("t", 1)} and rows[("t", 0)]["consumer_id"] == "m-a"
        assert rows[("t", 0)]["current_offset"] == 3


def describe_members(broker: Broker, output: str) -> str:
    out = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "groups", "describe", "--members",
                          "--bootstrap-server", broker.bootstrap, "--output", output, "--group", GROUP],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_samsa_groups_describe_members_marks_the_classic_members_of_a_consumer_group(patient_broker: Broker) -> None:
    """As kafka-consumer-groups.sh --describe --members --verbose (Kafka 4.4): epochs and assignments, and an
    UPGRADED column (false: a classic member) while the group has members of both protocols."""
    broker = patient_broker
    broker.create_topic("t", 2)
    with broker.connect() as conn:
        a = join(conn, "m-a", ["t"])
        assert count(a) == 2
        table = describe_members(broker, "table").splitlines()
        assert "UPGRADED" not in table[1] and table[1].split()[:5] == [
            "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert table[1].split()[5:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        assert table[2].split()[0] == "m-a" and "t:0,1" in table[2].split()
        c = classic_join(conn, 60000)  # a classic member joins the consumer group (KIP-848's online migration)
        assert c.error_code.value == 0
        described = json.loads(describe_members(broker, "json"))
        assert described["protocol_type"] == "consumer" and described["members"] == 2
        by_id = {m["consumer_id"]: m for m in described["member_details"]}
        assert by_id["m-a"]["upgraded"] is True and by_id[c.member_id]["upgraded"] is False
        assert by_id["m-a"]["current_epoch"] == a.member_epoch and by_id["m-a"]["current_assignment"] == "t:0,1"
        table = describe_members(broker, "table").splitlines()
        assert table[1].split()[-1] == "UPGRADED"
        flags = {line.split()[0]: line.split()[-1] for line in table[2:]}
        assert flags == {"m-a": "true", c.member_id: "false"}


def classic_leave(conn: Connection, member_id: str) -> int:
    r = conn.request(13, {"group_id": GROUP, "members": [{"member_id": member_id, "group_instance_id": None}]},
                     version=3)
    assert r.error_code.value == 0
    return int(r.members[0].error_code.value)
