"""Differential scenarios of the newest API versions the reference Kafka speaks: Produce v13 and Fetch v18 by topic id
(KIP-516), DescribeTopicPartitions (KIP-966), ListConfigResources (KIP-1142), DescribeCluster v2 (fenced
brokers), AlterPartitionReassignments v1, and ListOffsets / OffsetCommit / OffsetFetch at their newest."""

from __future__ import annotations

import time
import uuid
from typing import Any

from differential.framework import Ctx, err, jsonable, records_of, scenario


def _partitions(r: Any) -> list[dict[str, Any]]:
    # Kafka answers the partitions in hash-map order: sorted here.
    return sorted(({"index": p.index, "error": err(p), "base_offset": p.base_offset,
                    "log_start_offset": p.log_start_offset} for p in r.partition_responses), key=lambda x: x["index"])


@scenario
def produce_fetch_by_topic_id(ctx: Ctx) -> Any:
    """Produce v13 names the topic by id: a known id, an unknown one, the zero id; Fetch v18 reads it back."""
    c = ctx.connect()
    topic = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, topic, 2))}
    topic_id = ctx.topic_id(c, topic)
    batch = ctx.batch([(b"k", b"v", ())])

    def produce(key: uuid.UUID | None, partitions: list[int]) -> Any:
        r = c.request(0, {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
            {"topic_id": key, "partition_data": [{"index": i, "records": batch} for i in partitions]}]}, version=13)
        t = r.responses[0]
        return {"topic_id_echoed": t.topic_id == key, "partitions": _partitions(t)}

    out["known"] = produce(topic_id, [0, 1, 7])
    out["unknown_id"] = produce(uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), [0])
    out["zero_id"] = produce(None, [0])
    p = ctx.fetch(c, topic, 0, 0, version=18)
    out["fetch_v18"] = {"error": err(p), "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset, "batches": records_of(p.records)}
    return out


def _dtp_topics(r: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "error": err(t), "topic_id": jsonable(t.topic_id), "is_internal": t.is_internal,
             "authorized_operations": t.topic_authorized_operations,
             "partitions": [{"index": p.partition_index, "error": err(p), "leader": p.leader_id,
                             "leader_epoch": p.leader_epoch, "replicas": list(p.replica_nodes),
                             "isr": list(p.isr_nodes), "elr": jsonable(p.eligible_leader_replicas),
                             "last_known_elr": jsonable(p.last_known_elr), "offline": list(p.offline_replicas)}
                            for p in t.partitions]} for t in r.topics]


@scenario
def describe_topic_partitions(ctx: Ctx) -> Any:
    """DescribeTopicPartitions v0 (the admin client's describeTopics): named topics, unknown and illegal names,
    response_partition_limit pages and their cursors, invalid cursors, and every topic from a cursor on."""
    c = ctx.connect()
    a, b, cc = ctx.topic("a"), ctx.topic("b"), ctx.topic("c")
    out: dict[str, Any] = {"create": [err(ctx.create_topic(c, t, n)) for t, n in ((a, 3), (b, 2), (cc, 1))]}
    missing = ctx.topic("missing")

    def dtp(topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
        r = c.request(75, {"topics": [{"name": t} for t in topics], "response_partition_limit": limit,
                           "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                                  "partition_index": cursor[1]}}, version=0)
        return {"topics": _dtp_topics(r), "next_cursor": jsonable(r.next_cursor)}

    named = [cc, missing, a, "bad name!", b, a]
    out["named"] = dtp(named)
    for limit in (1, 2, 3, 5, 6, 0, -5):
        out[f"limit_{limit}"] = dtp(named, limit)
    out["cursor_b_1"] = dtp(named, 3, (b, 1))
    out["cursor_past_last_partition"] = dtp([a, b], 3, (b, 9))
    out["cursor_topic_not_named"] = dtp([a, missing], 3, (b, 0))
    out["cursor_negative_partition"] = dtp([a, b], 3, (a, -1))
    out["internal_not_yet_created"] = {"error": dtp(["__transaction_state"])["topics"][0]["error"]}
    # Every topic (no names), page by page from our first topic until the pages leave our topics (other
    # scenarios' topics sort after ours and differ between the brokers' runs).
    pages = []
    cursor: tuple[str, int] | None = (a, 0)
    while cursor is not None and cursor[0].startswith(ctx.topic("")) and len(pages) < 10:
        page = dtp([], 2, cursor)
        mine = [t for t in page["topics"] if t["name"].startswith(ctx.topic(""))]
        nxt = page["next_cursor"]
        cursor = None if nxt is None else (nxt["topic_name"], nxt["partition_index"])
        pages.append({"topics": mine, "next_cursor": nxt if cursor is not None and cursor[0].startswith(
            ctx.topic("")) else "<beyond this scenario's topics>"})
    out["every_topic_pages"] = pages
    return out


@scenario
def list_config_resources(ctx: Ctx) -> Any:
    """ListConfigResources v0 (client metrics only) and v1 (every type, or the types asked; an unsupported
    type fails the request). Topics of other scenarios are left out."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t))}

    def mine(name: str, kind: int | None) -> bool:
        # Brokers are the same on both sides; topics, groups, client metrics (v0: kind None) are this scenario's.
        return kind in (4, 8) or name.startswith(ctx.topic(""))

    def lcr(types: list[int], version: int = 1) -> Any:
        r = c.request(74, {"resource_types": types}, version=version)
        resources = [[x.resource_name, getattr(x, "resource_type", None)] for x in r.config_resources]
        return {"error": err(r), "resources": sorted(x for x in resources if mine(x[0], x[1]))}

    out["v0"] = lcr([], 0)
    for types in ([], [2], [4], [8], [16], [32], [4, 2], [1], [2, 99], [3]):
        out["v1_" + ("_".join(map(str, types)) or "all")] = lcr(types)
    return out


@scenario
def describe_cluster_v2(ctx: Ctx) -> Any:
    """DescribeCluster v2 (KIP-1073): include_fenced_brokers and each broker's is_fenced."""
    c = ctx.connect()
    return {f"include_fenced_{f}": jsonable(c.request(60, {"include_cluster_authorized_operations": False,
                                                            "endpoint_type": 1, "include_fenced_brokers": f},
                                                      version=2))
            for f in (False, True)}


@scenario
def authorized_operations(ctx: Ctx) -> Any:
    """The operations a principal may do (no ACLs: every one the resource supports), as DescribeCluster,
    Metadata and DescribeTopicPartitions report them."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t))}
    for v in (0, 1, 2):
        for include in (False, True):
            r = c.request(60, {"include_cluster_authorized_operations": include}, version=v)
            out[f"describe_cluster_v{v}_{include}"] = r.cluster_authorized_operations
    for v in (8, 10, 12):
        r = c.request(3, {"topics": [{"name": t}], "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": True,
                          "include_topic_authorized_operations": True}, version=v)
        out[f"metadata_v{v}"] = {"cluster": getattr(r, "cluster_authorized_operations", "(none before v8, after v10)"),
                                 "topic": r.topics[0].topic_authorized_operations}
    r = c.request(75, {"topics": [{"name": t}]}, version=0)
    out["describe_topic_partitions"] = r.topics[0].topic_authorized_operations
    return out


@scenario
def alter_partition_reassignments_v1(ctx: Ctx) -> Any:
    """AlterPartitionReassignments v1 (KIP-860 allow_replication_factor_change) on a one-broker cluster: the
    same replicas, an empty list, an unregistered broker, a repeated broker, a cancel of nothing, unknowns.
    Kafka's messages here are fixed strings: they are compared (under "message")."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2))}

    def alter(allow: bool, partitions: list[tuple[int, list[int] | None]], topic: str = t) -> Any:
        r = c.request(45, {"timeout": 30000, "allow_replication_factor_change": allow, "topics": [
            {"name": topic, "partitions": [{"partition_index": i, "replicas": reps} for i, reps in partitions]}]},
            version=1)
        return {"error": err(r), "message": r.error_message, "partitions": [
            {"index": p.partition_index, "error": err(p), "message": p.error_message}
            for x in r.responses for p in x.partitions]}

    for allow in (False, True):
        out[f"allow_{allow}"] = {
            "same": alter(allow, [(0, [1])]),
            "empty": alter(allow, [(0, [])]),
            "unregistered": alter(allow, [(0, [1, 2])]),
            "repeated": alter(allow, [(0, [1, 1])]),
            "cancel_nothing": alter(allow, [(1, None)]),
            "unknown_partition": alter(allow, [(5, [1])]),
            "unknown_topic": alter(allow, [(0, [1])], ctx.topic("missing")),
        }
    r = c.request(46, {"timeout": 30000, "topics": [{"name": t, "partition_indexes": [0, 1]}]}, version=0)
    out["ongoing"] = {"error": err(r), "topics": jsonable(r.topics)}
    return out


@scenario
def offsets_newest_versions(ctx: Ctx) -> Any:
    """ListOffsets v10, OffsetCommit v9 and OffsetFetch v9 (Kafka 4.1's newest) for a group without members."""
    c = ctx.connect()
    t = ctx.topic()
    group = ctx.topic("group")
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2))}
    for i in range(3):
        ctx.produce(c, t, 0, ctx.batch([(b"k", b"v%d" % i, ())], ts=i * 10))
    out["list_offsets_v10"] = {}
    for spec in (-1, -2, -3, -4, -5, 10, 25, 10_000):
        p = ctx.list_offsets(c, t, 0, ctx.t0 + spec if spec >= 0 else spec, version=10)
        out["list_offsets_v10"][str(spec)] = {"error": err(p), "offset": p.offset,
                                              "timestamp": jsonable(p.timestamp) if spec != 10_000 else "-",
                                              "leader_epoch": p.leader_epoch}
    out["find_coordinator"] = ctx.find_coordinator(c, group, 0)
    r = c.request(8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                      "group_instance_id": None, "retention_time_ms": -1, "topics": [
                          {"name": t, "partitions": [
                              {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": 0,
                               "committed_metadata": "m"},
                              {"partition_index": 9, "committed_offset": 0, "committed_leader_epoch": -1,
                               "committed_metadata": None}]}]}, version=9)
    out["commit_v9"] = sorted([x.name, p.partition_index, err(p)] for x in r.topics for p in x.partitions)
    for member_id, epoch in ((None, -1), ("someone", 3)):
        r = c.request(9, {"groups": [{"group_id": group, "member_id": member_id, "member_epoch": epoch,
                                      "topics": [{"name": t, "partition_indexes": [0, 1]}]}],
                          "require_stable": True}, version=9)
        out[f"fetch_v9_{member_id}"] = [{"group": g.group_id, "error": err(g), "topics": [
            {"name": x.name, "partitions": [[p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                             p.metadata, err(p)] for p in x.partitions]} for x in g.topics]}
            for g in r.groups]
    return out


@scenario
def group_initial_join_no_delay(ctx: Ctx) -> Any:
    """group.initial.rebalance.delay.ms=0 (both fixtures): the initial join completes from Kafka's timer. A
    member given its id (MEMBER_ID_REQUIRED) that joins after generation 1 closed without it stays pending:
    its JoinGroup starts generation 2, which the first member rejoins."""
    import threading

    from differential.scenarios import _describe_group, subscription

    c1, c2 = ctx.connect(client_id="m1"), ctx.connect(client_id="m2")
    group = ctx.topic("group")
    join = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(group)}], "reason": None}
    out: dict[str, Any] = {"find_coordinator": ctx.find_coordinator(c1, group, 0)}
    first = [c.request(11, join, version=7) for c in (c1, c2)]
    out["member_id_required"] = [err(r) for r in first]
    m1, m2 = (r.member_id for r in first)
    r1 = c1.request(11, {**join, "member_id": m1}, version=7)
    out["first_join"] = {"error": err(r1), "generation": r1.generation_id, "members": len(r1.members)}
    result: dict[str, Any] = {}

    def second() -> None:
        result["r2"] = c2.request(11, {**join, "member_id": m2}, version=7)

    th = threading.Thread(target=second)
    th.start()
    deadline = time.monotonic() + 10
    while _describe_group(c1, group)["state"] != "PreparingRebalance" and time.monotonic() < deadline \
            and th.is_alive():
        time.sleep(0.05)
    out["state_while_second_joins"] = _describe_group(c1, group)["state"]
    r1 = c1.request(11, {**join, "member_id": m1}, version=7)
    th.join(30)
    r2 = result["r2"]
    out["rejoin"] = {"errors": [err(r1), err(r2)], "generations": [r1.generation_id, r2.generation_id],
                     "leader_members": sorted(len(r.members) for r in (r1, r2))}
    for conn, m in ((c1, m1), (c2, m2)):
        conn.request(13, {"group_id": group, "members": [{"member_id": m, "group_instance_id": None,
                                                         "reason": None}]}, version=5)
    # Kafka's DescribeGroups reads committed state: wait until the leaves' write is, so that the next
    # scenario's groups (maybe on the same __consumer_offsets partition) are not read behind it.
    deadline = time.monotonic() + 10
    while _describe_group(c1, group)["state"] != "Empty" and time.monotonic() < deadline:
        time.sleep(0.05)
    out["state_after_leaves"] = _describe_group(c1, group)["state"]
    return out


def _v10_topics(topics: Any, names: dict[Any, str]) -> list[Any]:
    # Topics shown by the name the scenario gave their id (ids differ between the brokers); answer order kept.
    return [[names.get(x.topic_id, jsonable(x.topic_id)), [[p.partition_index, err(p)] + (
        [p.committed_offset, p.committed_leader_epoch, p.metadata] if hasattr(p, "committed_offset") else [])
        for p in x.partitions]] for x in topics]


@scenario
def offsets_v10_by_topic_id(ctx: Ctx) -> Any:
    """OffsetCommit v10 and OffsetFetch v10 name topics by id (Kafka 4.4): a known id, an unknown one, the zero
    id, a partition the topic lacks; commits read back by id (named and all topics) and by name (v9); a commit
    to an unknown group; a KIP-848 member's commit at its epoch and at a stale one."""
    from differential.kip848 import Members

    c = ctx.connect()
    t, t2 = ctx.topic("a"), ctx.topic("b")
    group, group2 = ctx.topic("group"), ctx.topic("group2")
    out: dict[str, Any] = {"create": [err(ctx.create_topic(c, x, 2)) for x in (t, t2)]}
    for i in range(3):
        ctx.produce(c, t, 0, ctx.batch([(b"k", b"v%d" % i, ())]))
    tid, tid2 = uuid.UUID(str(ctx.topic_id(c, t))), uuid.UUID(str(ctx.topic_id(c, t2)))
    unknown = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    names = {tid: "a", tid2: "b", unknown: "unknown", None: "zero",
             uuid.UUID("00000000-0000-0000-0000-000000000000"): "zero"}
    out["find_coordinator"] = ctx.find_coordinator(c, group, 0)

    def commit(g: str, topics: list[tuple[uuid.UUID | None, list[int]]], generation: int = -1,
               member: str = "") -> Any:
        r = c.request(8, {"group_id": g, "generation_id_or_member_epoch": generation, "member_id": member,
                          "group_instance_id": None, "topics": [
                              {"topic_id": key, "partitions": [
                                  {"partition_index": i, "committed_offset": 2, "committed_leader_epoch": 0,
                                   "committed_metadata": f"m{i}"} for i in parts]} for key, parts in topics]},
                      version=10)
        return _v10_topics(r.topics, names)

    def fetch(g: str, topics: list[tuple[uuid.UUID | None, list[int]]] | None, member: str | None = None,
              epoch: int = -1) -> Any:
        r = c.request(9, {"groups": [{"group_id": g, "member_id": member, "member_epoch": epoch, "topics": None
                                      if topics is None else [{"topic_id": key, "partition_indexes": parts}
                                                              for key, parts in topics]}],
                          "require_stable": True}, version=10)
        return [{"error": err(x), "topics": _v10_topics(x.topics, names)} for x in r.groups]

    out["commit"] = commit(group, [(unknown, [0]), (tid, [0, 9]), (None, [1]), (tid2, [1])])
    out["fetch_named"] = fetch(group, [(tid, [0, 1, 9]), (unknown, [0, 3]), (None, [0]), (tid2, [1])])
    out["fetch_all"] = [{**g, "topics": sorted(g["topics"])} for g in fetch(group, None)]  # Kafka: hash order
    r = c.request(9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                  "topics": [{"name": t, "partition_indexes": [0]}]}]}, version=9)
    out["fetch_v9"] = [[p.partition_index, p.committed_offset, p.metadata, err(p)]
                       for g in r.groups for x in g.topics for p in x.partitions]
    out["commit_unknown_group"] = commit(ctx.topic("nogroup"), [(tid, [0]), (unknown, [0])], 5, "someone")
    out["find_coordinator2"] = ctx.find_coordinator(c, group2, 0)
    m = Members(ctx, c, group2, [t])
    joined = m.join("member-a", [t])
    out["join"] = joined["error"]  # the epoch itself: the KIP-848 scenarios compare it
    epoch = joined["member_epoch"]
    out["member_commit"] = commit(group2, [(tid, [0]), (unknown, [0])], epoch, "member-a")
    out["member_commit_stale"] = commit(group2, [(tid, [1]), (unknown, [0])], epoch + 1, "member-a")
    out["member_fetch"] = fetch(group2, [(tid, [0, 1]), (unknown, [0])], "member-a", epoch)
    out["member_fetch_stale"] = fetch(group2, [(tid, [0])], "member-a", epoch + 1)
    m.heartbeat("member-a", -1)
    return out
