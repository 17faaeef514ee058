"""`samsa topics create|list|describe|delete|alter-config|add-partitions|describe-configs`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from samsa.broker.cli.commands import configs
from samsa.broker.cli.commands.client import RETRIABLE, Retry, RoutingClient
from samsa.broker.cli.commands.consume import EARLIEST, LATEST, READ_UNCOMMITTED, Consumer, list_offsets
from samsa.broker.cli.commands.errors import CliError, KafkaError, guarded
from samsa.broker.cli.commands.output import add_output_option, emit, records
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args

ADMIN_TIMEOUT_MS = 30000
NOT_CONTROLLER = 41
# add-partitions reads each partition's newest records, at most this many, to tell whether the topic's
# records carry keys; and gives up reading after this many fetch rounds (it then decides on what it saw).
KEY_SAMPLE_RECORDS = 100
KEY_SAMPLE_FETCHES = 10


def _given(args: argparse.Namespace) -> list[str]:
    """TOPIC positionals (one or many, by action) and --topic."""
    positional = args.topics if isinstance(args.topics, list) else [args.topics] if args.topics else []
    return [*positional, *([args.topic] if args.topic else [])]


def _names(args: argparse.Namespace) -> list[str]:
    names = _given(args)
    if not names:
        raise CliError(f"topics {args.action} needs a topic: samsa topics {args.action} NAME")
    return names


def _admin(client: RoutingClient, api_key: int, values: dict[str, Any], results: str) -> list[Any]:
    """An admin request to any broker (a KRaft broker forwards it to the active controller), retried while
    the controller moves."""

    def attempt() -> list[Any]:
        r = client.request(client.any_connection(), api_key, values)
        out = list(getattr(r, results))
        codes = {x.error_code.value for x in out}
        if codes & {NOT_CONTROLLER, *RETRIABLE} and not codes - {0, NOT_CONTROLLER, *RETRIABLE}:
            raise Retry(next(iter(codes - {0})), "")
        return out

    return client.retrying(attempt)


def cmd_create(client: RoutingClient, args: argparse.Namespace) -> int:
    topic_configs = configs.parse_pairs(args.config, "--config")
    names = _names(args)
    values = {"topics": [{"name": n, "num_partitions": args.partitions, "replication_factor": args.replication_factor,
                          "assignments": (), "configs": [{"name": k, "value": v} for k, v in topic_configs.items()]}
                         for n in names], "timeout": ADMIN_TIMEOUT_MS, "validate_only": False}
    failed = 0
    for r in _admin(client, 19, values, "topics"):
        if r.error_code.value != 0:
            print(f"error: {KafkaError(r.error_code.value, f'topic {r.name!r}', r.error_message)}", file=sys.stderr)
            failed += 1
        else:
            print(f"Created topic {r.name}.")
    return 1 if failed else 0


def cmd_list(client: RoutingClient, args: argparse.Namespace) -> int:
    view = client.refresh(None)
    shown = [t for t in sorted(view.topics.values(), key=lambda t: t.name)
             if args.include_internal or not (t.is_internal or t.name.startswith("__"))]
    headers = ["NAME", "PARTITIONS", "REPLICAS"]
    rows = [[t.name, len(t.partitions), max((len(p.replicas) for p in t.partitions.values()), default=0)]
            for t in shown]
    emit(args, records(headers, rows), headers, rows)
    return 0


def cmd_describe(client: RoutingClient, args: argparse.Namespace) -> int:
    names = _given(args)
    view = client.refresh(names or None)
    out: list[dict[str, Any]] = []
    for name in names or sorted(view.topics):
        info = view.topics.get(name)
        if info is None or info.error_code != 0:
            raise KafkaError(info.error_code if info else 3, f"topic {name!r}")
        if not names and info.is_internal and not args.include_internal:
            continue
        parts = [{"partition": p.partition, "leader": p.leader_id, "leader_epoch": p.leader_epoch,
                  "replicas": list(p.replicas), "isr": list(p.isr), "offline": list(p.offline)}
                 for p in sorted(info.partitions.values(), key=lambda p: p.partition)]
        out.append({"name": info.name, "topic_id": str(info.topic_id) if info.topic_id is not None else None,
                    "internal": info.is_internal, "partitions": parts})
    if args.output == "json":
        emit(args, out, [], [])
        return 0
    for i, t in enumerate(out):
        if i:
            print()
        # kafka-topics.sh --describe's first line, then rpk-like columns
        print(f"Topic: {t['name']}\tTopicId: {t['topic_id']}\tPartitionCount: {len(t['partitions'])}")
        headers = ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"]
        rows = [[p["partition"], p["leader"], p["leader_epoch"], ",".join(map(str, p["replicas"])),
                 ",".join(map(str, p["isr"])), ",".join(map(str, p["offline"])) or "-"] for p in t["partitions"]]
        emit(args, None, headers, rows)
    return 0


def cmd_delete(client: RoutingClient, args: argparse.Namespace) -> int:
    names = _names(args)
    version = client.version(20)
    values: dict[str, Any] = {"timeout_ms": ADMIN_TIMEOUT_MS, "timeout": ADMIN_TIMEOUT_MS}
    if version >= 6:
        values["topics"] = [{"name": n} for n in names]
    else:
        values["topic_names"] = names
    failed = 0
    for r in _admin(client, 20, values, "responses"):
        if r.error_code.value != 0:
            print(f"error: {KafkaError(r.error_code.value, f'topic {r.name!r}', getattr(r, 'error_message', None))}",
                  file=sys.stderr)
            failed += 1
        else:
            print(f"Deleted topic {r.name}.")
    return 1 if failed else 0


def keyed_partitions(client: RoutingClient, topic: str, partitions: list[int]) -> list[int]:
    """The partitions whose newest records (the batches holding their last KEY_SAMPLE_RECORDS offsets) include
    a record with a non-null key.  Newest, because they show how producers write the topic today."""
    start = list_offsets(client, topic, partitions, EARLIEST)
    end = list_offsets(client, topic, partitions, LATEST)
    positions = {p: max(start[p], end[p] - KEY_SAMPLE_RECORDS) for p in partitions if end[p] > start[p]}
    keyed: set[int] = set()
    if not positions:
        return []
    consumer = Consumer(client, topic, positions, READ_UNCOMMITTED)
    for _ in range(KEY_SAMPLE_FETCHES):
        for partition, record, _next in consumer.poll(0):
            if record is not None and record.key is not None:  # (control records are filtered out by poll)
                keyed.add(partition)
        for partition in keyed:
            consumer.states.pop(partition, None)  # one key is enough
        if not consumer.states or consumer.at_end():
            break
    return sorted(keyed)


def cmd_add_partitions(client: RoutingClient, args: argparse.Namespace) -> int:
    (name,) = _names(args)[:1]
    if args.total is None and args.num is None:
        raise CliError("add-partitions needs --num N (partitions to add) or --total N (the new count)")
    current = len(client.topic(name, refresh=True).partitions)
    total = args.total if args.total is not None else current + args.num
    if total > current and not args.force:
        # The seeds: expansion is "a routing transition with ordering consequences, not a harmless capacity
        # toggle". The default partitioners map a key to murmur2(key) % partitions, so with more partitions
        # most keys move, and a consumer can read a key's new records before its older ones. Kafka's
        # kafka-topics.sh only prints a warning; the wire API (CreatePartitions) stays as Kafka's.
        keyed = keyed_partitions(client, name, list(range(current)))
        if keyed:
            raise CliError(
                f"topic {name!r} holds records with keys (partitions {','.join(map(str, keyed))}): going from "
                f"{current} to {total} partitions changes which partition each key maps to, so a key's new "
                "records may be read before its older ones; stop the producers of those keys, let consumers "
                "drain the topic, then rerun with --force")
    values = {"topics": [{"name": name, "count": total, "assignments": None}], "timeout": ADMIN_TIMEOUT_MS,
              "validate_only": False}
    (r,) = _admin(client, 37, values, "results")
    if r.error_code.value != 0:
        raise KafkaError(r.error_code.value, f"topic {name!r}", r.error_message)
    print(f"Topic {name}: {current} -> {total} partitions.")
    return 0


def cmd_alter_config(client: RoutingClient, args: argparse.Namespace) -> int:
    (name,) = _names(args)[:1]
    client.topic(name)  # UNKNOWN_TOPIC_OR_PARTITION by name before anything else
    configs.alter(client, configs.TOPIC, name, configs.parse_pairs(args.set, "--set"), args.delete or [])
    print(f"Altered the configs of topic {name}.")
    return 0


def cmd_describe_configs(client: RoutingClient, args: argparse.Namespace) -> int:
    (name,) = _names(args)[:1]
    items = configs.describe(client, configs.TOPIC, name)
    if not args.all:
        items = [c for c in items if c["source"] == "DYNAMIC_TOPIC_CONFIG"] if args.overrides_only else items
    headers = ["KEY", "VALUE", "SOURCE"]
    rows = [[c["name"], c["value"], c["source"]] for c in items]
    emit(args, items, headers, rows)
    return 0


ACTIONS = {"create": cmd_create, "list": cmd_list, "describe": cmd_describe, "delete": cmd_delete,
           "add-partitions": cmd_add_partitions, "alter-config": cmd_alter_config,
           "describe-configs": cmd_describe_configs}


@guarded
def cmd_topics(args: argparse.Namespace) -> int:
    with RoutingClient(settings_from_args(args)) as client:
        return ACTIONS[args.action](client, args)


def add_commands(sub: Any, one_line: Any) -> None:
    topics = one_line(sub.add_parser("topics", help="create, list, describe, delete and configure topics"))
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help_: str, many: bool = False) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = one_line(actions.add_parser(name, help=help_))
        if name != "list":
            p.add_argument("topics", nargs="*" if many else "?", metavar="TOPIC")
            p.add_argument("--topic", help="the topic (as kafka-topics.sh names it)")
        add_connection_options(p)
        p.set_defaults(func=cmd_topics, action=name)
        return p

    p = action("create", "create topics", many=True)
    p.add_argument("--partitions", "-p", type=int, default=-1, help="default: the broker's num.partitions")
    p.add_argument("--replication-factor", "-r", type=int, default=-1,
                   help="default: the broker's default.replication.factor")
    p.add_argument("--config", "-c", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    p = action("list", "list topics")
    p.add_argument("--include-internal", "-i", action="store_true", help="also __consumer_offsets and friends")
    add_output_option(p)
    p = action("describe", "partitions, leaders, replicas, ISR and offline replicas", many=True)
    p.add_argument("--include-internal", "-i", action="store_true")
    add_output_option(p)
    action("delete", "delete topics (their data is gone)", many=True)
    p = action("add-partitions", "grow a topic's partition count")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--num", "-n", type=int, help="partitions to add (rpk topic add-partitions -n)")
    how.add_argument("--total", type=int, help="the new total (kafka-topics.sh --alter --partitions)")
    p.add_argument("--force", action="store_true",
                   help="grow a topic whose records carry keys (their key -> partition mapping changes)")
    p = action("alter-config", "set or delete topic configs")
    p.add_argument("--set", "-s", action="append", metavar="KEY=VALUE")
    p.add_argument("--delete", "-d", action="append", metavar="KEY")
    p = action("describe-configs", "a topic's configs with their sources")
    p.add_argument("--overrides-only", action="store_true", help="only the topic's own overrides")
    p.add_argument("--all", action="store_true", help=argparse.SUPPRESS)
    add_output_option(p)
