"""A broker the controller has not answered for broker.session.timeout.ms stops acting as a partition
leader until a heartbeat goes through again (it may have been deposed without knowing it yet)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from samsa.broker.lifecycle import BrokerLifecycle


class _Config:
    def __init__(self, session_ms: int) -> None:
        self.session_ms = session_ms

    def get_int(self, key: str) -> int:
        return {"broker.session.timeout.ms": self.session_ms, "broker.heartbeat.interval.ms": 10}[key]


class _Beat:
    is_fenced = False
    should_shut_down = False


def _broker(single_voter: bool, session_ms: int) -> Any:
    async def beat() -> _Beat:
        return _Beat()

    controller = SimpleNamespace(heartbeat=lambda *a: (0, beat()))
    quorum = SimpleNamespace(applied_offset=1)
    return SimpleNamespace(single_voter=single_voter, config=_Config(session_ms), is_active_controller=True,
                           controller=controller, quorum=quorum, node_id=1, roles={"broker"})


def test_a_broker_unheard_for_its_session_presumes_itself_fenced_until_a_heartbeat_answers() -> None:
    lifecycle = BrokerLifecycle(_broker(single_voter=False, session_ms=60))
    lifecycle.broker_epoch = 7
    assert lifecycle.presumed_fenced()  # not yet unfenced since it started
    asyncio.run(lifecycle._heartbeat())  # the controller answers: unfenced
    assert not lifecycle.presumed_fenced()
    time.sleep(0.08)
    assert lifecycle.presumed_fenced()
    asyncio.run(lifecycle._heartbeat())  # the controller answers
    assert not lifecycle.presumed_fenced()


def test_a_single_voter_is_never_cut_off_from_its_controller() -> None:
    lifecycle = BrokerLifecycle(_broker(single_voter=True, session_ms=50))
    time.sleep(0.08)
    assert not lifecycle.presumed_fenced()


class _FencedBeat(_Beat):
    is_fenced = True


def test_a_broker_the_controller_calls_fenced_leads_nothing_even_while_heartbeats_answer() -> None:
    """Cut off, fenced, then healed: heartbeats go through again before its image shows the leadership
    that moved away. Until the controller unfences it, it must not answer as those partitions' leader
    (a consumer at offset 197 was told OFFSET_OUT_OF_RANGE by a deposed leader whose log ended at 15)."""
    broker = _broker(single_voter=False, session_ms=60_000)
    lifecycle = BrokerLifecycle(broker)
    lifecycle.broker_epoch = 7
    asyncio.run(lifecycle._heartbeat())
    assert not lifecycle.presumed_fenced()

    async def fenced_beat() -> _Beat:
        return _FencedBeat()

    broker.controller.heartbeat = lambda *a: (0, fenced_beat())
    asyncio.run(lifecycle._heartbeat())
    assert lifecycle.fenced and lifecycle.presumed_fenced()
