"""The classic group's event table: every transition it names, and nothing else, even under `python -O`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from samsa.broker.group.classic_group import Group
from samsa.broker.group.state import (
    EVENT_TRIGGERED_TRANSITIONS,
    GroupEvent,
    GroupState,
    IllegalGroupTransition,
    next_state,
)

E, P, C, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                 GroupState.STABLE, GroupState.DEAD)


def test_a_rebalance_cycle_follows_the_table() -> None:
    group = Group("g")
    for event, expected in [(GroupEvent.PREPARE_REBALANCE, P), (GroupEvent.JOIN_COMPLETED, C),
                            (GroupEvent.LEADER_SYNCED, S), (GroupEvent.PREPARE_REBALANCE, P),
                            (GroupEvent.ALL_MEMBERS_LEFT, E), (GroupEvent.DELETED, D)]:
        previous = group.state
        group.transition(event, now_ms=7)
        assert (group.previous_state, group.state, group.state_timestamp_ms) == (previous, expected, 7)


@pytest.mark.parametrize("state", list(GroupState))
@pytest.mark.parametrize("event", list(GroupEvent))
def test_a_pair_the_table_lacks_raises_and_leaves_the_group_as_it_was(state: GroupState, event: GroupEvent) -> None:
    group = Group("g", state=state, previous_state=E, state_timestamp_ms=1)
    if (state, event) in EVENT_TRIGGERED_TRANSITIONS:
        group.transition(event, now_ms=2)
        assert group.state is EVENT_TRIGGERED_TRANSITIONS[(state, event)]
        return
    with pytest.raises(IllegalGroupTransition):
        group.transition(event, now_ms=2)
    assert (group.state, group.previous_state, group.state_timestamp_ms) == (state, E, 1)


def test_an_illegal_event_raises_under_python_dash_o() -> None:
    code = (
        "from samsa.broker.group.state import GroupEvent, GroupState, IllegalGroupTransition, next_state\n"
        "assert False, 'asserts are on'\n"
    )
    # Asserts are gone under -O (the line above passes), the table check is not.
    code += (
        "try:\n"
        "    next_state(GroupState.STABLE, GroupEvent.LEADER_SYNCED)\n"
        "except IllegalGroupTransition as e:\n"
        "    print('raised:', e)\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "raised: leader synced in state Stable"


def test_next_state_names_the_event_and_state() -> None:
    with pytest.raises(IllegalGroupTransition, match="join completed in state Empty"):
        next_state(E, GroupEvent.JOIN_COMPLETED)
