"""Checks of a streams heartbeat and of a group's record state (Kafka 4.4's GroupMetadataManager helpers):
topology comparison, owned tasks against the configured topology, member epoch fencing, and the cheap
"unchanged since written" test of streams_coordinator._write."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from samsa.broker.group.streams_group import StreamsGroup, StreamsGroupMember, TasksTuple, Topology
from samsa.broker.group.streams_topology import ConfiguredTopology
from samsa.kproto.errors import ErrorCode


class StreamsHeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def invalid(message: str) -> StreamsHeartbeatError:
    return StreamsHeartbeatError(ErrorCode.invalid_request, message)


def canonical(topology: Topology) -> Topology:
    """Subtopologies in id order (Kafka keeps them in a map), for comparing two topologies."""
    return replace(topology, subtopologies=tuple(sorted(topology.subtopologies, key=lambda s: s.subtopology_id)))


def check_tasks_exist(configured: ConfiguredTopology, owned: TasksTuple) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks, once the topology is configured."""
    for tasks in (owned.active, owned.standby, owned.warmup):
        for subtopology, partitions in tasks.items():
            count = configured.tasks.get(subtopology)
            if count is None:
                raise invalid(f"Subtopology {subtopology} does not exist in the topology.")
            for p in sorted(partitions):
                if p < 0 or p >= count:
                    raise invalid(f"Task {p} for subtopology {subtopology} is invalid. Number of tasks for this "
                                   f"subtopology: {count}")


def fingerprint(group: StreamsGroup) -> tuple[Any, ...]:
    return ((group.group_epoch, group.assignment_epoch, group.assignment_timestamp_ms, group.metadata_hash),
            group.topology, tuple(group.members.items()), tuple(group.target_assignment.items()))


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal scalars, and the very same member, assignment and topology objects (held, so never reused ids)."""
    return (a[0] == b[0] and a[1] is b[1] and len(a[2]) == len(b[2]) and len(a[3]) == len(b[3])
            and all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(a[2], b[2], strict=True))
            and all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(a[3], b[3], strict=True)))


def check_epoch(member: StreamsGroupMember, received: int, owned: TasksTuple | None) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid: the previous epoch is accepted with a subset of
    the tasks, since the response that bumped the epoch may have been lost."""
    if received > member.member_epoch:
        raise StreamsHeartbeatError(ErrorCode.fenced_member_epoch,
                                    f"The streams group member has a greater member epoch ({received}) than the one "
                                    f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                    "all its partitions and rejoin.")
    if received < member.member_epoch:
        held = member.assigned
        subset = owned is not None and all(
            ps <= mine.get(s, frozenset()) for theirs, mine in
            ((owned.active, held.active), (owned.standby, held.standby), (owned.warmup, held.warmup))
            for s, ps in theirs.items())
        if received != member.previous_member_epoch or not subset:
            raise StreamsHeartbeatError(ErrorCode.fenced_member_epoch,
                                        f"The streams group member has a smaller member epoch ({received}) than the "
                                        f"one known by the group coordinator ({member.member_epoch}). The member must "
                                        "abandon all its partitions and rejoin.")
