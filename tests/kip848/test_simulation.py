"""Seeded simulations of the KIP-848 coordinator with clients that join, heartbeat, die and leave at random:
after every event no partition has two owners (on the coordinator, and among the clients it counts as
members), and once the clients are quiet the group settles Stable with every partition owned.
A failure prints its seed."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest

from samsa.broker.group.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator, HeartbeatRequest
from samsa.broker.group.consumer_group import ConsumerGroupState
from samsa.kproto.errors import ErrorCode

from .test_consumer_coordinator import Catalog

T1, T2 = str(uuid.UUID(int=11)), str(uuid.UUID(int=12))
SESSION_MS = 1000
STEPS = 400


@dataclass
class Client:
    member_id: str
    topics: tuple[str, ...]
    epoch: int = 0
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    alive: bool = True


def check_no_two_owners(c: ConsumerGroupCoordinator, clients: dict[str, Client], seed: int) -> None:
    group = c.groups.get("g")
    if group is None:
        return
    held: dict[tuple[str, int], str] = {}
    for m in group.members.values():
        for parts in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    assert (t, p) not in held, f"seed {seed}: {(t, p)} held by {held[(t, p)]} and {m.member_id}"
                    held[(t, p)] = m.member_id
    believed: dict[tuple[str, int], str] = {}
    for cl in clients.values():
        if cl.member_id not in group.members:
            continue
        for t, ps in cl.owned.items():
            for p in ps:
                assert (t, p) not in believed, f"seed {seed}: {believed[(t, p)]} and {cl.member_id} own {(t, p)}"
                believed[(t, p)] = cl.member_id


def heartbeat(c: ConsumerGroupCoordinator, cat: Catalog, cl: Client, now: int) -> None:
    joining = cl.epoch == 0
    r = c.heartbeat(HeartbeatRequest("g", cl.member_id, cl.epoch, None, None, 500 if joining else -1,
                                     cl.topics if joining else None, None, None, {} if joining else dict(cl.owned)),
                    cat, now)
    if r.error in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
        cl.epoch, cl.owned = 0, {}  # abandon everything and rejoin
        return
    assert r.error == ErrorCode.none, r
    cl.epoch = r.member_epoch
    if r.assignment is not None:
        cl.owned = dict(r.assignment)


@pytest.mark.parametrize("seed", range(12))
def test_random_membership_never_has_two_owners(seed: int) -> None:
    rng = random.Random(seed)
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=SESSION_MS), lambda _r: None,
                                 lambda _g: False)
    cat = Catalog()
    cat.add("a", T1, 5)
    cat.add("b", T2, 3)
    clients: dict[str, Client] = {}
    now = 0
    for step in range(STEPS):
        now += rng.randrange(1, 120)
        action = rng.random()
        live = [cl for cl in clients.values() if cl.alive]
        if action < 0.1 or not live:
            cid = f"m{step}"
            clients[cid] = Client(cid, rng.choice([("a",), ("a", "b"), ("b",)]))
            heartbeat(c, cat, clients[cid], now)
        elif action < 0.13:
            victim = rng.choice(live)
            victim.alive = False  # dies: its session runs out
        elif action < 0.16:
            leaver = rng.choice(live)
            c.heartbeat(HeartbeatRequest("g", leaver.member_id, -1, None, None, -1, None, None, None, None), cat, now)
            leaver.alive, leaver.owned = False, {}
        elif action < 0.18:
            cat.add("b", T2, len(cat.topics_by_name["b"].partitions) + 1)  # partitions added
        else:
            heartbeat(c, cat, rng.choice(live), now)
        c.tick(now)
        check_no_two_owners(c, clients, seed)
    # Quiet: the living clients heartbeat until the group settles.
    for _ in range(40):
        now += 200
        for cl in clients.values():
            if cl.alive:
                heartbeat(c, cat, cl, now)
        c.tick(now)
        check_no_two_owners(c, clients, seed)
    group = c.groups["g"]
    living = [cl for cl in clients.values() if cl.alive]
    if not living:
        assert group.state is ConsumerGroupState.EMPTY
        return
    assert group.state is ConsumerGroupState.STABLE, f"seed {seed}"
    assert set(group.members) == {cl.member_id for cl in living}, f"seed {seed}"
    subscribed = {n for cl in living for n in cl.topics}
    expected = {(cat.topics_by_name[n].topic_id, p) for n in subscribed for p in cat.topics_by_name[n].partitions}
    owned = {(t, p) for cl in living for t, ps in cl.owned.items() for p in ps}
    assert owned == expected, f"seed {seed}"
