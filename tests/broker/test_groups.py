"""Consumer groups over the raw protocol against a real `samsa serve` process (one request per call)."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.client import Connection

# These tests are about the group protocol (generations, members, states) and commit positions on empty
# topics: the refusal of commits past the log end is tested in test_commit_bounds.py.
GROUP_ARGS = ("--override", "group.initial.rebalance.delay.ms=0", "--override", "group.min.session.timeout.ms=1000",
              "--override", "samsa.offset.commit.past.log.end.enable=true")
SESSION_MS = 30000  # no test here relies on expiry; long sessions keep slow machines from flaking


def wait_for_internal_topics(process: Any, key_types: tuple[int, ...]) -> None:
    """FindCoordinator until the coordinators' internal topics exist. Creating one is a metadata write,
    committed once fsynced off the event loop, so the first answers may be COORDINATOR_NOT_AVAILABLE (as
    Kafka's are); clients retry it, and the tests here start from a broker past that point."""
    with process.connect() as conn:
        for key_type in key_types:
            for _ in range(200):
                if conn.request(10, {"key": "warm-up", "key_type": key_type}, version=3).error_code.value == 0:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"no coordinator for key type {key_type}")


@pytest.fixture
def broker(samsa_factory: Any) -> Iterator[Any]:
    process = samsa_factory(extra_args=GROUP_ARGS)
    process.start()
    wait_for_internal_topics(process, (0,))
    yield process
    assert process.proc is None or process.proc.poll() is None, f"samsa died:\n{process.log_tail()}"
    process.stop()


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(parts: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps)) + b"".join(
            struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def create_topic(conn: Connection, name: str, partitions: int = 2) -> None:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
                          "timeout": 30000})
    assert r.topics[0].error_code.value == 0


def join(conn: Connection, group: str, member_id: str = "", instance: str | None = None, version: int = 9,
         topic: str = "t", protocols: list[tuple[str, bytes]] | None = None) -> Any:
    return conn.request(11, {
        "group_id": group, "session_timeout": SESSION_MS, "rebalance_timeout": 20000, "member_id": member_id,
        "group_instance_id": instance, "protocol_type": "consumer",
        "protocols": [{"name": n, "metadata": m} for n, m in (protocols or [("range", subscription(topic))])],
    }, version=version)


def join_new(conn: Connection, group: str, **kw: Any) -> Any:
    """The v4+ round trip: MEMBER_ID_REQUIRED (79) first, then join with the id we were given."""
    first = join(conn, group, **kw)
    if first.error_code.value == 79:
        return join(conn, group, member_id=first.member_id, **kw)
    return first


def sync(conn: Connection, group: str, generation: int, member_id: str,
         assignments: dict[str, bytes] | None = None, version: int = 5) -> Any:
    return conn.request(14, {
        "group_id": group, "generation_id": generation, "member_id": member_id, "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }, version=version)


def heartbeat(conn: Connection, group: str, generation: int, member_id: str) -> int:
    r = conn.request(12, {"group_id": group, "generation_id": generation, "member_id": member_id})
    return int(r.error_code.value)


def commit(conn: Connection, group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int],
           version: int = 9, metadata: str = "") -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                         "committed_metadata": metadata})
    r = conn.request(8, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                         "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, version=version)
    return {(t.name, p.partition_index): int(p.error_code.value) for t in r.topics for p in t.partitions}


def fetch_offsets(conn: Connection, group: str, partitions: list[tuple[str, int]] | None,
                  version: int = 9) -> dict[tuple[str, int], int]:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    if version >= 8:
        r = conn.request(9, {"groups": [{"group_id": group, "topics": topics}]}, version=version)
        assert r.groups[0].error_code.value == 0
        return {(t.name, p.partition_index): p.committed_offset for t in r.groups[0].topics for p in t.partitions}
    r = conn.request(9, {"group_id": group, "topics": topics}, version=version)
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def stable_single(conn: Connection, group: str, topic: str = "t") -> tuple[str, int]:
    j = join_new(conn, group, topic=topic)
    assert j.error_code.value == 0 and j.leader == j.member_id
    s = sync(conn, group, j.generation_id, j.member_id, {j.member_id: assignment({topic: [0, 1]})})
    assert s.error_code.value == 0
    return j.member_id, j.generation_id


def in_thread(fn: Any, *args: Any, **kw: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args, **kw)), daemon=True)
    t.start()
    return t, out


def test_find_coordinator_all_versions_and_offsets_topic(broker: Any) -> None:
    with broker.connect() as conn:
        for v in range(0, 4):
            values: dict[str, Any] = {"key": "g1", "key_type": 0}
            r = conn.request(10, values, version=v)
            assert r.error_code.value == 0 and r.node_id == 1 and r.port == broker.port
        r = conn.request(10, {"key_type": 0, "coordinator_keys": ["a", "b", "c"]}, version=6)
        assert [(c.key, c.error_code.value, c.port) for c in r.coordinators] == [
            ("a", 0, broker.port), ("b", 0, broker.port), ("c", 0, broker.port)]
        md = conn.request(3, {"topics": [{"name": "__consumer_offsets"}], "allow_auto_topic_creation": False})
        t = md.topics[0]
        assert t.error_code.value == 0 and len(t.partitions) == 50 and t.is_internal


def test_join_sync_heartbeat_commit_fetch(broker: Any) -> None:
    with broker.connect() as conn:
        create_topic(conn, "t")
        first = join(conn, "g")
        assert first.error_code.value == 79 and first.member_id  # MEMBER_ID_REQUIRED round trip (v4+)
        member_id, generation = stable_single(conn, "g")
        assert generation == 1
        assert heartbeat(conn, "g", generation, member_id) == 0
        assert commit(conn, "g", generation, member_id, {("t", 0): 5, ("t", 1): 7}) == {("t", 0): 0, ("t", 1): 0}
        assert fetch_offsets(conn, "g", [("t", 0), ("t", 1), ("t", 9)]) == {("t", 0): 5, ("t", 1): 7, ("t", 9): -1}
        assert fetch_offsets(conn, "g", None, version=7) == {("t", 0): 5, ("t", 1): 7}
        assert commit(conn, "g", generation, member_id, {("nope", 0): 1}) == {("nope", 0): 3}


def test_stale_generation_commit_rejected(broker: Any) -> None:
    with broker.connect() as a, broker.connect() as b:
        create_topic(a, "t")
        a_id, gen1 = stable_single(a, "g")
        # b joins: the group rebalances and b's JoinGroup waits until a rejoins
        first_b = join(b, "g")
        thread, out = in_thread(join, b, "g", member_id=first_b.member_id)
        for _ in range(100):
            if heartbeat(a, "g", gen1, a_id) == 27:  # REBALANCE_IN_PROGRESS: time to rejoin
                break
        else:
            pytest.fail("no rebalance signalled")
        ja = join(a, "g", member_id=a_id)
        thread.join(10)
        jb = out[0]
        assert ja.error_code.value == 0 and jb.error_code.value == 0
        gen2 = ja.generation_id
        assert gen2 == jb.generation_id == gen1 + 1
        leader, follower = (a, b) if ja.leader == a_id else (b, a)
        leader_id = ja.leader
        follower_id = jb.member_id if leader is a else a_id
        ft, fout = in_thread(sync, follower, "g", gen2, follower_id)
        ls = sync(leader, "g", gen2, leader_id, {leader_id: assignment({"t": [0]}),
                                                 follower_id: assignment({"t": [1]})})
        ft.join(10)
        assert ls.error_code.value == 0 and fout[0].error_code.value == 0
        assert fout[0].assignment == assignment({"t": [1]})
        # the old generation is fenced; the new one commits
        assert commit(a, "g", gen1, a_id, {("t", 0): 1}) == {("t", 0): 22}
        assert heartbeat(a, "g", gen1, a_id) == 22
        assert commit(a, "g", gen2, a_id, {("t", 0): 1}) == {("t", 0): 0}


def test_unknown_member_and_rebalance_in_progress(broker: Any) -> None:
    with broker.connect() as a, broker.connect() as b:
        create_topic(a, "t")
        a_id, gen = stable_single(a, "g")
        assert heartbeat(a, "g", gen, "ghost") == 25
        assert commit(a, "g", gen, "ghost", {("t", 0): 1}) == {("t", 0): 25}
        assert sync(a, "g", gen, "ghost").error_code.value == 25
        assert heartbeat(a, "missing-group", 1, "ghost") == 25
        first_b = join(b, "g")
        thread, _ = in_thread(join, b, "g", member_id=first_b.member_id)
        for _ in range(100):
            code = heartbeat(a, "g", gen, a_id)
            if code == 27:
                break
        assert code == 27
        assert sync(a, "g", gen, a_id).error_code.value == 27
        join(a, "g", member_id=a_id)  # completes the join phase; then the group waits for the leader's sync
        thread.join(10)


def test_generation_minus_one_commit_to_empty_group(broker: Any) -> None:
    with broker.connect() as conn:
        create_topic(conn, "t")
        # a group that does not exist yet: a "simple" group is created
        assert commit(conn, "simple", -1, "", {("t", 0): 3}) == {("t", 0): 0}
        assert fetch_offsets(conn, "simple", [("t", 0)]) == {("t", 0): 3}
        # a consumer group, once empty, accepts an admin commit; while active it does not
        member_id, _gen = stable_single(conn, "cg")
        assert commit(conn, "cg", -1, "", {("t", 0): 9}) == {("t", 0): 25}
        r = conn.request(13, {"group_id": "cg", "members": [{"member_id": member_id}]}, version=5)
        assert r.error_code.value == 0 and r.members[0].error_code.value == 0
        assert commit(conn, "cg", -1, "", {("t", 0): 9}) == {("t", 0): 0}
        assert fetch_offsets(conn, "cg", [("t", 0)], version=1) == {("t", 0): 9}


def test_describe_list_delete(broker: Any) -> None:
    with broker.connect() as conn:
        create_topic(conn, "t")
        member_id, gen = stable_single(conn, "live")
        commit(conn, "idle", -1, "", {("t", 0): 1})
        d = conn.request(15, {"groups": ["live", "nope"], "include_authorized_operations": False}, version=5)
        live, nope = d.groups
        assert live.group_state == "Stable" and live.protocol_type == "consumer" and live.protocol_data == "range"
        assert [m.member_id for m in live.members] == [member_id]
        assert live.members[0].member_assignment == assignment({"t": [0, 1]})
        assert live.members[0].client_host == "/127.0.0.1"
        assert nope.group_state == "Dead" and nope.error_code.value == 0
        d6 = conn.request(15, {"groups": ["nope"]}, version=6)
        assert d6.groups[0].error_code.value == 69
        listed = conn.request(16, {}, version=5)
        assert {(g.group_id, g.group_state) for g in listed.groups} == {("live", "Stable"), ("idle", "Empty")}
        stable = conn.request(16, {"states_filter": ["stable"]}, version=4)
        assert [g.group_id for g in stable.groups] == ["live"]
        r = conn.request(42, {"groups_names": ["live", "idle", "nope"]}, version=2)
        assert [(x.group_id, x.error_code.value) for x in r.results] == [("live", 68), ("idle", 0), ("nope", 69)]
        assert fetch_offsets(conn, "idle", [("t", 0)]) == {("t", 0): -1}
        # OffsetDelete: refused for a subscribed topic, allowed for others
        commit(conn, "live", gen, member_id, {("t", 0): 4})
        r = conn.request(47, {"group_id": "live", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})
        assert r.error_code.value == 0 and r.topics[0].partitions[0].error_code.value == 86
        # deleting a group never deletes topic data
        md = conn.request(3, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
        assert md.topics[0].error_code.value == 0


def test_leave_group_v0_and_batch(broker: Any) -> None:
    with broker.connect() as conn:
        create_topic(conn, "t")
        member_id, _ = stable_single(conn, "g0")
        r = conn.request(13, {"group_id": "g0", "member_id": member_id}, version=0)
        assert r.error_code.value == 0
        r = conn.request(13, {"group_id": "g0", "member_id": member_id}, version=1)
        assert r.error_code.value == 25


def test_static_member_restart_keeps_assignment(broker: Any) -> None:
    with broker.connect() as conn:
        create_topic(conn, "t")
        j = join(conn, "sg", instance="i-1")
        assert j.error_code.value == 0  # static members skip the member-id round trip
        sync(conn, "sg", j.generation_id, j.member_id, {j.member_id: assignment({"t": [0, 1]})})
    with broker.connect() as again:
        j2 = join(again, "sg", instance="i-1")
        assert j2.error_code.value == 0 and j2.member_id != j.member_id
        assert j2.generation_id == j.generation_id  # no rebalance
        s = again.request(14, {"group_id": "sg", "generation_id": j2.generation_id, "member_id": j2.member_id,
                               "group_instance_id": "i-1", "assignments": []}, version=5)
        assert s.error_code.value == 0 and s.assignment == assignment({"t": [0, 1]})
        r = again.request(12, {"group_id": "sg", "generation_id": j.generation_id, "member_id": j.member_id,
                               "group_instance_id": "i-1"}, version=4)
        assert r.error_code.value == 82  # FENCED_INSTANCE_ID


def test_offsets_and_groups_survive_restart(samsa_factory: Any) -> None:
    s = samsa_factory(extra_args=GROUP_ARGS)
    s.start()
    wait_for_internal_topics(s, (0,))
    with s.connect() as conn:
        create_topic(conn, "t")
        member_id, gen = stable_single(conn, "durable")
        assert commit(conn, "durable", gen, member_id, {("t", 0): 11, ("t", 1): 12}, metadata="m") == {
            ("t", 0): 0, ("t", 1): 0}
        assert commit(conn, "simple", -1, "", {("t", 1): 4}) == {("t", 1): 0}
        conn.request(13, {"group_id": "durable", "members": [{"member_id": member_id}]}, version=5)
    assert s.stop() == 0
    s.start()
    with s.connect() as conn:
        assert fetch_offsets(conn, "durable", [("t", 0), ("t", 1)]) == {("t", 0): 11, ("t", 1): 12}
        assert fetch_offsets(conn, "simple", None, version=7) == {("t", 1): 4}
        listed = {g.group_id: g.group_state for g in conn.request(16, {}, version=4).groups}
        assert listed == {"durable": "Empty", "simple": "Empty"}
        # the generation continues where it left off
        j = join_new(conn, "durable")
        assert j.generation_id == gen + 2
    s.stop(kill=True)
    s.start()  # after SIGKILL too
    with s.connect() as conn:
        assert fetch_offsets(conn, "durable", [("t", 0)]) == {("t", 0): 11}


def test_every_advertised_version(broker: Any) -> None:
    """Each group API at each version we advertise round-trips with the fields that version has."""
    with broker.connect() as conn:
        create_topic(conn, "t")
        advertised = {k: conn.versions[k] for k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47)}
        assert advertised == {8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5),
                              15: (0, 6), 16: (0, 5), 42: (0, 3), 47: (0, 0)}
        assert conn.versions[68] == (0, 1) and conn.versions[69] == (0, 1)  # KIP-848, as the reference Kafka
        # OffsetCommit/OffsetFetch v10 name topics by id: tests/acl/test_offsets_by_topic_id.py
        for v in range(0, 10):
            group = f"v{v}"
            j = join(conn, group, version=v)
            if j.error_code.value == 79:
                j = join(conn, group, member_id=j.member_id, version=v)
            assert j.error_code.value == 0 and j.generation_id == 1, (v, j)
            sv = min(v, 5)
            s = conn.request(14, {"group_id": group, "generation_id": 1, "member_id": j.member_id,
                                  "protocol_type": "consumer", "protocol_name": "range",
                                  "assignments": [{"member_id": j.member_id, "assignment": b"A"}]}, version=sv)
            assert s.error_code.value == 0 and s.assignment == b"A", (v, s)
            hb = conn.request(12, {"group_id": group, "generation_id": 1, "member_id": j.member_id},
                              version=min(v, 4))
            assert hb.error_code.value == 0
            cv = max(2, v)
            assert commit(conn, group, 1, j.member_id, {("t", 0): v + 1}, version=cv) == {("t", 0): 0}
            assert fetch_offsets(conn, group, [("t", 0)], version=max(1, v)) == {("t", 0): v + 1}
            d = conn.request(15, {"groups": [group]}, version=min(v, 6))
            assert d.groups[0].group_state == "Stable" and d.groups[0].members[0].member_assignment == b"A"
            lv = min(v, 5)
            if lv >= 3:
                r = conn.request(13, {"group_id": group, "members": [{"member_id": j.member_id}]}, version=lv)
                assert r.error_code.value == 0 and r.members[0].error_code.value == 0
            else:
                r = conn.request(13, {"group_id": group, "member_id": j.member_id}, version=lv)
                assert r.error_code.value == 0
        for v in range(0, 6):
            listed = conn.request(16, {}, version=v)
            assert {g.group_id for g in listed.groups} == {f"v{i}" for i in range(10)}
        for v in range(0, 4):
            r = conn.request(42, {"groups_names": [f"v{v}"]}, version=v)
            assert r.results[0].error_code.value == 0 and getattr(r.results[0], "error_message", None) is None
        r = conn.request(47, {"group_id": "v5", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
                         version=0)
        assert r.error_code.value == 0 and r.topics[0].partitions[0].error_code.value == 0
        assert fetch_offsets(conn, "v5", [("t", 0)]) == {("t", 0): -1}


def test_session_expiry_by_the_broker_timer(broker: Any) -> None:
    """A member that stops heartbeating is removed by the broker's own timer, with no request arriving."""
    import time

    with broker.connect() as conn:
        create_topic(conn, "t")
        values = {"group_id": "quiet", "session_timeout": 1000, "rebalance_timeout": 1000, "member_id": "",
                  "group_instance_id": None, "protocol_type": "consumer",
                  "protocols": [{"name": "range", "metadata": subscription("t")}]}
        j = conn.request(11, values, version=3)  # v3: no member-id round trip
        assert j.error_code.value == 0
        sync(conn, "quiet", j.generation_id, j.member_id, {j.member_id: b""})
        deadline = time.monotonic() + 15
        state = ""
        while time.monotonic() < deadline:
            state = conn.request(15, {"groups": ["quiet"]}, version=5).groups[0].group_state
            if state == "Empty":
                break
            time.sleep(0.2)
        assert state == "Empty"
        assert heartbeat(conn, "quiet", j.generation_id, j.member_id) == 25
