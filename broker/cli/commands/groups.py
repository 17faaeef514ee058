"""`samsa groups list|describe|delete|reset-offsets|skip|history`: consumer groups, each request sent to the
group's coordinator (FindCoordinator), `list` to every broker (as Kafka's AdminClient.listConsumerGroups).

reset-offsets refuses to touch a group with members (like kafka-consumer-groups.sh), and commits
with generation -1 and the --reason as each partition's commit metadata; the broker turns such a
commit into an audit record in `__consumer_offsets` (who, when, what moved from where to where,
why), which `history` reads back (a Samsa feature: other brokers have no audit records).

skip moves a group past poison records: it copies them to a quarantine topic (samsa.broker.poison) and
commits the offset after the last one with generation -1 and a `samsa-skip:{...}` metadata, which the
broker audits with kind "skip". It needs the group empty: the broker, like Kafka's
ClassicGroup.validateOffsetCommit, refuses a generation -1 commit while the group has members
(UNKNOWN_MEMBER_ID), and a live member would fetch from its own position and commit over it anyway;
inside a running consumer, samsa.broker.poison.PoisonGuard skips as the member instead.
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import json
import socket
from dataclasses import replace
from typing import Any

from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.consume import EARLIEST, LATEST, OFFSET_FETCH_MAX_VERSION, list_offsets
from samsa.broker.cli.commands.errors import CliError, KafkaError, check, guarded
from samsa.broker.cli.commands.group_members import member_records, member_table, upgraded_of
from samsa.broker.cli.commands.output import add_output_option, emit, records, table
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args

OFFSETS_TOPIC = "__consumer_offsets"
GROUP_ID_NOT_FOUND = 69


def _describe(client: RoutingClient, group: str) -> Any:
    r = client.group_request(group, 15, {"groups": [group], "include_authorized_operations": False},
                             error_of=lambda r: r.groups[0].error_code.value)
    d = r.groups[0]
    if d.error_code.value == GROUP_ID_NOT_FOUND or d.group_state == "Dead":
        # Kafka 4 (and Samsa) describe a KIP-848 consumer group with ConsumerGroupDescribe only.
        try:
            c = client.group_request(group, 69, {"group_ids": [group], "include_authorized_operations": False},
                                     error_of=lambda r: r.groups[0].error_code.value).groups[0]
        except CliError:  # a broker without ConsumerGroupDescribe: the group is what DescribeGroups said
            return d
        if c.error_code.value == 0:
            return _ConsumerGroupDescription(c)
    return d


class _ConsumerGroupDescription:
    """A ConsumerGroupDescribe answer in the shape the commands read of a DescribeGroups one."""

    def __init__(self, g: Any) -> None:
        self.error_code = g.error_code
        self.group_state = g.group_state
        self.protocol_type = "consumer"
        self.protocol_data = g.assignor_name
        self.assignment_epoch = g.assignment_epoch
        self.members = [_ConsumerGroupMember(m) for m in g.members]


class _ConsumerGroupMember:
    def __init__(self, m: Any) -> None:
        self.member_id, self.client_id, self.client_host = m.member_id, m.client_id, m.client_host
        self.instance_id, self.member_epoch = m.instance_id, m.member_epoch
        self.assigned = [(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions]
        self.target = [(t.topic_name, p) for t in m.target_assignment.topic_partitions for p in t.partitions]
        # v1: a classic member of a consumer group (online migration) is not "upgraded" (group_members.py).
        self.upgraded = upgraded_of(int(getattr(m, "member_type", -1)))


def _committed(client: RoutingClient, group: str) -> dict[tuple[str, int], int]:
    version = min(client.version(9), OFFSET_FETCH_MAX_VERSION)
    r = client.group_request(group, 9, {"group_id": group, "topics": None, "require_stable": False},
                             error_of=lambda r: r.error_code.value, version=version)
    check(r.error_code, f"OffsetFetch of group {group!r}")
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions
            if p.committed_offset >= 0}


def _partitions(client: RoutingClient, topic: str) -> list[int]:
    return sorted(client.topic(topic).partitions)


def _assignments(member: Any) -> list[tuple[str, int]]:
    from samsa.broker.group.consumer_protocol import assigned_partitions

    if isinstance(member, _ConsumerGroupMember):
        return member.assigned

    parsed = assigned_partitions(bytes(member.member_assignment or b""))
    return [(t, p) for t, ps in parsed or () for p in ps]


def cmd_list(client: RoutingClient, args: argparse.Namespace) -> int:
    client.refresh([])
    groups: dict[str, Any] = {}
    values: dict[str, Any] = {"states_filter": [args.state] if args.state else []}
    for node_id in sorted(client.brokers):

        def ask(n: int = node_id) -> Any:
            return client.request_node(n, 16, values)

        r = client.retrying(ask)
        check(r.error_code, f"ListGroups on broker {node_id}")
        for g in r.groups:
            groups[g.group_id] = g
    headers = ["GROUP", "STATE", "PROTOCOL-TYPE"]
    rows = [[g.group_id, getattr(g, "group_state", "") or "-", g.protocol_type or "-"]
            for g in sorted(groups.values(), key=lambda g: g.group_id)]
    if args.output == "table" and not args.header:
        for row in rows:
            print("\t".join(map(str, row)))
        return 0
    emit(args, records(headers, rows), headers, rows)
    return 0


def cmd_describe(client: RoutingClient, args: argparse.Namespace) -> int:
    d = _describe(client, args.group)
    check(d.error_code, f"group {args.group!r}")
    if d.group_state == "Dead":
        raise KafkaError(GROUP_ID_NOT_FOUND, f"group {args.group!r}")
    if getattr(args, "members", False):
        return _describe_members(client, args, d)
    owner: dict[tuple[str, int], Any] = {}
    for m in d.members:
        for tp in _assignments(m):
            owner[tp] = m
    committed = _committed(client, args.group)
    rows: list[list[Any]] = []
    for topic in sorted({t for t, _ in committed} | {t for t, _ in owner}):
        try:
            parts = _partitions(client, topic)
            ends = list_offsets(client, topic, parts, LATEST)
        except CliError as e:
            rows.append([topic, "-", "-", "-", "-", str(e), "-", "-"])
            continue
        for p in parts:
            if (topic, p) not in committed and (topic, p) not in owner:
                continue
            current = committed.get((topic, p))
            m = owner.get((topic, p))
            rows.append([topic, p, current, ends[p], ends[p] - current if current is not None else None,
                         m.member_id if m else None, m.client_host if m else None, m.client_id if m else None])
    headers = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    coordinator = client.coordinator(args.group)
    title = (f"Group: {args.group}\tState: {d.group_state}\tProtocol: {d.protocol_type or '-'}/"
             f"{d.protocol_data or '-'}\tMembers: {len(d.members)}\tCoordinator: {coordinator}")
    data = {"group": args.group, "state": d.group_state, "protocol_type": d.protocol_type,
            "protocol": d.protocol_data, "coordinator": coordinator, "members": len(d.members),
            "partitions": records(headers, rows)}
    if args.output == "table":
        print(title)
        print("\t".join(headers))
        for row in rows:
            print("\t".join("-" if c is None else str(c) for c in row))
        return 0
    emit(args, data, headers, rows)
    return 0


def _describe_members(client: RoutingClient, args: argparse.Namespace, d: Any) -> int:
    consumer_group = isinstance(d, _ConsumerGroupDescription)
    headers, rows = member_table(d, consumer_group, _assignments)
    coordinator = client.coordinator(args.group)
    if args.output == "json":
        emit(args, {"group": args.group, "state": d.group_state, "protocol_type": d.protocol_type,
                    "protocol": d.protocol_data, "coordinator": coordinator, "members": len(d.members),
                    "member_details": member_records(headers, rows, consumer_group, d)}, headers, rows)
        return 0
    print(f"Group: {args.group}\tState: {d.group_state}\tProtocol: {d.protocol_type or '-'}/"
          f"{d.protocol_data or '-'}\tMembers: {len(d.members)}\tCoordinator: {coordinator}")
    if not rows:
        print(f"Consumer group '{args.group}' has no active members.")
        return 0
    table(headers, rows)
    return 0


def cmd_delete(client: RoutingClient, args: argparse.Namespace) -> int:
    r = client.group_request(args.group, 42, {"groups_names": [args.group]},
                             error_of=lambda r: r.results[0].error_code.value)
    check(r.results[0].error_code, f"group {args.group!r}", getattr(r.results[0], "error_message", None))  # v3+
    print(f"Deleted group {args.group} (its committed offsets; topic data is untouched).")
    return 0


def _targets(client: RoutingClient, args: argparse.Namespace, partitions: list[int],
             current: dict[int, int]) -> dict[int, int]:
    earliest = list_offsets(client, args.topic, partitions, EARLIEST)
    latest = list_offsets(client, args.topic, partitions, LATEST)
    if args.to_earliest:
        wanted = earliest
    elif args.to_latest:
        wanted = latest
    elif args.to_offset is not None:
        wanted = dict.fromkeys(partitions, args.to_offset)
    elif args.to_datetime is not None:
        try:
            when = datetime.datetime.fromisoformat(args.to_datetime)
        except ValueError:
            raise CliError(f"--to-datetime {args.to_datetime!r}: expected ISO 8601, e.g. 2026-11-29T08:00:00") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        by_time = list_offsets(client, args.topic, partitions, int(when.timestamp() * 1000))
        wanted = {p: o if o >= 0 else latest[p] for p, o in by_time.items()}
    else:
        wanted = {p: current.get(p, latest[p]) + args.shift_by for p in partitions}
    # Like kafka-consumer-groups.sh: a target outside the log is clamped to it.
    return {p: min(max(o, earliest[p]), latest[p]) for p, o in wanted.items()}


def cmd_reset_offsets(client: RoutingClient, args: argparse.Namespace) -> int:
    if not args.reason or not args.reason.strip():
        raise CliError("reset-offsets needs --reason: it is written to the group's audit history")
    d = _describe(client, args.group)
    if d.error_code.value not in (0, GROUP_ID_NOT_FOUND):
        check(d.error_code, f"group {args.group!r}")
    if d.group_state not in ("Empty", "Dead") or d.members:
        raise CliError(f"group {args.group} is {d.group_state} with {len(d.members)} member(s); offsets can only "
                       "be reset while the group is inactive (stop its consumers first)")
    partitions = [args.partition] if args.partition is not None else _partitions(client, args.topic)
    current = {p: o for (t, p), o in _committed(client, args.group).items() if t == args.topic}
    targets = _targets(client, args, partitions, current)
    print("TOPIC\tPARTITION\tFROM\tTO")
    for p in partitions:
        print(f"{args.topic}\t{p}\t{current.get(p, '-')}\t{targets[p]}")
    if args.dry_run:
        print("(dry run: nothing committed)")
        return 0

    def first_error(r: Any) -> int:
        return next((p.error_code.value for t in r.topics for p in t.partitions if p.error_code.value), 0)

    r = client.group_request(args.group, 8, {
        "group_id": args.group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": args.topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": args.reason} for p, o in targets.items()]}]}, error_of=first_error)
    code = first_error(r)
    if code:
        raise KafkaError(code, f"commit to group {args.group!r}")
    print(f"Reset {len(targets)} partition(s) of {args.topic} for group {args.group}.")
    return 0


def cmd_skip(client: RoutingClient, args: argparse.Namespace) -> int:
    from samsa.broker.poison import check_reason, default_operator, quarantine_records

    check_reason(args.reason or "")
    if args.count < 1:
        raise CliError(f"--count {args.count}: at least one record")
    d = _describe(client, args.group)
    if d.error_code.value not in (0, GROUP_ID_NOT_FOUND):
        check(d.error_code, f"group {args.group!r}")
    where = f"{args.topic}-{args.partition}"
    if d.group_state not in ("Empty", "Dead") or d.members:
        committed = _committed(client, args.group).get((args.topic, args.partition))
        if committed != args.offset:
            raise CliError(f"group {args.group} is {d.group_state} and its committed offset of {where} is "
                           f"{'none' if committed is None else committed}, not {args.offset}: skip only passes a "
                           "record the group is stuck at")
        raise CliError(f"group {args.group} is {d.group_state} with {len(d.members)} member(s): the broker takes an "
                       "administrative commit only from an empty group (and a live member would commit over it); "
                       "stop its consumers and skip again, or skip inside the consumer with samsa.broker.poison")
    skipped = quarantine_records(client, group=args.group, topic=args.topic, partition=args.partition,
                                 offset=args.offset, count=args.count, reason=args.reason,
                                 operator=args.operator or default_operator(), quarantine_topic=args.quarantine)

    def first_error(r: Any) -> int:
        return next((p.error_code.value for t in r.topics for p in t.partitions if p.error_code.value), 0)

    r = client.group_request(args.group, 8, {
        "group_id": args.group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": args.topic, "partitions": [
            {"partition_index": args.partition, "committed_offset": skipped.next_offset, "committed_leader_epoch": -1,
             "committed_metadata": skipped.metadata}]}]}, error_of=first_error)
    code = first_error(r)
    if code:
        raise KafkaError(code, f"commit to group {args.group!r} (the copies are in {skipped.quarantine_topic})")
    print(f"Skipped {skipped.count} record(s) of {where} (offsets {skipped.first_offset}-{skipped.last_offset}) for "
          f"group {args.group}: copied to {skipped.quarantine_topic}, committed offset {skipped.next_offset}.")
    return 0


def _audit_records(client: RoutingClient, group: str) -> list[dict[str, Any]]:
    from samsa.broker.cli.commands.consume import Consumer
    from samsa.broker.group.records import RESET_AUDIT_KEY, ResetAuditKey, decode_audit_value, decode_key

    partition = partition_for_group(group, len(_partitions(client, OFFSETS_TOPIC)))
    end = list_offsets(client, OFFSETS_TOPIC, [partition], LATEST)[partition]
    start = list_offsets(client, OFFSETS_TOPIC, [partition], EARLIEST)[partition]
    consumer = Consumer(client, OFFSETS_TOPIC, {partition: start}, 0)
    state = consumer.states[partition]
    out: list[dict[str, Any]] = []
    while state.position < end:
        before = state.position
        for _, rec, next_position in consumer.poll(0):
            state.position = max(state.position, next_position)
            if rec is None or rec.key is None or rec.value is None:
                continue
            if int.from_bytes(rec.key[:2], "big", signed=True) != RESET_AUDIT_KEY:
                continue
            key = decode_key(rec.key)
            if isinstance(key, ResetAuditKey) and key.group_id == group:
                out.append(decode_audit_value(rec.value))
        if state.position == before:
            break
    return out


def partition_for_group(group: str, partitions: int) -> int:
    from samsa.broker.group.records import partition_for_group as for_group

    return for_group(group, partitions)


def cmd_history(client: RoutingClient, args: argparse.Namespace) -> int:
    audit = _audit_records(client, args.group)
    if not audit:
        print(f"No offset resets or skips recorded for group {args.group}.")
        return 0
    for a in audit:
        if args.json or args.output == "json":
            print(json.dumps(a, sort_keys=True))
            continue
        kind = a.get("kind", "reset")
        print(f"{a.get('when')}  {kind}  by {a.get('who')}  why: {a.get('why') or '-'}")
        if kind == "skip":
            print(f"    {a.get('count')} record(s) {a.get('first')}-{a.get('last')} copied to {a.get('quarantine')}"
                  f"  operator: {a.get('operator')}")
        for c in a.get("changes", ()):
            start = "-" if c.get("from") is None else c["from"]
            print(f"    {c['topic']}-{c['partition']}: {start} -> {c['to']}")
    return 0


ACTIONS = {"list": cmd_list, "describe": cmd_describe, "delete": cmd_delete, "reset-offsets": cmd_reset_offsets,
           "skip": cmd_skip, "history": cmd_history}


@guarded
def cmd_groups(args: argparse.Namespace) -> int:
    if args.groups_command == "history":
        args.group = args.group or args.group_name
        if not args.group:
            raise CliError("history needs a group: samsa groups history GROUP")
    settings = settings_from_args(args)
    if args.groups_command in ("reset-offsets", "skip"):
        settings = replace(settings, client_id=f"samsa-groups/{getpass.getuser()}@{socket.gethostname()}")
    with RoutingClient(settings) as client:
        return ACTIONS[args.groups_command](client, args)


def add_commands(sub: Any, one_line: Any) -> None:
    groups = one_line(sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets; "
                                     "skip poison records; audit history"))
    actions = groups.add_subparsers(dest="groups_command", required=True)

    def action(name: str, help_: str, group: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = one_line(actions.add_parser(name, help=help_))
        add_connection_options(p)
        if group:
            p.add_argument("--group", "-g", required=True)
        p.set_defaults(func=cmd_groups)
        return p

    p = action("list", "list groups (optionally in one state), asking every broker", group=False)
    p.add_argument("--state", help="Empty, Stable, PreparingRebalance, CompletingRebalance")
    p.add_argument("--header", action="store_true", help="an aligned table with a header line")
    add_output_option(p)
    p = action("describe", "members, assignments, committed offsets and lag")
    p.add_argument("--members", action="store_true",
                   help="one row per member, as kafka-consumer-groups.sh --describe --members --verbose: epochs, "
                        "assignments, and UPGRADED (false: a classic member) in a consumer group of both protocols")
    add_output_option(p)
    action("delete", "delete an inactive group's committed offsets (never topic data)")
    p = action("reset-offsets", "move an inactive group's committed offsets, with a reason")
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
    p = action("skip", "copy poison records to a quarantine topic and commit past them, with a reason")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--offset", type=int, required=True, help="the first record to skip: the committed offset "
                   "(any offset while the group is empty)")
    p.add_argument("--count", type=int, default=1, help="how many records (offsets may have gaps; default 1)")
    p.add_argument("--reason", required=True, help="why; in the audit record and each copy's headers")
    p.add_argument("--quarantine", help="the topic the copies go to (default TOPIC.quarantine, created if missing)")
    p.add_argument("--operator", help="who skips (default: the OS user)")
    p = action("history", "the audit records of offset resets and skips of a group: history GROUP", group=False)
    p.add_argument("group_name", nargs="?", help="the group (or --group)")
    p.add_argument("--group", "-g")
    p.add_argument("--json", action="store_true")
    add_output_option(p)


