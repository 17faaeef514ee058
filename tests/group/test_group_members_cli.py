"""`samsa groups describe --members` rows (broker/cli/commands/group_members.py), as Kafka 4.4's
kafka-consumer-groups.sh --describe --members --verbose prints them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from samsa.broker.cli.commands.group_members import (
    assignment_string,
    member_records,
    member_table,
    upgraded_of,
)


def assigned(m: Any) -> list[tuple[str, int]]:
    return list(m.parts)


def test_assignment_strings_are_kafkas() -> None:
    assert assignment_string([]) == "-"
    assert assignment_string([("t", 10), ("b", 1), ("t", 2), ("t", 0)]) == "b:1;t:0,2,10"


def test_member_type_reads_as_the_admin_client_reads_it() -> None:
    assert (upgraded_of(1), upgraded_of(0), upgraded_of(-1)) == (True, False, None)


def test_a_mixed_consumer_group_has_an_upgraded_column() -> None:
    members = [SimpleNamespace(member_id="b", instance_id=None, client_host="/h", client_id="c", member_epoch=3,
                               parts=[("t", 1)], target=[("t", 1)], upgraded=False),
               SimpleNamespace(member_id="a", instance_id="i", client_host="/h", client_id="c", member_epoch=4,
                               parts=[("t", 0)], target=[("t", 0), ("t", 2)], upgraded=True)]
    group = SimpleNamespace(members=members, assignment_epoch=4)
    headers, rows = member_table(group, True, assigned)
    assert headers == ["CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                       "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"]
    assert rows == [["a", "i", "/h", "c", 1, 4, "t:0", 4, "t:0,2", "true"],
                    ["b", None, "/h", "c", 1, 3, "t:1", 4, "t:1", "false"]]
    assert [r["upgraded"] for r in member_records(headers, rows, True, group)] == [True, False]
    # All of one protocol: no UPGRADED column (Kafka prints it only for a group of both), JSON still says.
    group.members = [members[1]]
    headers, rows = member_table(group, True, assigned)
    assert headers[-1] == "TARGET-ASSIGNMENT" and len(rows[0]) == len(headers)
    assert member_records(headers, rows, True, group)[0]["upgraded"] is True


def test_a_classic_group_lists_assignments() -> None:
    member = SimpleNamespace(member_id="m", group_instance_id="s", client_host="/h", client_id="c",
                             parts=[("t", 1), ("t", 0)])
    group = SimpleNamespace(members=[member])
    headers, rows = member_table(group, False, assigned)
    assert headers[-1] == "ASSIGNMENT" and rows == [["m", "s", "/h", "c", 2, "t:0,1"]]
    assert member_records(headers, rows, False, group)[0]["upgraded"] is None
