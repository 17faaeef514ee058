"""Differential scenarios of KIP-1071 streams groups: StreamsGroupHeartbeat (v0; v1 in streams_group_v1) answers
and the group's StreamsGroupDescribe, step by step on Kafka 4.4.0 and on Samsa, with a word-count topology (a stateless
subtopology writing a repartition topic, a stateful one reading it, with a changelog).

Kafka 4.4 delays a new group's first assignment by group.streams.initial.rebalance.delay.ms (3 s) and then
computes a target at most once per group.streams.assignment.interval.ms (1 s); both are left at their
defaults on both brokers, and a step that needs a new target heartbeats until one was computed."""

from __future__ import annotations

import time
from typing import Any

from differential.framework import Ctx, err, scenario
from samsa.broker.client import Connection


def _topology(app: str, source: str, epoch: int = 0) -> dict[str, Any]:
    def info(name: str) -> dict[str, Any]:
        return {"name": name, "partitions": 0, "replication_factor": 0, "topic_configs": []}
    return {"epoch": epoch, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [f"{app}-rep-repartition"], "repartition_source_topics": [],
         "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [info(f"{app}-store-changelog")], "repartition_sink_topics": [],
         "repartition_source_topics": [info(f"{app}-rep-repartition")], "copartition_groups": []}]}


def _tasks(ids: Any) -> Any:
    return None if ids is None else sorted((t.subtopology_id, sorted(t.partitions)) for t in ids)


class Streams:
    def __init__(self, conn: Connection, group: str, source: str) -> None:
        self.conn, self.group, self.source = conn, group, source

    def heartbeat(self, member: str, epoch: int, *, topology: Any = None, owned: Any = (), process: str | None = None,
                  rebalance_timeout_ms: int = -1, instance: str | None = None) -> dict[str, Any]:
        def ids(tasks: Any) -> Any:
            return None if tasks is None else [{"subtopology_id": s, "partitions": ps} for s, ps in tasks]
        owned_ids = None if owned is None else ids(list(owned))
        r = self.conn.request(88, {
            "group_id": self.group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": instance, "rack_id": None, "rebalance_timeout": rebalance_timeout_ms, "topology": topology,
            "active_tasks": owned_ids, "standby_tasks": None if owned is None else [],
            "warmup_tasks": None if owned is None else [], "process_id": process, "user_endpoint": None,
            "client_tags": None, "task_offsets": None, "task_end_offsets": None, "shutdown_application": False},
            version=0)
        return {"error": err(r), "message": r.error_message, "member_epoch": r.member_epoch,
                "heartbeat_interval_ms": int(r.heartbeat_interval.total_seconds() * 1000),
                "acceptable_recovery_lag": r.acceptable_recovery_lag,
                "task_offset_interval_ms": int(r.task_offset_interval.total_seconds() * 1000),
                "status": [(s.status_code, s.status_detail) for s in r.status or ()],
                "active": _tasks(r.active_tasks), "standby": _tasks(r.standby_tasks), "warmup": _tasks(r.warmup_tasks)}

    def join(self, member: str, **kw: Any) -> dict[str, Any]:
        return self.heartbeat(member, 0, topology=_topology(self.group, self.source, kw.pop("epoch", 0)),
                              process=f"process-{member}", rebalance_timeout_ms=30000, **kw)

    def until_assigned(self, member: str, epoch: int, owned: Any) -> dict[str, Any]:
        """Heartbeat until the group is no longer waiting for a target (the delays passed, the internal topics
        exist); the answer of the heartbeat that got it."""
        deadline = time.monotonic() + 60
        while True:
            r = self.heartbeat(member, epoch, owned=owned)
            d = self.describe()
            if (r["error"] != "NONE(0)" or (d["state"] not in ("NotReady", "Assigning") and not r["status"])
                    or time.monotonic() > deadline):
                return r
            epoch = r["member_epoch"]
            owned = r["active"] if r["active"] is not None else owned
            time.sleep(0.2)

    def describe(self) -> dict[str, Any]:
        g = self.conn.request(89, {"group_ids": [self.group], "include_authorized_operations": False},
                              version=0).groups[0]
        topology = None if g.topology is None else [
            (s.subtopology_id, list(s.source_topics), list(s.repartition_sink_topics),
             [(t.name, t.partitions) for t in s.state_changelog_topics],
             [(t.name, t.partitions) for t in s.repartition_source_topics]) for s in g.topology.subtopologies or ()]
        return {"error": err(g), "message": g.error_message, "state": g.group_state, "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch, "topology": topology,
                "members": sorted((m.member_id, m.member_epoch, m.process_id, m.topology_epoch,
                                   _tasks(m.assignment.active_tasks), _tasks(m.target_assignment.active_tasks))
                                  for m in g.members)}


def create_source(ctx: Ctx, c: Connection, group: str, source: str, partitions: int) -> Any:
    """Create the source topic, then wait until the group coordinator's own view has it: Kafka's coordinator takes
    new metadata images as events of its own, after Metadata shows the topic, so under load a member joining at
    once could be told MISSING_SOURCE_TOPICS on Kafka and not on Samsa. A probe group (a stateless topology on
    the source alone, on both brokers) heartbeats until that status is gone, then leaves; nothing of it is
    recorded. Returns CreateTopics' outcome."""
    created = err(ctx.create_topic(c, source, partitions))
    probe, member = f"{group}-probe", "probe"
    ctx.find_coordinator(c, probe, 0)
    topology = {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
    streams = Streams(c, probe, source)
    r = streams.heartbeat(member, 0, topology=topology, process="process-probe", rebalance_timeout_ms=30000)
    deadline = time.monotonic() + 30
    while r["error"] == "NONE(0)" and any(code == 1 for code, _ in r["status"]) and time.monotonic() < deadline:
        time.sleep(0.2)
        r = streams.heartbeat(member, r["member_epoch"], owned=[])
    streams.heartbeat(member, -1, owned=None)
    return created


@scenario
def streams_group_heartbeat(ctx: Ctx) -> Any:
    """A word-count application joins: internal topics created by the broker, the initial delay, a second member
    splitting the tasks with revocation first, errors, the other group APIs on a streams group, leaving."""
    c = ctx.connect()
    group = ctx.topic("app")
    ctx.find_coordinator(c, group, 0)
    source = ctx.topic("in")
    out: dict[str, Any] = {"create": create_source(ctx, c, group, source, 4)}
    s = Streams(c, group, source)
    steps: list[tuple[str, Any]] = []
    a = s.join("member-a")
    steps.append(("a joins", a))
    steps.append(("describe not ready", s.describe()))
    a = s.until_assigned("member-a", a["member_epoch"], [])
    steps.append(("a assigned", a))
    md = c.request(3, {"topics": [{"name": f"{group}-rep-repartition"}, {"name": f"{group}-store-changelog"}],
                       "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}, version=12)
    steps.append(("internal topics", sorted((t.name, err(t), len(t.partitions)) for t in md.topics)))
    steps.append(("describe stable", s.describe()))
    time.sleep(1.2)  # past the assignment interval: b's join computes a new target at once
    b = s.join("member-b")
    steps.append(("b joins", b))
    steps.append(("describe reconciling", s.describe()))
    a2 = s.heartbeat("member-a", a["member_epoch"], owned=a["active"])
    steps.append(("a asked to revoke", a2))
    b2 = s.heartbeat("member-b", b["member_epoch"])
    steps.append(("b before a revoked", b2))
    a3 = s.heartbeat("member-a", a2["member_epoch"], owned=a2["active"])
    steps.append(("a revoked", a3))
    b3 = s.heartbeat("member-b", b2["member_epoch"])
    steps.append(("b gets its tasks", b3))
    steps.append(("describe stable again", s.describe()))
    steps.append(("b unchanged", s.heartbeat("member-b", b3["member_epoch"], owned=b3["active"])))
    steps.append(("b epoch ahead", s.heartbeat("member-b", b3["member_epoch"] + 7, owned=b3["active"])))
    steps.append(("unknown member", s.heartbeat("member-x", 3)))
    steps.append(("topology update", s.join("member-c", epoch=1)))
    steps.append(("empty member id", s.heartbeat("", 0, topology=_topology(group, source), rebalance_timeout_ms=1)))
    steps.append(("no rebalance timeout", s.heartbeat("member-d", 0, topology=_topology(group, source))))
    steps.append(("no topology", s.heartbeat("member-d", 0, rebalance_timeout_ms=1000)))
    steps.append(("topology after join", s.heartbeat("member-b", b3["member_epoch"],
                                                      topology=_topology(group, source))))
    steps.append(("bad epoch", s.heartbeat("member-b", -3)))
    steps.append(("unknown group", Streams(c, ctx.topic("nope"), source).heartbeat("m", 4)))
    listed = c.request(16, {"states_filter": [], "types_filter": []}, version=5).groups
    steps.append(("list groups", [(g.protocol_type, g.group_state, g.group_type) for g in listed
                                  if g.group_id == group]))
    steps.append(("describe groups v5", err(c.request(15, {"groups": [group], "include_authorized_operations": False},
                                                      version=5).groups[0])))
    consumer = c.request(68, {"group_id": group, "member_id": "c1", "member_epoch": 0, "instance_id": None,
                              "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": [source],
                              "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []},
                         version=1)
    steps.append(("consumer heartbeat", (err(consumer), consumer.error_message)))
    steps.append(("a leaves", s.heartbeat("member-a", -1, owned=None)))
    steps.append(("b after a left", s.until_assigned("member-b", b3["member_epoch"], b3["active"])))
    steps.append(("describe after leave", s.describe()))
    steps.append(("b leaves", s.heartbeat("member-b", -1, owned=None)))
    steps.append(("describe empty", s.describe()))
    deleted = c.request(42, {"groups_names": [group]}, version=2).results[0]
    steps.append(("delete", err(deleted)))
    steps.append(("describe deleted", s.describe()))
    out["steps"] = steps
    return out


@scenario
def streams_group_members(ctx: Ctx) -> Any:
    """Standby tasks (the group's streams.num.standby.replicas), user endpoints for interactive queries, a static
    member leaving with -2 and coming back, a member asking the application to shut down, offsets committed
    and fetched with member epochs."""
    c = ctx.connect()
    group = ctx.topic("app")
    ctx.find_coordinator(c, group, 0)
    source = ctx.topic("in")
    out: dict[str, Any] = {"create": create_source(ctx, c, group, source, 2)}
    alter = c.request(44, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "1"},
        {"name": "streams.initial.rebalance.delay.ms", "config_operation": 0, "value": "0"}]}],
        "validate_only": False}, version=1)
    out["standbys configured"] = err(alter.responses[0])
    s = Streams(c, group, source)
    steps: list[tuple[str, Any]] = []
    a = s.join("member-a", instance="static-a")
    steps.append(("a joins", a))
    a = s.until_assigned("member-a", a["member_epoch"], [])
    steps.append(("a assigned", a))
    time.sleep(1.2)
    endpoint = {"host": "localhost", "port": 7070}
    r = c.request(88, {
        "group_id": group, "member_id": "member-b", "member_epoch": 0, "endpoint_information_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 30000, "topology": _topology(group, source),
        "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": "process-member-b",
        "user_endpoint": endpoint, "client_tags": [{"key": "zone", "value": "z1"}], "task_offsets": None,
        "task_end_offsets": None, "shutdown_application": False}, version=0)
    steps.append(("b joins with an endpoint", (err(r), r.member_epoch, r.endpoint_information_epoch,
                                                r.partitions_by_user_endpoint is not None)))
    b_epoch = r.member_epoch
    a2 = s.heartbeat("member-a", a["member_epoch"], owned=a["active"])
    steps.append(("a asked to revoke", a2))
    a3 = s.heartbeat("member-a", a2["member_epoch"], owned=a2["active"])
    steps.append(("a revoked", a3))
    b = s.until_assigned("member-b", b_epoch, [])
    steps.append(("b assigned", b))
    a4 = s.until_assigned("member-a", a3["member_epoch"], a3["active"])
    steps.append(("a with standbys", a4))
    steps.append(("describe with standbys", s.describe()))
    g = c.request(89, {"group_ids": [group], "include_authorized_operations": False}, version=0).groups[0]
    steps.append(("members' endpoints and tags", sorted(
        (m.member_id, None if m.user_endpoint is None else (m.user_endpoint.host, m.user_endpoint.port),
         [(kv.key, kv.value) for kv in m.client_tags], _tasks(m.assignment.standby_tasks)) for m in g.members)))
    commit = {"group_id": group, "generation_id_or_member_epoch": b["member_epoch"], "member_id": "member-b",
              "group_instance_id": None, "topics": [{"name": source, "partitions": [
                  {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}]}
    steps.append(("commit", err(c.request(8, commit, version=9).topics[0].partitions[0])))
    stale = {**commit, "generation_id_or_member_epoch": b["member_epoch"] - 1}
    steps.append(("commit stale epoch", err(c.request(8, stale, version=9).topics[0].partitions[0])))
    fetched = c.request(9, {"groups": [{"group_id": group, "member_id": "member-b", "member_epoch": b["member_epoch"],
                                        "topics": [{"name": source, "partition_indexes": [0]}]}],
                            "require_stable": False}, version=9).groups[0]
    steps.append(("fetch", (err(fetched), [(p.partition_index, p.committed_offset)
                                           for t in fetched.topics for p in t.partitions])))
    steps.append(("a leaves for now (-2)", s.heartbeat("member-a", -2, owned=None, instance="static-a")))
    steps.append(("describe a gone for now", s.describe()))
    steps.append(("another member takes a's instance",
                  s.join("member-a2", instance="static-a")))
    steps.append(("describe a2 in a's place", s.describe()))
    time.sleep(1.2)  # past the assignment interval on both brokers, however loaded: no delay status either way
    shutdown = c.request(88, {
        "group_id": group, "member_id": "member-b", "member_epoch": b["member_epoch"],
        "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": -1,
        "topology": None, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None, "process_id": None,
        "user_endpoint": None, "client_tags": None, "task_offsets": None, "task_end_offsets": None,
        "shutdown_application": True}, version=0)
    steps.append(("b asks to shut down", [(x.status_code, x.status_detail) for x in shutdown.status or ()]))
    steps.append(("a2 told to shut down", s.heartbeat("member-a2", 0 if False else
                                                       s.describe()["members"][0][1], owned=None)["status"]))
    out["steps"] = steps
    return out


@scenario
def streams_group_feature_off(ctx: Ctx) -> Any:
    """streams.version 0 (UpdateFeatures) turns streams groups off: the three APIs stay listed but answer
    UNSUPPORTED_VERSION; level 1 again turns them back on. The level is restored whatever happens."""
    c = ctx.connect()
    group = ctx.topic("app")
    ctx.find_coordinator(c, group, 0)
    source = ctx.topic("in")
    out: dict[str, Any] = {"create": create_source(ctx, c, group, source, 1)}

    def level(value: int, kind: int) -> Any:
        r = c.request(57, {"timeout": 30000, "validate_only": False, "feature_updates": [
            {"feature": "streams.version", "max_version_level": value, "upgrade_type": kind}]}, version=1)
        time.sleep(1)  # the brokers apply the new level from the metadata log
        return (err(r), [(x.feature, err(x)) for x in r.results])

    try:
        out["off"] = level(0, 2)
        fresh = ctx.connect()
        out["still listed"] = (88 in fresh.versions, 89 in fresh.versions, 93 in fresh.versions)
        out["heartbeat"] = Streams(fresh, group, source).join("m1")["error"]
        out["describe"] = Streams(fresh, group, source).describe()["error"]
        out["describe v1"] = _describe_v1(fresh, group, True)
        out["description update"] = _description_update(fresh, group, "m1")
    finally:
        out["on"] = level(1, 1)
    out["heartbeat again"] = Streams(ctx.connect(), group, source).join("m1")["error"]
    return out


@scenario
def streams_group_topology_rules(ctx: Ctx) -> Any:
    """A member with an older topology epoch is told its topology is stale; owned tasks that the configured
    topology does not have are refused."""
    c = ctx.connect()
    group = ctx.topic("app")
    ctx.find_coordinator(c, group, 0)
    source = ctx.topic("in")
    out: dict[str, Any] = {"create": create_source(ctx, c, group, source, 2)}
    s = Streams(c, group, source)
    a = s.join("member-a", epoch=2)
    out["a joins at topology epoch 2"] = a
    a = s.until_assigned("member-a", a["member_epoch"], [])
    out["a assigned"] = a
    out["b joins at epoch 1"] = s.join("member-b", epoch=1)
    out["unknown subtopology"] = s.heartbeat("member-a", a["member_epoch"], owned=[("9", [0])])
    out["task out of range"] = s.heartbeat("member-a", a["member_epoch"], owned=[("1", [5])])
    out["describe"] = s.describe()
    return out


def _heartbeat_v1(c: Connection, group: str, source: str, member: str, version: int,
                  tags: list[tuple[str, str]] | None, epoch: int = 0) -> dict[str, Any]:
    joining = epoch == 0
    r = c.request(88, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 30000 if joining else -1,
        "topology": _topology(group, source) if joining else None, "active_tasks": [] if joining else None,
        "standby_tasks": [] if joining else None, "warmup_tasks": [] if joining else None,
        "process_id": f"process-{member}" if joining else None,
        "user_endpoint": None, "client_tags": None if tags is None else [{"key": k, "value": v} for k, v in tags],
        "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}, version=version)
    return {"error": err(r), "message": r.error_message, "joined": r.member_epoch > 0,
            "acceptable_recovery_lag": r.acceptable_recovery_lag,
            "intervals": (int(r.heartbeat_interval.total_seconds() * 1000),
                          int(r.task_offset_interval.total_seconds() * 1000)),
            "topology_description_required": getattr(r, "topology_description_required", None),
            # MISSING_INTERNAL_TOPICS (3) and ASSIGNMENT_DELAYED (5) depend on how fast each broker creates the
            # topics and on the time between joins: the other scenarios compare them.
            "status": [(s.status_code, s.status_detail) for s in r.status or () if s.status_code not in (3, 5)]}


def _describe_v1(c: Connection, group: str, include: bool) -> Any:
    g = c.request(89, {"group_ids": [group], "include_authorized_operations": False,
                       "include_topology_description": include}, version=1).groups[0]
    # Not the state: NotReady until the broker sees the internal topics it created, which takes each broker its time.
    return (err(g), g.assignor_name, g.topology_description_status, g.topology_description)


def _task_offsets(c: Connection, group: str, member: str) -> Any:
    """A member's TaskOffsets and TaskEndOffsets (null: unchanged) as StreamsGroupDescribe shows them after."""
    def beat(offsets: Any, end_offsets: Any) -> Any:
        epoch = next(m.member_epoch for m in c.request(89, {"group_ids": [group], "include_authorized_operations":
                                                            False}, version=0).groups[0].members
                     if m.member_id == member)
        r = c.request(88, {
            "group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": -1, "topology": None, "active_tasks": None,
            "standby_tasks": None, "warmup_tasks": None, "process_id": None, "user_endpoint": None,
            "client_tags": None, "task_offsets": offsets, "task_end_offsets": end_offsets,
            "shutdown_application": False}, version=1)
        g = c.request(89, {"group_ids": [group], "include_authorized_operations": False}, version=1).groups[0]
        shown = next(m for m in g.members if m.member_id == member)
        return (err(r), [(o.subtopology_id, o.partition, o.offset) for o in shown.task_offsets],
                [(o.subtopology_id, o.partition, o.offset) for o in shown.task_end_offsets])

    def offsets(*items: tuple[str, int, int]) -> list[dict[str, Any]]:
        return [{"subtopology_id": s, "partition": p, "offset": o} for s, p, o in items]

    return [beat(offsets(("1", 1, 5), ("1", 0, 7), ("0", 1, 3)), offsets(("1", 0, 9))),
            beat(None, offsets(("1", 0, 11), ("1", 1, 6))),
            beat(offsets(), None)]


def _description_update(c: Connection, group: str, member: str) -> Any:
    r = c.request(93, {"group_id": group, "member_id": member, "topology_epoch": 0, "topology_description": {
        "subtopologies": [{"subtopology_id": "0", "nodes": [
            {"name": "KSTREAM-SOURCE-0000000000", "node_type": 1, "source_topics": ["in"], "sink_topic": None,
             "stores": [], "successors": []}]}], "global_stores": []}}, version=0)
    return (err(r), r.error_message)


def _wait_for_group_config(c: Connection, group: str, name: str, value: str) -> None:
    """Kafka answers IncrementalAlterConfigs once the controller committed the change; its group coordinator
    learns it when the broker publishes that metadata, a moment later (on a loaded machine, after the next
    heartbeat). DescribeConfigs reads the same published image, and the coordinator is updated with it."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = c.request(32, {"resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": [name]}],
                           "include_synonyms": False, "include_documentation": False}, version=4)
        if any(e.name == name and e.value == value for e in r.results[0].configs):
            time.sleep(0.5)
            return
        time.sleep(0.1)


@scenario
def streams_group_v1(ctx: Ctx) -> Any:
    """Kafka 4.4's versions: StreamsGroupHeartbeat v1 (the int64 AcceptableRecoveryLag, TopologyDescriptionRequired,
    MISSING_CLIENT_TAGS only at v1 when the group's streams.rack.aware.assignment.tags name tags a member did not
    send), StreamsGroupDescribe v1 (TopologyDescriptionStatus, AssignorName) and
    StreamsGroupTopologyDescriptionUpdate v0, which a broker without a topology description plugin refuses."""
    c = ctx.connect()
    group = ctx.topic("app")
    ctx.find_coordinator(c, group, 0)
    source = ctx.topic("in")
    out: dict[str, Any] = {"create": create_source(ctx, c, group, source, 2)}
    alter = c.request(44, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "streams.rack.aware.assignment.tags", "config_operation": 0, "value": "zone,cluster"},
        {"name": "streams.initial.rebalance.delay.ms", "config_operation": 0, "value": "0"}]}],
        "validate_only": False}, version=1)
    out["tags configured"] = err(alter.responses[0])
    _wait_for_group_config(c, group, "streams.rack.aware.assignment.tags", "zone,cluster")
    out["a joins at v1 without tags"] = _heartbeat_v1(c, group, source, "member-a", 1, None)
    out["b joins at v1 with one tag"] = _heartbeat_v1(c, group, source, "member-b", 1, [("zone", "z1")])
    out["c joins at v1 with both"] = _heartbeat_v1(c, group, source, "member-c", 1, [("zone", "z1"), ("cluster", "k")])
    out["d joins at v0 without tags"] = _heartbeat_v1(c, group, source, "member-d", 0, None)
    out["unknown member at v1"] = _heartbeat_v1(c, group, source, "member-x", 1, None, epoch=3)
    out["unknown group at v1"] = _heartbeat_v1(c, ctx.topic("nope"), source, "member-x", 1, None, epoch=3)
    out["a leaves at v1"] = _heartbeat_v1(c, group, source, "member-a", 1, None, epoch=-1)
    out["c reports task offsets"] = _task_offsets(c, group, "member-c")
    out["describe v1"] = _describe_v1(c, group, False)
    out["describe v1 with the description"] = _describe_v1(c, group, True)
    out["describe v1 unknown group"] = _describe_v1(c, ctx.topic("nope"), True)
    out["description update"] = _description_update(c, group, "member-a")
    out["description update unknown member"] = _description_update(c, group, "member-x")
    out["description update unknown group"] = _description_update(c, ctx.topic("nope"), "m")
    out["description update empty ids"] = _description_update(c, "", "")
    s = Streams(c, group, source)
    for member in ("member-b", "member-c", "member-d"):
        s.heartbeat(member, -1, owned=None)
    return out
