"""Failures of real processes: the active controller killed (kill -9) and restarted, two of three
voters down, and a broker that stops heartbeating (SIGSTOP) fenced and taken back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from cluster_harness import Cluster, QuorumView, unique, wait_for

from samsa.kproto.errors import ErrorCode

# Generous bounds: these catch a cluster that does not recover, not a slow machine. The defaults behind
# them: controller.quorum.fetch.timeout.ms 2000, election timeout 1000, forwarding timeout 10 s.
RECOVERY_BOUND_S = 20.0
NO_QUORUM_ANSWER_BOUND_S = 15.0


def _create_succeeds(cluster: Cluster, node_id: int, topic: str, partitions: int = 1) -> bool | None:
    error, message = cluster.create_topic(node_id, topic, partitions, timeout_s=15)
    if error in (ErrorCode.none, ErrorCode.topic_already_exists):  # the latter: an earlier try's commit
        return True
    print(f"  CreateTopics through node {node_id}: {error.name} {message}")
    return None


@pytest.mark.timeout(150)
def test_kill_9_the_active_controller_then_restart_it(cluster: Cluster) -> None:
    old = wait_for("a leader", cluster.quorum_leader, RECOVERY_BOUND_S)[0]
    victim = old.leader_id
    survivors = [n for n in cluster.node_ids if n != victim]
    before = unique("before")
    assert cluster.create_topic(survivors[0], before, 3) == (ErrorCode.none, None)

    killed_at = time.monotonic()
    cluster.kill(victim)

    def new_leader() -> QuorumView | None:
        view = cluster.quorum_leader(survivors)
        return view if view is not None and view.leader_id != victim else None

    new, election_s = wait_for("a new leader among the survivors", new_leader, RECOVERY_BOUND_S)
    assert new.leader_id in survivors
    assert new.leader_epoch > old.leader_epoch
    # Through the survivor that is not the new controller: the request is forwarded to it.
    via = next(n for n in survivors if n != new.leader_id)
    after = unique("after")
    wait_for(f"CreateTopics through node {via} to succeed", lambda: _create_succeeds(cluster, via, after, 2),
             RECOVERY_BOUND_S)
    create_s = time.monotonic() - killed_at
    print(f"kill -9 of controller {victim} (epoch {old.leader_epoch}): node {new.leader_id} leads epoch "
          f"{new.leader_epoch} {election_s:.2f} s later; CreateTopics through node {via} succeeded "
          f"{create_s:.2f} s after the kill")
    assert create_s < RECOVERY_BOUND_S
    for node_id in survivors:
        wait_for(f"{after} on node {node_id}", lambda n=node_id: cluster.topic_visible(n, after, 2), 10)

    restarted_at = time.monotonic()
    cluster.start(victim)
    caught_up_s = wait_for(f"node {victim} to show {before} and {after} again",
                           lambda: cluster.topic_visible(victim, before, 3) and cluster.topic_visible(victim, after, 2),
                           30)[1]

    def rejoined() -> QuorumView | None:
        view = cluster.quorum_leader(survivors)
        if view is None or view.leader_id != new.leader_id or view.high_watermark <= 0:
            return None
        return view if view.voters.get(victim, -1) >= view.high_watermark else None

    view, rejoin_s = wait_for(f"node {victim}'s log end offset to reach the high watermark", rejoined, 30)
    assert set(view.voters) == set(cluster.node_ids)
    assert view.leader_epoch >= new.leader_epoch
    # It follows the new leader (it must not come back claiming its old epoch's leadership).
    own = wait_for(f"node {victim} to know the leader",
                   lambda: (v if (v := cluster.describe_quorum(victim)) and v.leader_id >= 0 else None), 10)[0]
    assert own.leader_id == new.leader_id and own.leader_epoch == view.leader_epoch
    wait_for("every node to list all three brokers again",
             lambda: all(cluster.brokers(n) == set(cluster.node_ids) for n in cluster.node_ids), 30)
    print(f"restarted node {victim}: topics visible after {caught_up_s:.2f} s, log end offset "
          f"{view.voters[victim]} >= high watermark {view.high_watermark} after {rejoin_s:.2f} s, all brokers "
          f"listed {time.monotonic() - restarted_at:.2f} s after the restart")


@pytest.mark.timeout(150)
def test_two_of_three_voters_down_fails_cleanly_then_recovers(cluster: Cluster) -> None:
    leader = wait_for("a leader", cluster.quorum_leader, RECOVERY_BOUND_S)[0]
    # The survivor is the leader: it takes the write but cannot commit it, the hardest case to answer.
    survivor = leader.leader_id
    down = [n for n in cluster.node_ids if n != survivor]
    for node_id in down:
        cluster.kill(node_id)

    for attempt in range(2):
        started = time.monotonic()
        error, message = cluster.create_topic(survivor, unique("doomed"), timeout_s=60)
        took = time.monotonic() - started
        print(f"attempt {attempt + 1} without a majority: {error.name} ({message}) after {took:.1f} s")
        assert error in (ErrorCode.request_timed_out, ErrorCode.not_controller), (error, message)
        assert "no answer" not in (message or ""), message  # an error response, not a dropped connection
        assert took < NO_QUORUM_ANSWER_BOUND_S
    view = cluster.describe_quorum(survivor)
    assert view is not None and view.leader_id == -1, view  # it resigned: no leader without a majority

    restarted_at = time.monotonic()
    cluster.start(down[0])
    recovered = unique("recovered")
    wait_for("CreateTopics through the survivor", lambda: _create_succeeds(cluster, survivor, recovered),
             RECOVERY_BOUND_S + 10)
    print(f"creation works again {time.monotonic() - restarted_at:.2f} s after restarting node {down[0]}")
    for node_id in (survivor, down[0]):
        wait_for(f"{recovered} on node {node_id}", lambda n=node_id: cluster.topic_visible(n, recovered, 1), 10)


@pytest.mark.timeout(150)
def test_a_silent_broker_is_fenced_and_comes_back(cluster_factory: Callable[..., Cluster]) -> None:
    session_ms = 3000
    cluster = cluster_factory(
        overrides=(f"broker.session.timeout.ms={session_ms}", "broker.heartbeat.interval.ms=500"))
    leader = wait_for("a leader", cluster.quorum_leader, RECOVERY_BOUND_S)[0].leader_id
    victim, observer = (n for n in cluster.node_ids if n != leader)
    topic, partitions = unique("fenced"), 6
    assert cluster.create_topic(leader, topic, partitions) == (ErrorCode.none, None)
    placement = wait_for("the topic everywhere",
                         lambda: cluster.leaders(observer, topic) if cluster.topic_visible(leader, topic, partitions)
                         else None, 10)[0]
    victims = sorted(p for p, (lead, _) in placement.items() if lead == victim)
    assert victims, placement

    paused_at = time.monotonic()
    cluster.pause(victim)
    try:
        def fenced(node_id: int) -> bool:
            leaders = cluster.leaders(node_id, topic)
            brokers = cluster.brokers(node_id)
            return (brokers is not None and victim not in brokers and leaders is not None
                    and all(leaders[p] == (-1, ErrorCode.leader_not_available) for p in victims))

        fenced_s = wait_for(f"node {observer} to drop broker {victim}", lambda: fenced(observer), 20)[1]
        assert fenced(leader)
        print(f"SIGSTOP of broker {victim}: fenced after {fenced_s:.2f} s (session {session_ms} ms); "
              f"partitions {victims} have no leader")
        # Fenced by the session timeout, not at once (heartbeats come every 500 ms).
        assert fenced_s >= (session_ms - 1000) / 1000
        others = cluster.leaders(observer, topic)
        assert others is not None
        assert {p: lead for p, (lead, _) in others.items() if p not in victims} == {
            p: lead for p, (lead, _) in placement.items() if p not in victims}
    finally:
        cluster.resume(victim)
    resumed_at = time.monotonic()

    def back(node_id: int) -> bool:
        leaders = cluster.leaders(node_id, topic)
        return (cluster.brokers(node_id) == set(cluster.node_ids) and leaders is not None
                and all(leaders[p] == (victim, ErrorCode.none) for p in victims))

    back_s = wait_for(f"broker {victim} listed and leading {victims} again", lambda: back(observer), 20)[1]
    wait_for(f"node {victim} itself to agree", lambda: back(victim), 10)
    print(f"SIGCONT: broker {victim} unfenced and leading again after {back_s:.2f} s "
          f"({time.monotonic() - paused_at:.1f} s in all)")
    assert time.monotonic() - resumed_at < 30


@pytest.mark.timeout(150)
def test_a_new_leader_never_answers_from_a_stale_image(cluster: Cluster) -> None:
    """After a full restart every voter's image starts empty; the newly elected leader must not act as
    controller before its image reaches its epoch start (Kafka's maybeFireLeaderChange). An existing
    topic asked for again must get TOPIC_ALREADY_EXISTS or a retriable error, never a decision made
    on an empty image (INVALID_REPLICATION_FACTOR: "0 brokers registered", or a second topic)."""
    topic = unique("dup")
    wait_for("a leader", cluster.quorum_leader, RECOVERY_BOUND_S)
    wait_for(f"{topic} created", lambda: _create_succeeds(cluster, 1, topic), RECOVERY_BOUND_S)
    for node_id in cluster.node_ids:
        cluster.kill(node_id)
    for node_id in cluster.node_ids:
        cluster.start(node_id, wait=False)  # none can serve before a majority is back
    for node_id in cluster.node_ids:
        cluster.wait_listening(node_id)
    retriable = {ErrorCode.not_controller, ErrorCode.request_timed_out}
    answers: dict[int, list[tuple[ErrorCode, str | None]]] = {n: [] for n in cluster.node_ids}
    stop = threading.Event()

    def ask(node_id: int) -> None:
        # One thread per node, so the node that wins the election is asked right when it wins.
        deadline = time.monotonic() + RECOVERY_BOUND_S
        while not stop.is_set() and time.monotonic() < deadline:
            error, message = cluster.create_topic(node_id, topic, timeout_s=5)
            answers[node_id].append((error, message))
            if error == ErrorCode.topic_already_exists:
                return
            time.sleep(0.01)

    threads = [threading.Thread(target=ask, args=(n,), daemon=True) for n in cluster.node_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(RECOVERY_BOUND_S + 10)
    stop.set()
    for node_id, got in answers.items():
        wrong = [(e, m) for e, m in got if e not in retriable | {ErrorCode.topic_already_exists}]
        assert not wrong, (node_id, wrong[:3])
        assert got and got[-1][0] == ErrorCode.topic_already_exists, (node_id, got[-3:])
