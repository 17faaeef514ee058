"""Differential scenarios of the KIP-848 consumer protocol: ConsumerGroupHeartbeat (v1) answers, the
group's ConsumerGroupDescribe, and what the other group APIs say of such a group, step by step on Kafka
4.4.0 and on Samsa. Member ids are the client's (v1); topic ids are shown as topic names.

Kafka 4.3+ computes a group's target assignment at most once per group.consumer.assignment.interval.ms
(KIP-1263; 1 s by default, left so on both brokers): a step that needs a new target heartbeats until one was
computed (`heartbeat_until_assigned`), the same way on both."""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from differential.framework import Ctx, err, scenario
from samsa.broker.client import Connection
from samsa.broker.group.consumer_protocol import assigned_partitions


class Members:
    """Heartbeats of one scenario, with topic ids shown as their names."""

    def __init__(self, ctx: Ctx, conn: Connection, group: str, topics: list[str]) -> None:
        self.conn = conn
        self.group = group
        self.names = {uuid.UUID(str(ctx.topic_id(conn, t))): t for t in topics}
        self.ids = {name: topic_id for topic_id, name in self.names.items()}

    def named(self, parts: Any) -> list[tuple[str, list[int]]]:
        return sorted((self.names.get(t.topic_id, "?"), sorted(t.partitions)) for t in parts)

    def heartbeat(self, member_id: str, epoch: int, *, topics: list[str] | None = None, owned: Any = None,
                  instance: str | None = None, rebalance_timeout_ms: int = -1, regex: str | None = None,
                  assignor: str | None = None, group: str | None = None) -> dict[str, Any]:
        r = self.conn.request(68, {
            "group_id": self.group if group is None else group, "member_id": member_id, "member_epoch": epoch,
            "instance_id": instance, "rebalance_timeout": rebalance_timeout_ms, "subscribed_topic_names": topics,
            "subscribed_topic_regex": regex, "server_assignor": assignor,
            "topic_partitions": None if owned is None else [
                {"topic_id": self.ids[t], "partitions": ps} for t, ps in owned]}, version=1)
        return {"error": err(r), "message": r.error_message, "member_epoch": r.member_epoch,
                "member_id": r.member_id, "heartbeat_interval_ms": int(r.heartbeat_interval.total_seconds() * 1000),
                "assignment": None if r.assignment is None else self.named(r.assignment.topic_partitions)}

    def heartbeat_until_assigned(self, member_id: str, epoch: int, owned: Any) -> dict[str, Any]:
        """Heartbeat until the group has a target for its epoch (the assignment interval has passed since the
        last one); the answer of the heartbeat that computed it. The polls before it change nothing."""
        deadline = time.monotonic() + 30
        while True:
            r = self.heartbeat(member_id, epoch, owned=owned)
            d = self.describe()
            if r["error"] != "NONE(0)" or d["assignment_epoch"] >= d["group_epoch"] or time.monotonic() > deadline:
                return r
            time.sleep(0.1)

    def join(self, member_id: str, topics: list[str], **kw: Any) -> dict[str, Any]:
        return self.heartbeat(member_id, 0, topics=topics, owned=[], rebalance_timeout_ms=30000, **kw)

    def describe(self) -> dict[str, Any]:
        g = self.conn.request(69, {"group_ids": [self.group], "include_authorized_operations": False},
                              version=1).groups[0]
        return {"error": err(g), "state": g.group_state, "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name,
                "members": sorted((m.member_id, m.instance_id, m.member_epoch, sorted(m.subscribed_topic_names),
                                   self.named(m.assignment.topic_partitions),
                                   self.named(m.target_assignment.topic_partitions), m.member_type)
                                  for m in g.members)}


@scenario
def consumer_group_heartbeat(ctx: Ctx) -> Any:
    """Two members share a topic: the second waits while the first revokes; one leaves; errors on the way."""
    c = ctx.connect()
    ctx.find_coordinator(c, ctx.topic("g"), 0)
    topic = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, topic, 4))}
    m = Members(ctx, c, ctx.topic("g"), [topic])
    steps: list[tuple[str, Any]] = []
    a = m.join("member-a", [topic])
    steps.append(("a joins", a))
    steps.append(("a describe", m.describe()))
    b = m.join("member-b", [topic])
    steps.append(("b joins", b))  # within the assignment interval: the last target's epoch, nothing assigned
    steps.append(("describe while assigning", m.describe()))
    a2 = m.heartbeat_until_assigned("member-a", a["member_epoch"], a["assignment"])
    steps.append(("a asked to revoke", a2))
    steps.append(("describe while reconciling", m.describe()))
    b2 = m.heartbeat("member-b", b["member_epoch"], owned=[])
    steps.append(("b before a revoked", b2))
    a3 = m.heartbeat("member-a", a2["member_epoch"], owned=a2["assignment"])
    steps.append(("a revoked", a3))
    b3 = m.heartbeat("member-b", b2["member_epoch"], owned=[])
    steps.append(("b gets its partitions", b3))
    steps.append(("describe stable", m.describe()))
    # The lost-response rule: the previous epoch with a subset of the assignment is accepted.
    steps.append(("b previous epoch", m.heartbeat("member-b", b["member_epoch"], owned=[])))
    steps.append(("b epoch ahead", m.heartbeat("member-b", b3["member_epoch"] + 7, owned=[])))
    steps.append(("unknown member", m.heartbeat("member-x", 3)))
    steps.append(("a leaves", m.heartbeat("member-a", -1)))
    steps.append(("b after a left", m.heartbeat_until_assigned("member-b", b3["member_epoch"], b3["assignment"])))
    steps.append(("describe after leave", m.describe()))
    out["steps"] = steps
    return out


@scenario
def consumer_group_heartbeat_errors(ctx: Ctx) -> Any:
    """Requests Kafka refuses, and the answers of the other group APIs about a consumer group."""
    c = ctx.connect()
    group = ctx.topic("g")
    ctx.find_coordinator(c, group, 0)
    topic = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, topic, 2))}
    m = Members(ctx, c, group, [topic])
    out["empty member id"] = m.heartbeat("", 0, topics=[topic], owned=[], rebalance_timeout_ms=30000)
    out["no rebalance timeout"] = m.heartbeat("m1", 0, topics=[topic], owned=[])
    out["owned on join"] = m.heartbeat("m1", 0, topics=[topic], owned=[(topic, [0])], rebalance_timeout_ms=1000)
    out["no subscription"] = m.heartbeat("m1", 0, owned=[], rebalance_timeout_ms=1000)
    out["bad epoch"] = m.heartbeat("m1", -3)
    out["static leave without instance"] = m.heartbeat("m1", -2)
    out["unknown group"] = m.heartbeat("m1", 4, group=ctx.topic("nope"))
    out["unknown assignor"] = m.join("m1", [topic], assignor="nosuch")
    out["bad regex"] = m.heartbeat("m1", 0, regex="(", owned=[], rebalance_timeout_ms=1000)
    s = m.join("static-1", [topic], instance="inst", assignor="range")
    out["static joins"] = s
    out["instance taken"] = m.join("static-2", [topic], instance="inst")
    out["instance of another member"] = m.heartbeat("static-2", s["member_epoch"], instance="inst")
    commit = {"group_id": group, "generation_id_or_member_epoch": s["member_epoch"] + 1, "member_id": "static-1",
              "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                  {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}]}
    out["commit stale epoch"] = err(c.request(8, commit, version=9).topics[0].partitions[0])
    out["commit unknown member"] = err(c.request(8, {**commit, "member_id": "who"}, version=9).topics[0].partitions[0])
    out["commit ok"] = err(c.request(8, {**commit, "generation_id_or_member_epoch": s["member_epoch"]},
                                     version=9).topics[0].partitions[0])
    fetched = c.request(9, {"groups": [{"group_id": group, "member_id": "static-1", "member_epoch": 99,
                                        "topics": [{"name": topic, "partition_indexes": [0]}]}],
                            "require_stable": False}, version=9).groups[0]
    out["fetch stale epoch"] = err(fetched)
    listed = c.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
    out["list groups"] = [(g.protocol_type, g.group_state, g.group_type) for g in listed if g.group_id == group]
    for version in (5, 6):
        d = c.request(15, {"groups": [group], "include_authorized_operations": False}, version=version).groups[0]
        out[f"describe groups v{version}"] = {"error": err(d), "message": getattr(d, "error_message", None),
                                              "state": d.group_state, "protocol_type": d.protocol_type,
                                              "members": len(d.members)}
    out["describe"] = m.describe()
    out["static leaves for now"] = m.heartbeat("static-1", -2, instance="inst")
    out["static rejoins"] = m.join("static-2", [topic], instance="inst")
    out["describe after rejoin"] = m.describe()
    out["delete non-empty"] = err(c.request(42, {"groups_names": [group]}, version=2).results[0])
    return out


def _subscription(topic: str, owned: list[int]) -> bytes:
    """ConsumerProtocolSubscription v1 of `topic`, owning `owned` of it."""
    name = topic.encode()
    out = struct.pack(">hih", 1, 1, len(name)) + name + struct.pack(">i", -1)
    if not owned:
        return out + struct.pack(">i", 0)
    return out + struct.pack(">ih", 1, len(name)) + name + struct.pack(">i", len(owned)) + b"".join(
        struct.pack(">i", p) for p in owned)


class ClassicMember:
    """One classic consumer (JoinGroup v5, SyncGroup v5, Heartbeat v4) whose member id the coordinator picks;
    answers show it as "A" so the two brokers' ids compare."""

    def __init__(self, conn: Connection, group: str, topic: str) -> None:
        self.conn, self.group, self.topic = conn, group, topic
        self.member_id = ""

    def label(self, member_id: str) -> str:
        return "A" if member_id and member_id == self.member_id else ("" if not member_id else "other")

    def join(self, owned: list[int]) -> dict[str, Any]:
        r = self.conn.request(11, {"group_id": self.group, "session_timeout": 30000, "rebalance_timeout": 30000,
                                   "member_id": self.member_id, "group_instance_id": None,
                                   "protocol_type": "consumer", "reason": None,
                                   "protocols": [{"name": "range", "metadata": _subscription(self.topic, owned)}]},
                            version=7)
        if r.member_id:
            self.member_id = r.member_id
        return {"error": err(r), "generation": r.generation_id, "protocol_type": r.protocol_type,
                "protocol_name": r.protocol_name, "leader": self.label(r.leader), "member": self.label(r.member_id),
                "members": len(r.members)}

    def sync(self, generation: int, assign: list[int] | None = None) -> dict[str, Any]:
        assignments = []
        if assign is not None:
            name = self.topic.encode()
            data = (struct.pack(">hih", 1, 1, len(name)) + name + struct.pack(">i", len(assign))
                    + b"".join(struct.pack(">i", p) for p in assign) + struct.pack(">i", -1))
            assignments = [{"member_id": self.member_id, "assignment": data}]
        r = self.conn.request(14, {"group_id": self.group, "generation_id": generation, "member_id": self.member_id,
                                   "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": assignments}, version=5)
        parts = assigned_partitions(bytes(r.assignment)) or []
        return {"error": err(r), "protocol_name": r.protocol_name,
                "assignment": sorted(p for _, ps in parts for p in ps)}

    def heartbeat(self, generation: int) -> str:
        return err(self.conn.request(12, {"group_id": self.group, "generation_id": generation,
                                          "member_id": self.member_id, "group_instance_id": None}, version=4))


@scenario
def consumer_group_online_upgrade(ctx: Ctx) -> Any:
    """KIP-848's online migration: a classic member, then a consumer-protocol member joins (the group is
    upgraded); the classic member hands a partition over by rejoining; the consumer member leaves (downgrade)."""
    c = ctx.connect()
    group = ctx.topic("g")
    ctx.find_coordinator(c, group, 0)
    topic = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, topic, 2))}
    m = Members(ctx, c, group, [topic])
    a = ClassicMember(c, group, topic)
    steps: list[tuple[str, Any]] = []

    def group_type() -> Any:
        listed = c.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
        return [(g.protocol_type, g.group_state, g.group_type) for g in listed if g.group_id == group]

    steps.append(("a asks for an id", a.join([])))
    first = a.join([])
    steps.append(("a joins", first))
    steps.append(("a syncs as leader", a.sync(first["generation"], [0, 1])))
    steps.append(("a heartbeats", a.heartbeat(first["generation"])))
    steps.append(("classic group", group_type()))
    b = m.join("member-b", [topic])
    steps.append(("b joins: upgrade", b))
    steps.append(("consumer group", group_type()))
    described = m.describe()
    described["members"] = [(a.label(mid), *rest) if mid != "member-b" else (mid, *rest)
                            for mid, *rest in described["members"]]
    steps.append(("describe mixed", described))
    steps.append(("a told to rejoin", a.heartbeat(first["generation"])))
    steps.append(("a sync before rejoining", a.sync(first["generation"])))
    rejoined = a.join([0, 1])
    steps.append(("a rejoins owning both", rejoined))
    synced = a.sync(rejoined["generation"])
    steps.append(("a syncs", synced))
    steps.append(("a heartbeats while revoking", a.heartbeat(rejoined["generation"])))
    steps.append(("b before a revoked", m.heartbeat("member-b", b["member_epoch"], owned=[])))
    again = a.join(synced["assignment"])
    steps.append(("a rejoins after revoking", again))
    steps.append(("a syncs at the new epoch", a.sync(again["generation"])))
    steps.append(("a stable", a.heartbeat(again["generation"])))
    steps.append(("b gets its partition", m.heartbeat("member-b", b["member_epoch"], owned=[])))
    steps.append(("a stale generation", a.heartbeat(again["generation"] - 1)))
    commit = {"group_id": group, "generation_id_or_member_epoch": again["generation"], "member_id": a.member_id,
              "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                  {"partition_index": synced["assignment"][0], "committed_offset": 0, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}]}
    steps.append(("a commits v8", err(c.request(8, commit, version=8).topics[0].partitions[0])))
    steps.append(("a commits old generation", err(c.request(8, {**commit, "generation_id_or_member_epoch": 1},
                                                            version=8).topics[0].partitions[0])))
    steps.append(("b leaves: downgrade", m.heartbeat("member-b", -1)))
    steps.append(("classic again", group_type()))
    steps.append(("a told to rejoin after downgrade", a.heartbeat(again["generation"])))
    last = a.join(synced["assignment"])
    steps.append(("a rejoins the classic group", last))
    out["steps"] = [list(step) for step in steps]  # lists, so normalize.KNOWN_DIFFERENCES can name one step
    return out


@scenario
def consumer_group_unsubscribe(ctx: Ctx) -> Any:
    """Kafka 4.4's CurrentAssignmentBuilder: a member that drops a topic from its subscription loses that topic's
    partitions at the heartbeat that drops it (to revoke first, as it still reports them), without waiting for a
    new target and without an epoch change; once it no longer reports them, it reaches the next target. Epochs
    are shown relative to the join's."""
    c = ctx.connect()
    group = ctx.topic("g")
    ctx.find_coordinator(c, group, 0)
    t1, t2 = ctx.topic("a"), ctx.topic("b")
    out: dict[str, Any] = {"create": [err(ctx.create_topic(c, t, 2)) for t in (t1, t2)]}
    m = Members(ctx, c, group, [t1, t2])
    joined = m.join("member-a", [t1, t2])
    held = m.heartbeat_until_assigned("member-a", joined["member_epoch"], joined["assignment"])
    base = held["member_epoch"]
    if held["assignment"] is None:
        held["assignment"] = joined["assignment"]

    def shown(r: dict[str, Any]) -> dict[str, Any]:
        return {"error": r["error"], "epoch": r["member_epoch"] - base, "assignment": r["assignment"]}

    def member() -> Any:
        return [(epoch - base, current) for _, _, epoch, _, current, _, _ in m.describe()["members"]]

    steps: list[tuple[str, Any]] = [("a holds both topics", held["assignment"])]
    dropped = m.heartbeat("member-a", base, topics=[t1], owned=held["assignment"])
    steps.append(("a drops b, still owning it", shown(dropped)))
    steps.append(("a's assignment", member()))
    again = m.heartbeat("member-a", base, owned=held["assignment"])
    steps.append(("a still owns b", {"error": again["error"], "epoch": again["member_epoch"] - base}))
    revoked = m.heartbeat_until_assigned("member-a", base, [(t1, [0, 1])])
    steps.append(("a revoked b", {"error": revoked["error"]}))
    steps.append(("a's assignment after", [current for _, current in member()]))
    m.heartbeat("member-a", -1)
    out["steps"] = [list(step) for step in steps]
    return out
