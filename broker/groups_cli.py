"""`samsa groups list|describe|delete|reset-offsets|history`: consumer groups of any Kafka-protocol broker.

reset-offsets refuses to touch a group with members (like kafka-consumer-groups.sh), and commits
with generation -1 and the --reason as each partition's commit metadata; the broker turns such a
commit into an audit record in `__consumer_offsets` (who, when, what moved from where to where,
why), which `history` reads back (a Samsa feature: other brokers have no audit records).
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import json
import socket
import sys
from typing import Any

from samsa.broker.client import Connection, KafkaClientError

OFFSETS_TOPIC = "__consumer_offsets"
EARLIEST, LATEST = -2, -1


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _connect(args: argparse.Namespace, client_id: str = "samsa-groups") -> Connection:
    host, _, port = args.bootstrap_server.rpartition(":")
    return Connection(host or "127.0.0.1", int(port), client_id=client_id)


def _describe(conn: Connection, group: str) -> Any:
    return conn.request(15, {"groups": [group], "include_authorized_operations": False}).groups[0]


def _committed(conn: Connection, group: str) -> dict[tuple[str, int], int]:
    r = conn.request(9, {"group_id": group, "topics": None, "require_stable": False}, version=7)
    if r.error_code.value != 0:
        raise KafkaClientError(f"OffsetFetch: {r.error_code.name}")
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions
            if p.committed_offset >= 0}


def _partitions(conn: Connection, topic: str) -> list[int]:
    t = conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False}).topics[0]
    if t.error_code.value != 0:
        raise KafkaClientError(f"{topic}: {t.error_code.name}")
    return sorted(p.partition_index for p in t.partitions)


def _list_offsets(conn: Connection, topic: str, partitions: list[int], timestamp: int) -> dict[int, int]:
    r = conn.request(2, {"replica_id": -1, "isolation_level": 0, "timeout": 30000, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "timestamp": timestamp, "current_leader_epoch": -1}
                                       for p in partitions]}]})
    out = {}
    for p in r.topics[0].partitions:
        if p.error_code.value != 0:
            raise KafkaClientError(f"ListOffsets {topic}-{p.partition_index}: {p.error_code.name}")
        out[p.partition_index] = p.offset
    return out


def _assignments(member: Any) -> list[tuple[str, int]]:
    from samsa.broker.group.consumer_protocol import assigned_partitions

    parsed = assigned_partitions(bytes(member.member_assignment or b""))
    return [(t, p) for t, ps in parsed or () for p in ps]


def cmd_list(args: argparse.Namespace) -> int:
    with _connect(args) as conn:
        values: dict[str, Any] = {"states_filter": [args.state] if args.state else []}
        r = conn.request(16, values)
        if r.error_code.value != 0:
            return _fail(r.error_code.name)
        for g in sorted(r.groups, key=lambda g: g.group_id):
            state = getattr(g, "group_state", "")
            print(f"{g.group_id}\t{state}\t{g.protocol_type or '-'}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with _connect(args) as conn:
        d = _describe(conn, args.group)
        if d.error_code.value != 0:
            return _fail(f"{args.group}: {d.error_code.name}")
        if d.group_state == "Dead":
            return _fail(f"group {args.group} does not exist")
        print(f"Group: {args.group}\tState: {d.group_state}\tProtocol: {d.protocol_type or '-'}/"
              f"{d.protocol_data or '-'}\tMembers: {len(d.members)}")
        owner: dict[tuple[str, int], Any] = {}
        for m in d.members:
            for tp in _assignments(m):
                owner[tp] = m
        committed = _committed(conn, args.group)
        topics = sorted({t for t, _ in committed} | {t for t, _ in owner})
        print("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
        for topic in topics:
            try:
                parts = _partitions(conn, topic)
                ends = _list_offsets(conn, topic, parts, LATEST)
            except KafkaClientError as e:
                print(f"{topic}\t-\t-\t-\t-\t{e}")
                continue
            for p in parts:
                if (topic, p) not in committed and (topic, p) not in owner:
                    continue
                current = committed.get((topic, p))
                lag = ends[p] - current if current is not None else "-"
                m = owner.get((topic, p))
                who = f"{m.member_id}\t{m.client_host}\t{m.client_id}" if m else "-\t-\t-"
                print(f"{topic}\t{p}\t{current if current is not None else '-'}\t{ends[p]}\t{lag}\t{who}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with _connect(args) as conn:
        r = conn.request(42, {"groups_names": [args.group]}).results[0]
        if r.error_code.value != 0:
            return _fail(f"{args.group}: {r.error_code.name}")
        print(f"Deleted group {args.group} (its committed offsets; topic data is untouched).")
    return 0


def _targets(conn: Connection, args: argparse.Namespace, partitions: list[int],
             current: dict[int, int]) -> dict[int, int]:
    earliest = _list_offsets(conn, args.topic, partitions, EARLIEST)
    latest = _list_offsets(conn, args.topic, partitions, LATEST)
    if args.to_earliest:
        wanted = earliest
    elif args.to_latest:
        wanted = latest
    elif args.to_offset is not None:
        wanted = dict.fromkeys(partitions, args.to_offset)
    elif args.to_datetime is not None:
        when = datetime.datetime.fromisoformat(args.to_datetime)
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        by_time = _list_offsets(conn, args.topic, partitions, int(when.timestamp() * 1000))
        wanted = {p: o if o >= 0 else latest[p] for p, o in by_time.items()}
    else:
        wanted = {p: current.get(p, latest[p]) + args.shift_by for p in partitions}
    # Like kafka-consumer-groups.sh: a target outside the log is clamped to it.
    return {p: min(max(o, earliest[p]), latest[p]) for p, o in wanted.items()}


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    if not args.reason or not args.reason.strip():
        return _fail("reset-offsets needs --reason: it is written to the group's audit history")
    who = f"samsa-groups/{getpass.getuser()}@{socket.gethostname()}"
    with _connect(args, client_id=who) as conn:
        d = _describe(conn, args.group)
        if d.error_code.value != 0 and d.error_code.value != 69:
            return _fail(f"{args.group}: {d.error_code.name}")
        if d.group_state not in ("Empty", "Dead") or d.members:
            return _fail(f"group {args.group} is {d.group_state} with {len(d.members)} member(s); offsets can only "
                         "be reset while the group is inactive (stop its consumers first)")
        try:
            partitions = [args.partition] if args.partition is not None else _partitions(conn, args.topic)
            current = {p: o for (t, p), o in _committed(conn, args.group).items() if t == args.topic}
            targets = _targets(conn, args, partitions, current)
        except KafkaClientError as e:
            return _fail(str(e))
        print("TOPIC\tPARTITION\tFROM\tTO")
        for p in partitions:
            print(f"{args.topic}\t{p}\t{current.get(p, '-')}\t{targets[p]}")
        if args.dry_run:
            print("(dry run: nothing committed)")
            return 0
        r = conn.request(8, {"group_id": args.group, "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "topics": [{"name": args.topic, "partitions": [
                                 {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                  "committed_metadata": args.reason} for p, o in targets.items()]}]})
        errors = [(p.partition_index, p.error_code.name) for t in r.topics for p in t.partitions
                  if p.error_code.value != 0]
        if errors:
            return _fail(f"commit failed: {errors}")
        print(f"Reset {len(targets)} partition(s) of {args.topic} for group {args.group}.")
    return 0


def _audit_records(conn: Connection, group: str) -> list[dict[str, Any]]:
    from samsa.broker.group.records import (
        RESET_AUDIT_KEY,
        ResetAuditKey,
        decode_audit_value,
        decode_key,
        partition_for_group,
    )
    from samsa.kproto.records import decode_batches

    partition = partition_for_group(group, len(_partitions(conn, OFFSETS_TOPIC)))
    end = _list_offsets(conn, OFFSETS_TOPIC, [partition], LATEST)[partition]
    offset = _list_offsets(conn, OFFSETS_TOPIC, [partition], EARLIEST)[partition]
    version = conn.pick_version(1)
    topic_id = None
    if version >= 13:
        topic_id = conn.request(3, {"topics": [{"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": False}
                                ).topics[0].topic_id
    out: list[dict[str, Any]] = []
    while offset < end:
        part = {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
        topics = [{"topic_id": topic_id, "partitions": [part]}] if version >= 13 else [
            {"topic": OFFSETS_TOPIC, "partitions": [part]}]
        r = conn.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 8 << 20,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": topics,
                             "forgotten_topics_data": (), "rack_id": ""}, version=version)
        pr = r.responses[0].partitions[0]
        if pr.error_code.value != 0:
            raise KafkaClientError(f"Fetch {OFFSETS_TOPIC}-{partition}: {pr.error_code.name}")
        before = offset
        for header, records in decode_batches(pr.records or b"", max_decompressed_bytes=64 << 20):
            for rec in records:
                if rec.offset < offset or rec.key is None or rec.value is None:
                    continue
                if int.from_bytes(rec.key[:2], "big", signed=True) != RESET_AUDIT_KEY:
                    continue
                key = decode_key(rec.key)
                if isinstance(key, ResetAuditKey) and key.group_id == group:
                    out.append(decode_audit_value(rec.value))
            offset = max(offset, header.next_offset)
        if offset == before:
            break
    return out


def cmd_history(args: argparse.Namespace) -> int:
    args.group = args.group or args.group_name
    if not args.group:
        return _fail("history needs a group: samsa groups history GROUP")
    with _connect(args) as conn:
        try:
            records = _audit_records(conn, args.group)
        except KafkaClientError as e:
            return _fail(str(e))
    if not records:
        print(f"No offset resets recorded for group {args.group}.")
        return 0
    for a in records:
        if args.json:
            print(json.dumps(a, sort_keys=True))
            continue
        print(f"{a.get('when')}  by {a.get('who')}  why: {a.get('why') or '-'}")
        for c in a.get("changes", ()):
            start = "-" if c.get("from") is None else c["from"]
            print(f"    {c['topic']}-{c['partition']}: {start} -> {c['to']}")
    return 0


def add_commands(sub: Any) -> None:
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets; audit history")
    actions = groups.add_subparsers(dest="groups_command", required=True)

    def common(p: argparse.ArgumentParser, group: bool = True) -> None:
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        if group:
            p.add_argument("--group", required=True)

    p = actions.add_parser("list", help="list groups (optionally in one state)")
    p.add_argument("--state", help="Empty, Stable, PreparingRebalance, CompletingRebalance")
    common(p, group=False)
    p.set_defaults(func=cmd_list)

    p = actions.add_parser("describe", help="members, assignments, committed offsets and lag")
    common(p)
    p.set_defaults(func=cmd_describe)

    p = actions.add_parser("delete", help="delete an inactive group's committed offsets (never topic data)")
    common(p)
    p.set_defaults(func=cmd_delete)

    p = actions.add_parser("reset-offsets", help="move an inactive group's committed offsets, with a reason")
    common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="only this partition (default: all)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--to-datetime", help="ISO 8601, e.g. 2026-11-29T08:00:00 (UTC unless an offset is given)")
    how.add_argument("--shift-by", type=int)
    p.add_argument("--reason", required=True, help="why; stored in the audit record")
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(func=cmd_reset_offsets)

    p = actions.add_parser("history", help="the audit records of offset resets of a group: history GROUP")
    p.add_argument("group_name", nargs="?", help="the group (or --group)")
    p.add_argument("--group")
    p.add_argument("--json", action="store_true")
    common(p, group=False)
    p.set_defaults(func=cmd_history)
