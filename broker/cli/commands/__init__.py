"""The client commands of `samsa` (topics, produce, consume, groups, cluster info|health, config, user, tls): one
module per command, a routing client (client.py) and one-line errors (errors.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from samsa.broker.cli.commands.output import add_output_option
from samsa.broker.cli.commands.settings import add_connection_options


class _OneLineErrors:
    """argparse prints the usage and then the error; a CLI error here is one line saying what to do."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def __call__(self, message: str) -> NoReturn:
        print(f"error: {self.parser.prog}: {message} (see `{self.parser.prog} --help`)", file=sys.stderr)
        sys.exit(2)


def one_line(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    setattr(parser, "error", _OneLineErrors(parser))  # noqa: B010 (assigning a method is what this does)
    return parser


def _add_cluster_views(sub: Any) -> None:
    """`samsa cluster info|health` beside cluster_cli's `up|down`, on the same parser."""
    from samsa.broker.cli import cluster as cluster_cli
    from samsa.broker.cli.commands import quorum_voters
    from samsa.broker.cli.commands.cluster_info import cmd_cluster_view

    cluster_cli.add_commands(sub)
    cluster: argparse.ArgumentParser = sub.choices["cluster"]
    for action in cluster._actions:  # the positional `action` that cluster_cli declares with choices
        if action.dest == "action" and action.choices is not None:
            action.choices = [*action.choices, "info", "health", *quorum_voters.ACTIONS]
            action.help = ("up, down: a local cluster; info, health: any cluster's state; add-controller, "
                           "remove-controller: change the metadata quorum's voters (KIP-853)")
    add_connection_options(cluster)
    add_output_option(cluster)
    cluster.add_argument("--exit-status", action="store_true", help="health: exit 1 when not healthy")
    quorum_voters.add_options(cluster)
    one_line(cluster)

    def run(args: argparse.Namespace) -> int:
        if args.action in ("info", "health"):
            return cmd_cluster_view(args)
        if args.action in quorum_voters.ACTIONS:
            return quorum_voters.cmd_voter_change(args)
        result: int = cluster_cli.cmd_cluster(args)
        return result

    cluster.set_defaults(func=run)


def add_commands(sub: Any, top: argparse.ArgumentParser | None = None) -> None:
    """Register the client commands on `samsa`'s subparsers; `top` (the `samsa` parser) gets one-line errors too."""
    from samsa.broker.cli.commands import acl, config_cmd, consume, groups, produce, tls_cmd, topics, users

    topics.add_commands(sub, one_line)
    acl.add_commands(sub, one_line)
    produce.add_commands(sub, one_line)
    consume.add_commands(sub, one_line)
    groups.add_commands(sub, one_line)
    config_cmd.add_commands(sub, one_line)
    users.add_commands(sub, one_line)
    tls_cmd.add_commands(sub, one_line)
    _add_cluster_views(sub)
    if top is not None:
        one_line(top)
