"""The classic group's states and the one table of its transitions, (state, event) -> state (Kafka's ClassicGroupState).

The table is the whole truth: Group.transition(event) looks the pair up and raises IllegalGroupTransition
for any pair it lacks (a bug of ours, checked even under `python -O`), as h11's _state.py does.

- Empty: no members; may still hold committed offsets (also "simple" groups that only commit).
- PreparingRebalance: members are (re)joining; the join phase ends when every member has joined,
  or at the rebalance timeout, or (first rebalance only) after group.initial.rebalance.delay.ms.
- CompletingRebalance: join responses are out; waiting for the leader's SyncGroup assignment.
- Stable: every member has its assignment for the current generation.
- Dead: removed (deleted, or empty with all offsets expired); requests see it as unknown.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(Enum):
    PREPARE_REBALANCE = "prepare rebalance"  # a member joins, rejoins, changes protocols, leaves or expires
    JOIN_COMPLETED = "join completed"  # the join phase ended with members: join responses go out
    ALL_MEMBERS_LEFT = "all members left"  # the join phase ended with nobody left in the group
    LEADER_SYNCED = "leader synced"  # the leader's SyncGroup brought the assignment
    DELETED = "deleted"  # DeleteGroups, OffsetDelete or offset expiry left the group with nothing


E, P, C, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                 GroupState.STABLE, GroupState.DEAD)

EVENT_TRIGGERED_TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState] = {
    (E, GroupEvent.PREPARE_REBALANCE): P,
    (C, GroupEvent.PREPARE_REBALANCE): P,
    (S, GroupEvent.PREPARE_REBALANCE): P,
    (P, GroupEvent.JOIN_COMPLETED): C,
    (P, GroupEvent.ALL_MEMBERS_LEFT): E,
    (C, GroupEvent.LEADER_SYNCED): S,
    (E, GroupEvent.DELETED): D,
    (P, GroupEvent.DELETED): D,
    (C, GroupEvent.DELETED): D,
    (S, GroupEvent.DELETED): D,
    (D, GroupEvent.DELETED): D,
}


class IllegalGroupTransition(RuntimeError):
    """An event the table does not allow in the group's state: a coordinator bug, never a client's doing."""


def next_state(state: GroupState, event: GroupEvent) -> GroupState:
    try:
        return EVENT_TRIGGERED_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalGroupTransition(f"{event.value} in state {state.value}") from None


def can_handle(state: GroupState, event: GroupEvent) -> bool:
    return (state, event) in EVENT_TRIGGERED_TRANSITIONS


# The table read by target: next state -> the states it may be entered from (Kafka's validPreviousStates),
# and state -> the states it may move to.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    target: frozenset(s for (s, _), t in EVENT_TRIGGERED_TRANSITIONS.items() if t is target) for target in GroupState
}
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    s: frozenset(t for (f, _), t in EVENT_TRIGGERED_TRANSITIONS.items() if f is s) for s in GroupState
}


def parse_state(name: str) -> GroupState | None:
    """A state from its Kafka name, case-insensitively (ListGroups' states filter)."""
    for state in GroupState:
        if state.value.lower() == name.strip().lower():
            return state
    return None
