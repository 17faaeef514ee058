"""Differential scenarios of the KIP-848 consumer protocol: ConsumerGroupHeartbeat (v1) answers, the
group's ConsumerGroupDescribe, and what the other group APIs say of such a group, step by step on Kafka
4.1.2 and on Samsa. Member ids are the client's (v1); topic ids are shown as topic names."""

from __future__ import annotations

import uuid
from typing import Any

from differential.framework import Ctx, err, scenario
from samsa.broker.client import Connection


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
    steps.append(("b joins", b))
    a2 = m.heartbeat("member-a", a["member_epoch"], owned=a["assignment"])
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
    steps.append(("b after a left", m.heartbeat("member-b", b3["member_epoch"], owned=b3["assignment"])))
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
