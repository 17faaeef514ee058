"""`samsa groups describe --members`: one row per member, with what kafka-consumer-groups.sh --describe
--members --verbose prints (Kafka 4.4's ConsumerGroupCommand.printMembers).

A classic group: CONSUMER-ID, GROUP-INSTANCE-ID, HOST, CLIENT-ID, #PARTITIONS, ASSIGNMENT.
A KIP-848 consumer group: the same but ASSIGNMENT, then CURRENT-EPOCH (the member's epoch), CURRENT-ASSIGNMENT,
TARGET-EPOCH (the group's assignment epoch), TARGET-ASSIGNMENT and, while the group is mixed (members of both
protocols, after an online upgrade), UPGRADED: "true" for a member of the consumer protocol, "false" for a
classic one (ConsumerGroupDescribe v1's MemberType, as the Admin client's MemberDescription.upgraded reads it).
The JSON output always has "upgraded" for a consumer group's members (null for a classic group's, and for a
broker whose ConsumerGroupDescribe has no member type).

An assignment prints as Kafka's does: "topic:0,1;other:2", topics sorted, "-" when empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

CONSUMER_MEMBER_TYPE = 1
CLASSIC_MEMBER_TYPE = 0


def upgraded_of(member_type: int) -> bool | None:
    """The Admin client's reading of ConsumerGroupDescribe's MemberType: -1 (v0, unknown) is no answer."""
    return None if member_type < 0 else member_type == CONSUMER_MEMBER_TYPE


def assignment_string(partitions: Iterable[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    if not by_topic:
        return "-"
    return ";".join(sorted(f"{t}:" + ",".join(str(p) for p in sorted(ps)) for t, ps in by_topic.items()))


def member_table(description: Any, consumer_group: bool, assigned: Any) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows for the members of `description` (a DescribeGroups group, or the CLI's view of a
    ConsumerGroupDescribe one when `consumer_group`); `assigned(member)` lists a member's (topic, partition)."""
    headers = ["CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    rows: list[list[Any]] = []
    members: Sequence[Any] = sorted(description.members, key=lambda m: m.member_id)
    if not consumer_group:
        headers.append("ASSIGNMENT")
        for m in members:
            parts = assigned(m)
            rows.append([m.member_id, getattr(m, "group_instance_id", None), m.client_host, m.client_id, len(parts),
                         assignment_string(parts)])
        return headers, rows
    headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    kinds = {m.upgraded for m in members}
    mixed = True in kinds and False in kinds
    if mixed:
        headers.append("UPGRADED")
    for m in members:
        parts = assigned(m)
        row = [m.member_id, m.instance_id, m.client_host, m.client_id, len(parts), m.member_epoch,
               assignment_string(parts), description.assignment_epoch, assignment_string(m.target)]
        if mixed:
            row.append("true" if m.upgraded else "false")
        rows.append(row)
    return headers, rows


def member_records(headers: list[str], rows: list[list[Any]], consumer_group: bool,
                   description: Any) -> list[dict[str, Any]]:
    """The rows as JSON objects (lower-case keys), "upgraded" a boolean on every member of a consumer group."""
    keys = [h.lower().replace("-", "_").replace("#", "") for h in headers]
    out = []
    members = sorted(description.members, key=lambda m: m.member_id)
    for m, row in zip(members, rows, strict=True):
        record = dict(zip(keys, row, strict=True))
        record["upgraded"] = m.upgraded if consumer_group else None
        out.append(record)
    return out
