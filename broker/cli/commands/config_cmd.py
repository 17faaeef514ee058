"""`samsa config get|set`: dynamic broker configs (one broker's, or the cluster-wide default)."""

from __future__ import annotations

import argparse
from typing import Any

from samsa.broker.cli.commands import configs
from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.errors import CliError, guarded
from samsa.broker.cli.commands.output import add_output_option, emit
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args


def _broker(client: RoutingClient, args: argparse.Namespace) -> int:
    client.refresh([])
    if args.broker is None:
        return min(client.brokers)
    if args.broker not in client.brokers:
        known = ", ".join(map(str, sorted(client.brokers)))
        raise CliError(f"--broker {args.broker}: no such broker (brokers: {known})")
    return int(args.broker)


def cmd_get(client: RoutingClient, args: argparse.Namespace) -> int:
    node_id = _broker(client, args)
    items = configs.describe(client, configs.BROKER, str(node_id), args.keys or None, node_id=node_id)
    if args.keys:
        known = {c["name"] for c in items}
        unknown = [k for k in args.keys if k not in known]
        if unknown:
            raise CliError(f"broker {node_id} has no config {', '.join(unknown)}; `samsa config get` lists them all")
    if args.dynamic:
        items = [c for c in items if c["source"].startswith("DYNAMIC")]
    emit(args, items, ["KEY", "VALUE", "SOURCE", "READ-ONLY"],
         [[c["name"], c["value"], c["source"], str(c["read_only"]).lower()] for c in items],
         title=None)
    return 0


def cmd_set(client: RoutingClient, args: argparse.Namespace) -> int:
    pairs = configs.parse_pairs(args.pairs, "config set")
    if args.broker is None:
        # resource name "" is the cluster-wide default (kafka-configs.sh --entity-default)
        configs.alter(client, configs.BROKER, "", pairs, args.delete or [])
        where = "the cluster-wide default"
    else:
        node_id = _broker(client, args)
        configs.alter(client, configs.BROKER, str(node_id), pairs, args.delete or [], node_id=node_id)
        where = f"broker {node_id}"
    changed = [*(f"{k}={v}" for k, v in pairs.items()), *(f"-{k}" for k in args.delete or ())]
    print(f"Altered {where}: {', '.join(changed)}")
    return 0


@guarded
def cmd_config(args: argparse.Namespace) -> int:
    with RoutingClient(settings_from_args(args)) as client:
        return (cmd_get if args.config_command == "get" else cmd_set)(client, args)


def add_commands(sub: Any, one_line: Any) -> None:
    config = one_line(sub.add_parser("config", help="get or set dynamic broker configs"))
    actions = config.add_subparsers(dest="config_command", required=True)
    p = one_line(actions.add_parser("get", help="a broker's configs with their sources"))
    p.add_argument("keys", nargs="*", metavar="KEY")
    p.add_argument("--broker", type=int, help="the broker (default: the lowest id)")
    p.add_argument("--dynamic", action="store_true", help="only the dynamically set ones")
    add_output_option(p)
    add_connection_options(p)
    p.set_defaults(func=cmd_config)
    p = one_line(actions.add_parser("set", help="set (KEY=VALUE) or --delete dynamic broker configs"))
    p.add_argument("pairs", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--delete", "-d", action="append", metavar="KEY", help="remove a dynamic value")
    p.add_argument("--broker", type=int, help="this broker only (default: the cluster-wide default)")
    add_connection_options(p)
    p.set_defaults(func=cmd_config)
