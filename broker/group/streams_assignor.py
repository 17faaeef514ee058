"""The streams group's task assignor, `sticky` (Kafka's default group.streams.assignors; its
StickyTaskAssignor, written from its description in KIP-1071).

Tasks are (subtopology, partition); a subtopology with changelog topics is stateful. Active tasks go
first, stateful then stateless, each flavour balanced on its own: every member may take up to
ceil(tasks of the flavour / members) of them (the stateless pass counts all the member's active tasks).

1. a task stays with the member that had it active in the previous target, if that member is under quota;
2. else it goes to a member that had it as a standby or warm-up task (the least loaded such), under quota;
3. else to the least loaded process (tasks per member of the process), to its least loaded member.

Then `num_standby` standby copies of every stateful task, each on a process that holds the task in no
role yet, preferring a process that had it as a standby before, else the least loaded. A process with
several members (threads of one Streams instance) counts as one place for standbys.

Kafka 4.4.0's StickyTaskAssignor (read from the jar) differs in its standby pass: a standby goes first to the
task's previous active owner, then to a candidate among the members that had it as a standby or report task
offsets for it (previous standbys first, then the larger offset sum), each under a per-member total quota, and
the rest to the least loaded process. Neither it nor Samsa assigns warm-up tasks (its AssignmentRefiner returns
the target unchanged) or uses racks or client tags (group.streams.rack.aware.assignment.tags only gives
members the MISSING_CLIENT_TAGS status).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.broker.group.streams_group import Tasks, TasksTuple, tasks_of

Task = tuple[str, int]


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    process_id: str
    previous: TasksTuple  # the member's assignment in the previous target


class _State:
    def __init__(self, members: Mapping[str, AssignmentMember]) -> None:
        self.members = members
        self.processes: dict[str, list[str]] = {}
        for member_id in sorted(members):
            self.processes.setdefault(members[member_id].process_id, []).append(member_id)
        self.active: dict[str, list[Task]] = {m: [] for m in members}
        self.stateful: dict[str, int] = {m: 0 for m in members}
        self.standby: dict[str, list[Task]] = {m: [] for m in members}
        self.holders: dict[Task, set[str]] = {}  # task -> processes holding it in any role

    def count(self, member_id: str) -> int:
        return len(self.active[member_id]) + len(self.standby[member_id])

    def process_load(self, process_id: str) -> float:
        members = self.processes[process_id]
        return sum(self.count(m) for m in members) / len(members)

    def add_active(self, member_id: str, task: Task, stateful: bool) -> None:
        self.active[member_id].append(task)
        if stateful:
            self.stateful[member_id] += 1
        self.holders.setdefault(task, set()).add(self.members[member_id].process_id)

    def add_standby(self, member_id: str, task: Task) -> None:
        self.standby[member_id].append(task)
        self.holders.setdefault(task, set()).add(self.members[member_id].process_id)

    def least_loaded_member(self, process_id: str) -> str:
        return min(self.processes[process_id], key=lambda m: (self.count(m), m))


def _each(tasks: Tasks) -> list[Task]:
    return [(s, p) for s, ps in tasks.items() for p in ps]


def assign(members: Mapping[str, AssignmentMember], tasks: Mapping[str, int], stateful: set[str],
           num_standby: int) -> dict[str, TasksTuple]:
    """The target assignment of every member: `tasks` is subtopology id -> number of tasks, `stateful` the
    subtopologies with state."""
    if not members:
        return {}
    state = _State(members)
    prev_active: dict[Task, str] = {}
    prev_standby: dict[Task, list[str]] = {}
    for member_id in sorted(members):
        previous = members[member_id].previous
        for task in _each(previous.active):
            prev_active[task] = member_id
        for task in _each(previous.standby) + _each(previous.warmup):
            prev_standby.setdefault(task, []).append(member_id)
    all_tasks = sorted(((s, p) for s, n in tasks.items() for p in range(n)), key=lambda t: (t[1], t[0]))
    stateful_tasks = [t for t in all_tasks if t[0] in stateful]
    stateless_tasks = [t for t in all_tasks if t[0] not in stateful]
    n = len(members)
    _assign_active(state, stateful_tasks, True, math.ceil(len(stateful_tasks) / n), prev_active, prev_standby)
    _assign_active(state, stateless_tasks, False, math.ceil(len(all_tasks) / n), prev_active, prev_standby)
    if num_standby > 0:
        _assign_standby(state, stateful_tasks, num_standby, prev_standby)
    out: dict[str, TasksTuple] = {}
    for member_id in members:
        active: dict[str, set[int]] = {}
        standby: dict[str, set[int]] = {}
        for s, p in state.active[member_id]:
            active.setdefault(s, set()).add(p)
        for s, p in state.standby[member_id]:
            standby.setdefault(s, set()).add(p)
        out[member_id] = TasksTuple(tasks_of(active), tasks_of(standby))
    return out


def _assign_active(state: _State, tasks: list[Task], stateful: bool, quota: int, prev_active: Mapping[Task, str],
                   prev_standby: Mapping[Task, list[str]]) -> None:
    def under_quota(member_id: str) -> bool:
        held = state.stateful[member_id] if stateful else len(state.active[member_id])
        return held < quota

    left: list[Task] = []
    for task in tasks:
        owner = prev_active.get(task)
        if owner is not None and under_quota(owner):
            state.add_active(owner, task, stateful)
        else:
            left.append(task)
    rest: list[Task] = []
    for task in left:
        candidates = [m for m in prev_standby.get(task, []) if under_quota(m)]
        if candidates:
            state.add_active(min(candidates, key=lambda m: (state.count(m), m)), task, stateful)
        else:
            rest.append(task)
    for task in rest:
        candidates = [p for p in state.processes if any(under_quota(m) for m in state.processes[p])]
        pool = candidates or list(state.processes)
        process = min(pool, key=lambda p: (state.process_load(p), p))
        members = [m for m in state.processes[process] if under_quota(m)] or state.processes[process]
        state.add_active(min(members, key=lambda m: (state.count(m), m)), task, stateful)


def _assign_standby(state: _State, tasks: list[Task], num_standby: int,
                    prev_standby: Mapping[Task, list[str]]) -> None:
    for task in tasks:
        for _ in range(num_standby):
            held = state.holders.get(task, set())
            eligible = [p for p in state.processes if p not in held]
            if not eligible:
                break  # fewer processes than copies: Kafka logs it and assigns what it can
            previous = [m for m in prev_standby.get(task, []) if state.members[m].process_id in eligible]
            if previous:
                member_id = min(previous, key=lambda m: (state.count(m), m))
            else:
                process = min(eligible, key=lambda p: (state.process_load(p), p))
                member_id = state.least_loaded_member(process)
            state.add_standby(member_id, task)
