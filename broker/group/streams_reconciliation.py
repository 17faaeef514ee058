"""Moving a streams member from its current tasks towards its target (Kafka's streams
CurrentAssignmentBuilder), as reconciliation.py does for partitions.

Revocation first: what the target takes from the member is pending revocation (UNREVOKED_TASKS, epoch
unchanged) until the member's heartbeat no longer reports it. Then it moves to the target epoch and
gets the new tasks it may have: an active task only when no member holds it as active and its own
process holds it in no other role; a standby or warm-up task only when its process holds it in no
role. The rest wait (UNRELEASED_TASKS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from samsa.broker.group.streams_group import (
    EMPTY_TASKS,
    StreamsGroup,
    StreamsGroupMember,
    StreamsMemberState,
    Tasks,
    TasksTuple,
    tasks_of,
)


class FencedStreamsMemberError(Exception):
    """The member must abandon its tasks and rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(member: StreamsGroupMember, group: StreamsGroup, target_epoch: int, target: TasksTuple,
              owned: TasksTuple | None) -> StreamsGroupMember:
    """The member's next state towards `target`; `owned`: the tasks its heartbeat reported (None: not sent)."""
    match member.state:
        case StreamsMemberState.STABLE:
            if member.member_epoch != target_epoch:
                return _next(member, member.member_epoch, group, target_epoch, target)
            return member
        case StreamsMemberState.UNREVOKED_TASKS:
            if owned is None or owned.contains_any(member.pending_revocation):
                return member
            return _next(member, member.member_epoch + 1, group, target_epoch, target)
        case StreamsMemberState.UNRELEASED_TASKS:
            return _next(member, member.member_epoch, group, target_epoch, target)
        case _:
            if owned is None or not owned.is_empty():
                raise FencedStreamsMemberError("The streams group member is in a unknown state. The member must "
                                               "abandon all its tasks and rejoin.")
            return _next(member, target_epoch, group, target_epoch, target)


def _difference(current: Tasks, wanted: Tasks, unreleased: Callable[[str, int], bool]
                ) -> tuple[Tasks, Tasks, Tasks, bool]:
    """(kept, to revoke, to assign now, some wanted task is still held elsewhere)."""
    kept: dict[str, set[int]] = {}
    revoke: dict[str, set[int]] = {}
    add: dict[str, set[int]] = {}
    waiting = False
    for s in set(current) | set(wanted):
        have, want = current.get(s, frozenset()), wanted.get(s, frozenset())
        kept[s] = set(have & want)
        revoke[s] = set(have - want)
        new = set(want - have)
        held = {p for p in new if unreleased(s, p)}
        waiting = waiting or bool(held)
        add[s] = new - held
    return tasks_of(kept), tasks_of(revoke), tasks_of(add), waiting


def _next(member: StreamsGroupMember, epoch: int, group: StreamsGroup, target_epoch: int,
          target: TasksTuple) -> StreamsGroupMember:
    process = member.process_id

    def active_unreleased(s: str, p: int) -> bool:
        return (group.active_task_process(s, p) is not None or process in group.standby_task_processes(s, p)
                or process in group.warmup_task_processes(s, p))

    def other_unreleased(s: str, p: int) -> bool:
        return (group.active_task_process(s, p) == process or process in group.standby_task_processes(s, p)
                or process in group.warmup_task_processes(s, p))

    a_kept, a_revoke, a_add, a_wait = _difference(member.assigned.active, target.active, active_unreleased)
    s_kept, s_revoke, s_add, s_wait = _difference(member.assigned.standby, target.standby, other_unreleased)
    w_kept, w_revoke, w_add, w_wait = _difference(member.assigned.warmup, target.warmup, other_unreleased)
    revoking = TasksTuple(a_revoke, s_revoke, w_revoke)
    kept = TasksTuple(a_kept, s_kept, w_kept)
    if not revoking.is_empty():
        # Revoke first; the member stays at its epoch until its heartbeat shows the tasks gone.
        return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                       state=StreamsMemberState.UNREVOKED_TASKS, assigned=kept, pending_revocation=revoking)
    assigned = kept.merge(TasksTuple(a_add, s_add, w_add))
    state = StreamsMemberState.UNRELEASED_TASKS if (a_wait or s_wait or w_wait) else StreamsMemberState.STABLE
    return replace(member, member_epoch=target_epoch, previous_member_epoch=member.member_epoch, state=state,
                   assigned=assigned, pending_revocation=EMPTY_TASKS)
