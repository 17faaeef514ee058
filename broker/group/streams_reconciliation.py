"""Moving a streams member from its current tasks towards its target (Kafka's streams
CurrentAssignmentBuilder), as reconciliation.py does for partitions.

Revocation first: what the target takes from the member is pending revocation (UNREVOKED_TASKS, epoch
unchanged) until the member's heartbeat no longer reports it. Then it moves to the target epoch and
gets the new tasks it may have: an active task only when no member holds it as active and no other
member of its process holds it in another role; a standby or warm-up task only when no other member of
its process runs it and its process does not hold it in that role. The rest wait (UNRELEASED_TASKS).
A role change on the member itself (active to standby, standby to warm-up and back) takes effect at once,
and a standby or warm-up task promoted to active stays until the active task is granted (Kafka 4.4).
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
                return _next(member, member.member_epoch, group, target_epoch, target, owned)
            return member
        case StreamsMemberState.UNREVOKED_TASKS:
            if owned is None or owned.contains_any(member.pending_revocation):
                return member
            return _next(member, member.member_epoch + 1, group, target_epoch, target, owned)
        case StreamsMemberState.UNRELEASED_TASKS:
            return _next(member, member.member_epoch, group, target_epoch, target, owned)
        case _:
            if owned is None or not owned.is_empty():
                raise FencedStreamsMemberError("The streams group member is in a unknown state. The member must "
                                               "abandon all its tasks and rejoin.")
            return _next(member, target_epoch, group, target_epoch, target, owned)


def _difference(current: Tasks, wanted: Tasks, unreleased: Callable[[str, int], bool]
                ) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]], bool]:
    """(kept, to revoke, to assign now, some wanted task is still held elsewhere), as mutable maps."""
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
    return kept, revoke, add, waiting


def _each(tasks: Tasks) -> list[tuple[str, int]]:
    return [(s, p) for s, ps in tasks.items() for p in ps]


def _move(s: str, p: int, source: dict[str, set[int]], dest: dict[str, set[int]]) -> None:
    source.get(s, set()).discard(p)
    dest.setdefault(s, set()).add(p)


def _next(member: StreamsGroupMember, epoch: int, group: StreamsGroup, target_epoch: int,
          target: TasksTuple, owned: TasksTuple | None) -> StreamsGroupMember:
    process, mine = member.process_id, member.assigned

    def other_here(processes: set[str], own: Tasks, s: str, p: int) -> bool:
        """Held in that role by another member of this member's process."""
        return process in processes and p not in own.get(s, frozenset())

    def active_unreleased(s: str, p: int) -> bool:
        return (group.active_task_process(s, p) is not None
                or other_here(group.standby_task_processes(s, p), mine.standby, s, p)
                or other_here(group.warmup_task_processes(s, p), mine.warmup, s, p))

    def standby_unreleased(s: str, p: int) -> bool:
        return ((group.active_task_process(s, p) == process and p not in mine.active.get(s, frozenset()))
                or process in group.standby_task_processes(s, p)
                or other_here(group.warmup_task_processes(s, p), mine.warmup, s, p))

    def warmup_unreleased(s: str, p: int) -> bool:
        return (group.active_task_process(s, p) == process
                or other_here(group.standby_task_processes(s, p), mine.standby, s, p)
                or process in group.warmup_task_processes(s, p))

    a_kept, a_revoke, a_add, a_wait = _difference(mine.active, target.active, active_unreleased)
    s_kept, s_revoke, s_add, s_wait = _difference(mine.standby, target.standby, standby_unreleased)
    w_kept, w_revoke, w_add, w_wait = _difference(mine.warmup, target.warmup, warmup_unreleased)
    # A role change that needs no other member takes effect at once (Kafka 4.4: the client recycles the task
    # in place): an active task demoted to standby is a standby now (its active half is still revoked first);
    # a standby becoming a warm-up, or the reverse, needs no revocation.
    for s, p in _each(mine.active):
        if p in s_add.get(s, ()):
            _move(s, p, s_add, s_kept)
    for s, p in _each(mine.standby):
        if p in w_add.get(s, ()):
            _move(s, p, w_add, w_kept)
            s_revoke.get(s, set()).discard(p)
    for s, p in _each(mine.warmup):
        if p in s_add.get(s, ()):
            _move(s, p, s_add, s_kept)
            w_revoke.get(s, set()).discard(p)
    # A standby or warm-up task promoted to active is not revoked: it stays until the active task is granted.
    for role_tasks, revoke in ((mine.standby, s_revoke), (mine.warmup, w_revoke)):
        for s, p in _each(role_tasks):
            if p in target.active.get(s, ()):
                revoke.get(s, set()).discard(p)
    revoking = TasksTuple(tasks_of(a_revoke), tasks_of(s_revoke), tasks_of(w_revoke))
    must_revoke = not revoking.is_empty() and (owned is None or owned.contains_any(revoking))
    for role_tasks, kept in ((mine.standby, s_kept), (mine.warmup, w_kept)):
        for s, p in _each(role_tasks):
            promoted_now = not must_revoke and p in a_add.get(s, ())
            if p in target.active.get(s, ()) and not promoted_now:
                kept.setdefault(s, set()).add(p)
    kept_tasks = TasksTuple(tasks_of(a_kept), tasks_of(s_kept), tasks_of(w_kept))
    adding = TasksTuple(tasks_of(a_add), tasks_of(s_add), tasks_of(w_add))
    waiting = a_wait or s_wait or w_wait
    if must_revoke:
        # Revoke first; the member stays at its epoch until its heartbeat shows the tasks gone.
        return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                       state=StreamsMemberState.UNREVOKED_TASKS, assigned=kept_tasks, pending_revocation=revoking,
                       active_epochs=_epochs(member, kept_tasks.merge(revoking).active, target_epoch))
    state = StreamsMemberState.UNRELEASED_TASKS if waiting else StreamsMemberState.STABLE
    assigned = kept_tasks.merge(adding)
    return replace(member, member_epoch=target_epoch, previous_member_epoch=member.member_epoch, state=state,
                   assigned=assigned, pending_revocation=EMPTY_TASKS,
                   active_epochs=_epochs(member, assigned.active, target_epoch))


def _epochs(member: StreamsGroupMember, active: Tasks, target_epoch: int) -> dict[tuple[str, int], int]:
    """The assignment epoch of each active task: kept from before, the target epoch for a new one."""
    return {(s, p): member.active_epochs.get((s, p), target_epoch) for s, p in _each(active)}
