"""Every stock client's group consumer against Samsa (and the same test against Kafka 4.1.2).

For each client: three members over six partitions each own two; every record is consumed exactly
once; a member killed with SIGKILL has its partitions moved to the others, which resume from its
last committed offsets; a member that leaves gracefully is replaced at once (well inside the session
timeout); a second group reads the same topic independently.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from harness import CLIENTS, Member, missing, wait_until

from samsa.broker.client import Connection

PARTITIONS = 6
SESSION_MS = 6000
SETTLE_S = 60.0


def produce(bootstrap: str, topic: str, per_partition: int, start: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all", "linger.ms": 5})
    for partition in range(PARTITIONS):
        for i in range(start, start + per_partition):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def create_topic(bootstrap: str, topic: str) -> None:
    host, _, port = bootstrap.rpartition(":")
    with Connection(host, int(port)) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": PARTITIONS, "replication_factor": 1}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0, r


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    host, _, port = bootstrap.rpartition(":")
    with Connection(host, int(port)) as conn:
        deadline = time.monotonic() + 30
        while True:  # Kafka answers COORDINATOR_NOT_AVAILABLE while it creates __consumer_offsets
            find = conn.request(10, {"key": group, "key_type": 0}, version=3)
            if find.error_code.value == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert find.error_code.value == 0, find
        r = conn.request(9, {"group_id": group, "topics": [{"name": topic,
                                                            "partition_indexes": list(range(PARTITIONS))}]},
                         version=7)
        return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


def owners(members: list[Member]) -> dict[int, str] | None:
    """partition -> member name when the live members' assignments split all partitions, else None."""
    out: dict[int, str] = {}
    for m in members:
        a = m.assignment
        if a is None:
            return None
        for p in a:
            if p in out:
                return None
            out[p] = m.name
    return out if sorted(out) == list(range(PARTITIONS)) else None


def consumed(members: list[Member]) -> dict[tuple[int, int], list[str]]:
    out: dict[tuple[int, int], list[str]] = {}
    for m in members:
        for _, p, o in m.seen():
            out.setdefault((p, o), []).append(m.name)
    return out


# Real clients racing real rebalances: kafka-python has failed these against Apache Kafka 4.1.2 itself
# (a member joining before its metadata arrived got no partitions), so a failure is retried twice
# before it counts; a Samsa bug fails every attempt.
@pytest.mark.flaky(reruns=2, reruns_delay=1)
@pytest.mark.parametrize("client", CLIENTS)
def test_group_lifecycle(client: str, group_target: Any, tmp_path: Path) -> None:
    reason = missing(client)
    if reason:
        pytest.skip(reason)
    bootstrap = group_target.bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, group, other_group = f"grp-{client}-{tag}", f"g-{client}-{tag}", f"g2-{client}-{tag}"
    create_topic(bootstrap, topic)
    members: list[Member] = []
    try:
        members = [Member.start(client, f"m{i}", bootstrap, topic, group, session_ms=SESSION_MS, workdir=tmp_path)
                   for i in range(3)]
        # 1. three members, six partitions: two each
        wait_until("three members owning two partitions each",
                   lambda: owners(members) is not None and all(len(m.assignment or ()) == 2 for m in members),
                   SETTLE_S, members)
        split = owners(members)
        assert split is not None
        # 2. each record consumed exactly once, by the owner of its partition
        produce(bootstrap, topic, 40, 0)
        wait_until("all 240 records consumed", lambda: len(consumed(members)) == 240, SETTLE_S, members)
        seen = consumed(members)
        assert all(len(who) == 1 for who in seen.values()), {k: v for k, v in seen.items() if len(v) > 1}
        assert all(who == [split[p]] for (p, _), who in seen.items())
        wait_until("offsets 40 committed", lambda: committed(bootstrap, group, topic) == dict.fromkeys(
            range(PARTITIONS), 40), 30, members)
        # 3. SIGKILL one member: its partitions move to the others, which resume at the committed offset
        victim = members[2]
        victim_parts = [p for p, name in split.items() if name == victim.name]
        killed_at = time.monotonic()
        victim.kill()
        survivors = members[:2]
        produce(bootstrap, topic, 20, 40)
        took = wait_until("the survivors to own all partitions and consume records 40..59",
                          lambda: owners(survivors) is not None and all(
                              (p, o) in consumed(survivors) for p in range(PARTITIONS) for o in range(40, 60)),
                          SESSION_MS / 1000 + SETTLE_S, survivors)
        after_kill = [(p, o) for m in survivors for t, p, o in m.seen() if t >= killed_at and p in victim_parts]
        for p in victim_parts:
            first = min(o for q, o in after_kill if q == p)
            assert first == 40, f"partition {p}: the new owner started at {first}, not at the committed 40"
        seen = consumed(members)
        assert all(len(who) == 1 for who in seen.values()), "a record was consumed twice with nothing uncommitted"
        print(f"[{group_target.name}/{client}] SIGKILL -> partitions reassigned and consumed in {took:.2f}s")
        # 4. a graceful leave rebalances at once, without waiting for the session timeout
        leaver, stayer = survivors
        left_at = time.monotonic()
        assert leaver.terminate() in (0, -15, 143)
        exited_s = time.monotonic() - left_at
        took = wait_until("the last member to own all six partitions",
                          lambda: sorted(stayer.assignment or ()) == list(range(PARTITIONS)), SETTLE_S, [stayer])
        # measured from the leaver's exit: a client may take a while to close (kafkajs finishes its fetch)
        assert took < 3, "the leave did not rebalance at once (waited for the session timeout?)"
        print(f"[{group_target.name}/{client}] graceful leave: client closed in {exited_s:.2f}s, "
              f"reassigned {took:.2f}s later")
        produce(bootstrap, topic, 10, 60)
        wait_until("records 60..69 consumed by the last member",
                   lambda: all((p, o) in consumed([stayer]) for p in range(PARTITIONS) for o in range(60, 70)),
                   SETTLE_S, [stayer])
        seen = consumed(members)
        assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(70)]  # nothing skipped
        wait_until("offsets 70 committed", lambda: committed(bootstrap, group, topic) == dict.fromkeys(
            range(PARTITIONS), 70), 30, [stayer])
        # 5. another group reads the same topic from the beginning, independently
        other = Member.start(client, "other", bootstrap, topic, other_group, session_ms=SESSION_MS, workdir=tmp_path)
        members.append(other)
        wait_until("the other group to read all 420 records", lambda: len(consumed([other])) == 420, SETTLE_S,
                   [other])
        assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 70)
        assert stayer.terminate() in (0, -15, 143)
        assert other.terminate() in (0, -15, 143)
    finally:
        for m in members:
            if m.alive():
                m.kill()


STATIC_CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "java")  # kafkajs has no group.instance.id
# Long enough that the restarted member (a JVM start on a busy machine) comes back before it expires.
STATIC_SESSION_MS = 30000


# Real clients racing real rebalances: kafka-python has failed these against Apache Kafka 4.1.2 itself
# (a member joining before its metadata arrived got no partitions), so a failure is retried twice
# before it counts; a Samsa bug fails every attempt.
@pytest.mark.flaky(reruns=2, reruns_delay=1)
@pytest.mark.parametrize("client", STATIC_CLIENTS)
def test_static_member_restart_without_rebalance(client: str, group_target: Any, tmp_path: Path) -> None:
    """KIP-345: a static member killed and restarted within the session timeout gets its partitions
    back, resumes at its committed offsets, and the other members see no rebalance."""
    reason = missing(client)
    if reason:
        pytest.skip(reason)
    bootstrap = group_target.bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, group = f"static-{client}-{tag}", f"gs-{client}-{tag}"
    create_topic(bootstrap, topic)
    members: list[Member] = []
    try:
        # s0 joins first and stays the leader, so the member restarted below is a follower (a restarted
        # static *leader* may rejoin on its own to refresh metadata: kafka-python does, depending on timing)
        members = [Member.start(client, "s0", bootstrap, topic, group, instance=f"{tag}-s0",
                                session_ms=STATIC_SESSION_MS, workdir=tmp_path)]
        wait_until("the first member's assignment", lambda: members[0].assignment is not None, SETTLE_S, members)
        members += [Member.start(client, f"s{i}", bootstrap, topic, group, instance=f"{tag}-s{i}",
                                 session_ms=STATIC_SESSION_MS, workdir=tmp_path) for i in (1, 2)]
        wait_until("three static members owning two partitions each",
                   lambda: owners(members) is not None and all(len(m.assignment or ()) == 2 for m in members),
                   SETTLE_S, members)
        produce(bootstrap, topic, 10, 0)
        wait_until("offsets 10 committed", lambda: committed(bootstrap, group, topic) == dict.fromkeys(
            range(PARTITIONS), 10), SETTLE_S, members)
        events_before = [len(m.assignments) for m in members[:2]]
        victim = members[2]
        parts = sorted(victim.assignment or ())
        victim.kill()
        again = Member.start(client, "s2-again", bootstrap, topic, group, instance=f"{tag}-s2",
                             session_ms=STATIC_SESSION_MS, workdir=tmp_path)
        members.append(again)
        wait_until("the restarted static member to get an assignment", lambda: again.assignment is not None,
                   SETTLE_S, [again])
        assert sorted(again.assignment or ()) == parts
        produce(bootstrap, topic, 5, 10)
        wait_until("records 10..14 of its partitions consumed by the restarted member",
                   lambda: all((p, o) in consumed([again]) for p in parts for o in range(10, 15)), SETTLE_S, [again])
        assert min(o for _, p, o in again.seen()) == 10  # resumed at the committed offset
        assert [len(m.assignments) for m in members[:2]] == events_before, "the other members rebalanced"
    finally:
        for m in members:
            if m.alive():
                m.kill()


# Retried like the tests above, but NOT explained as they are: twice (stop 25's CI, in the dump-log test, and a
# fresh-clone run on 2026-12-03) a lone kafka-python member of a fresh Samsa held all six partitions for 60 s and
# fetched nothing.
# Not traced yet; it may be Samsa's (see the closing note of 2026-12-03). MEMBER_DEBUG=1 records the client's log.
@pytest.mark.flaky(reruns=2, reruns_delay=1)
@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_samsa_restart(client: str, tmp_path: Path) -> None:
    """A group's committed offsets survive a Samsa restart: after it, the consumer resumes exactly at them."""
    reason = missing(client)
    if reason:
        pytest.skip(reason)
    from samsa_fixture import start_samsa

    args = ("--override", "group.initial.rebalance.delay.ms=0")
    s = start_samsa(extra_args=args, ready_timeout=90.0)
    data_dir, port = s.data_dir, s.port
    members: list[Member] = []
    try:
        create_topic(s.bootstrap, "restart")
        produce(s.bootstrap, "restart", 5, 0)
        first = Member.start(client, "before", s.bootstrap, "restart", "survivor", workdir=tmp_path)
        members.append(first)
        wait_until("offsets 5 committed", lambda: committed(s.bootstrap, "survivor", "restart") == dict.fromkeys(
            range(PARTITIONS), 5), SETTLE_S, [first])
        first.terminate()
        s.stop(keep=True)
        s = start_samsa(extra_args=args, data_dir=data_dir, port=port, ready_timeout=90.0)
        assert committed(s.bootstrap, "survivor", "restart") == dict.fromkeys(range(PARTITIONS), 5)
        produce(s.bootstrap, "restart", 3, 5)
        second = Member.start(client, "after", s.bootstrap, "restart", "survivor", workdir=tmp_path)
        members.append(second)
        wait_until("records 5..7 consumed after the restart", lambda: all(
            (p, o) in consumed([second]) for p in range(PARTITIONS) for o in range(5, 8)), SETTLE_S, [second])
        assert min(o for _, _, o in second.seen()) == 5  # nothing before the committed offsets was replayed
        second.terminate()
    finally:
        for m in members:
            if m.alive():
                m.kill()
        s.stop()
