"""A broker the controller has not answered for broker.session.timeout.ms stops acting as a partition
leader until a heartbeat goes through again (it may have been deposed without knowing it yet)."""

from __future__ import annotations

import asyncio
import inspect
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


def test_cut_off_is_the_silence_not_the_controllers_word() -> None:
    """cut_off: unfenced when last heard, silent for a session since. A broker the controller calls fenced is
    presumed fenced but not cut off (Produce refuses it at once, see below)."""
    broker = _broker(single_voter=False, session_ms=60)
    lifecycle = BrokerLifecycle(broker)
    lifecycle.broker_epoch = 7
    assert not lifecycle.cut_off()  # fenced since it started
    asyncio.run(lifecycle._heartbeat())
    assert not lifecycle.cut_off()
    time.sleep(0.08)
    assert lifecycle.cut_off() and lifecycle.presumed_fenced()

    async def fenced_beat() -> _Beat:
        return _FencedBeat()

    broker.controller.heartbeat = lambda *a: (0, fenced_beat())
    asyncio.run(lifecycle._heartbeat())
    assert not lifecycle.cut_off() and lifecycle.presumed_fenced()


class _CutOff:
    def __init__(self) -> None:
        self.cut = True

    def cut_off(self) -> bool:
        return self.cut


def _produce_ctx(session_ms: int, leader_id: int) -> tuple[Any, Any, _CutOff]:
    """A Produce v9 for t-0 and the context of broker 1, whose image shows `leader_id` leading t-0."""
    from samsa.broker.context import RequestContext

    lifecycle = _CutOff()
    partition = SimpleNamespace(leader_id=leader_id)
    replicas = SimpleNamespace(get_partition=lambda name, index: partition if (name, index) == ("t", 0) else None)
    broker = SimpleNamespace(node_id=1, lifecycle=lifecycle, replica_manager=replicas,
                             config=_Config(session_ms))
    ctx = RequestContext(header=SimpleNamespace(api_version=9), broker=broker, client_host="127.0.0.1",  # type: ignore[arg-type]
                         now_ms=1)
    request = SimpleNamespace(acks=-1, timeout=60_000, transactional_id=None,
                              topic_data=[SimpleNamespace(name="t", partition_data=[SimpleNamespace(index=0)])])
    return request, ctx, lifecycle


def _recorder(handled: list[int]) -> Any:
    """A stand-in for produce._handle_now that notes the now_ms it was given."""
    def handle(request: Any, ctx: Any) -> str:
        handled.append(ctx.now_ms)
        return "answer"
    return handle


def test_a_cut_off_leader_holds_produce_until_a_heartbeat_goes_through(monkeypatch: Any) -> None:
    """Chaos seed 313334002: node 2, cut off for 2.5 s of a 3 s session, refused a producer's sequences
    49-51 (NOT_LEADER_OR_FOLLOWER) and, healed without having been deposed, refused 52 as out of order:
    librdkafka bumped its epoch and wrote an in-doubt batch of another partition twice. The request now
    waits (the connection muted, so the producer's next requests keep their order) and is handled once a
    heartbeat goes through."""
    from samsa.broker.handlers import produce

    handled: list[int] = []
    monkeypatch.setattr(produce, "_handle_now", _recorder(handled))
    monkeypatch.setattr(produce, "CUT_OFF_POLL_S", 0.001)
    request, ctx, lifecycle = _produce_ctx(session_ms=600_000, leader_id=1)

    async def run() -> object:
        answer = produce.handle_produce(request, ctx)
        assert inspect.isawaitable(answer)
        held = asyncio.ensure_future(answer)
        for _ in range(50):
            await asyncio.sleep(0.002)
        assert not handled and not held.done()
        lifecycle.cut = False
        return await asyncio.wait_for(held, 30)

    assert asyncio.run(run()) == "answer"
    assert len(handled) == 1 and handled[0] > 1  # handled when it is taken up, not when it arrived


def test_a_hold_ends_after_one_session_and_never_for_partitions_led_elsewhere(monkeypatch: Any) -> None:
    from samsa.broker.handlers import produce

    handled: list[int] = []
    monkeypatch.setattr(produce, "_handle_now", _recorder(handled))
    monkeypatch.setattr(produce, "CUT_OFF_POLL_S", 0.001)
    request, ctx, _ = _produce_ctx(session_ms=20, leader_id=1)  # still cut off after the session: answered

    async def run() -> object:
        answer = produce.handle_produce(request, ctx)
        assert inspect.isawaitable(answer)
        return await asyncio.wait_for(answer, 30)

    assert asyncio.run(run()) == "answer" and len(handled) == 1
    request, ctx, _ = _produce_ctx(session_ms=600_000, leader_id=2)  # another broker leads t-0: at once
    answer: Any = produce.handle_produce(request, ctx)
    assert answer == "answer" and len(handled) == 2
