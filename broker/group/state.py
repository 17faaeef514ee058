"""The classic group states and the one table of legal transitions between them (Kafka's ClassicGroupState).

    from / to             Empty  PreparingRebalance  CompletingRebalance  Stable  Dead
    Empty                   .          join                  .              .    delete / expiry
    PreparingRebalance    all left     .             join phase done        .    delete
    CompletingRebalance     .      member change             .         leader sync  delete
    Stable                  .      member change             .              .    delete
    Dead                    .          .                     .              .    (stays)

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


E, P, C, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                 GroupState.STABLE, GroupState.DEAD)

# next state -> the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    E: frozenset({P}),
    P: frozenset({S, C, E}),
    C: frozenset({P}),
    S: frozenset({C}),
    D: frozenset({S, P, C, E, D}),
}

# The same table, read the other way: state -> states it may move to.
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    s: frozenset(t for t, prev in VALID_PREVIOUS_STATES.items() if s in prev) for s in GroupState
}


def can_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def parse_state(name: str) -> GroupState | None:
    """A state from its Kafka name, case-insensitively (ListGroups' states filter)."""
    for state in GroupState:
        if state.value.lower() == name.strip().lower():
            return state
    return None
