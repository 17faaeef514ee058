"""Kafka 4.4's versions of the streams-group APIs over the wire against a real `samsa serve`: StreamsGroupHeartbeat
v1, StreamsGroupDescribe v1 and StreamsGroupTopologyDescriptionUpdate v0 (answered as Kafka 4.4 answers without a
topology description plugin)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from tests.kip848.conftest import Broker

GROUP = "wc"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data", launcher.free_port(),
               extra_overrides=("group.streams.rack.aware.assignment.tags=zone",))
    b.start()
    yield b
    b.stop()


def _topology() -> dict[str, Any]:
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}


def heartbeat(conn: Connection, member: str, version: int, tags: list[tuple[str, str]] | None = None) -> Any:
    return conn.request(88, {
        "group_id": GROUP, "member_id": member, "member_epoch": 0, "endpoint_information_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 30000, "topology": _topology(),
        "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": f"p-{member}",
        "user_endpoint": None, "client_tags": [{"key": k, "value": v} for k, v in tags or []],
        "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}, version=version)


def describe(conn: Connection, group: str, include: bool) -> Any:
    return conn.request(89, {"group_ids": [group], "include_authorized_operations": False,
                             "include_topology_description": include}, version=1).groups[0]


def test_heartbeat_v1_carries_the_int64_recovery_lag_and_missing_client_tags(broker: Broker) -> None:
    broker.create_topic("in", 2)
    with broker.connect() as conn:
        v1 = heartbeat(conn, "a", 1)
        assert v1.error_code.value == 0 and v1.member_epoch > 0
        assert v1.acceptable_recovery_lag == 10000 and v1.topology_description_required is False
        # MISSING_CLIENT_TAGS (6), after ASSIGNMENT_DELAYED (5): the member sent no "zone".
        assert [s.status_code for s in v1.status] == [5, 6] and "[zone]" in v1.status[1].status_detail
        assert [s.status_code for s in heartbeat(conn, "b", 1, [("zone", "z1")]).status] == [5]
        v0 = heartbeat(conn, "c", 0)
        # v0's AcceptableRecoveryLagLegacy: never set by Kafka 4.4; no status code 6 for a v0 client.
        assert v0.error_code.value == 0 and v0.acceptable_recovery_lag == 0
        assert [s.status_code for s in v0.status] == [5]
        # -1, the field's default, where Kafka 4.4 does not set it: an error answer, a leave.
        for epoch in (7, -1):
            r = conn.request(88, {
                "group_id": GROUP, "member_id": "a", "member_epoch": epoch, "endpoint_information_epoch": 0,
                "instance_id": None, "rack_id": None, "rebalance_timeout": -1, "topology": None,
                "active_tasks": None, "standby_tasks": None, "warmup_tasks": None, "process_id": None,
                "user_endpoint": None, "client_tags": None, "task_offsets": None, "task_end_offsets": None,
                "shutdown_application": False}, version=1)
            expected = (110, -1) if epoch == 7 else (0, -1)  # 110: FENCED_MEMBER_EPOCH
            assert (r.error_code.value, r.acceptable_recovery_lag) == expected


def test_describe_v1_has_no_stored_description_and_names_the_assignor(broker: Broker) -> None:
    broker.create_topic("in", 2)
    with broker.connect() as conn:
        joined = heartbeat(conn, "a", 1, [("zone", "z1")])
        assert joined.error_code.value == 0
        offsets = [{"subtopology_id": "0", "partition": 1, "offset": 4}, {"subtopology_id": "0", "partition": 0,
                                                                          "offset": 8}]
        r = conn.request(88, {
            "group_id": GROUP, "member_id": "a", "member_epoch": joined.member_epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": -1, "topology": None, "active_tasks": None,
            "standby_tasks": None, "warmup_tasks": None, "process_id": None, "user_endpoint": None,
            "client_tags": None, "task_offsets": offsets, "task_end_offsets": None, "shutdown_application": False},
            version=1)
        assert r.error_code.value == 0
        asked = describe(conn, GROUP, True)
        member = asked.members[0]
        assert [(o.subtopology_id, o.partition, o.offset) for o in member.task_offsets] == [("0", 0, 8), ("0", 1, 4)]
        assert member.task_end_offsets == ()
        assert asked.error_code.value == 0 and asked.assignor_name == "sticky"
        assert asked.topology_description is None and asked.topology_description_status == 1  # NOT_STORED
        assert describe(conn, GROUP, False).topology_description_status == 0  # NOT_REQUESTED
        unknown = describe(conn, "nope", True)
        assert unknown.error_code.value == 69 and unknown.assignor_name is None  # GROUP_ID_NOT_FOUND
        assert unknown.topology_description_status == 0


def test_topology_description_update_is_unsupported_without_a_plugin(broker: Broker) -> None:
    with broker.connect() as conn:
        versions = {k.api_key: (k.min_version, k.max_version) for k in conn.request(
            18, {"client_software_name": "test", "client_software_version": "1"}, version=3).api_keys}
        assert (versions[88], versions[89], versions[93]) == ((0, 1), (0, 1), (0, 0))
        r = conn.request(93, {"group_id": GROUP, "member_id": "a", "topology_epoch": 0,
                              "topology_description": {"subtopologies": [], "global_stores": []}}, version=0)
        assert r.error_code.value == 35  # UNSUPPORTED_VERSION
        assert r.error_message == "The broker has no streams group topology description plugin configured."
