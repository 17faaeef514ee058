"""`samsa user create|delete|list`: SCRAM users (DescribeUserScramCredentials / AlterUserScramCredentials),
what `kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-512=[password=...]'` does.

The password never leaves this process: it is salted and hashed here (PBKDF2, `--iterations`, at least
4096) and only the salt and SaltedPassword are sent, as Kafka's admin client does. Without --password the
password is read from the terminal (or one line of stdin when it is not a terminal).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.errors import CliError, KafkaError, guarded
from samsa.broker.cli.commands.output import add_output_option, emit, records
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args
from samsa.broker.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    salted_password,
)

DESCRIBE, ALTER = 50, 51
MECHANISMS = [m.mechanism_name for m in ScramMechanism]


def _mechanisms(args: argparse.Namespace) -> list[ScramMechanism]:
    chosen = args.mechanism or ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    found = [ScramMechanism.from_name(m) for m in chosen]
    return [m for m in found if m is not None]


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if sys.stdin.isatty():
        first = getpass.getpass(f"Password for {args.name}: ")
        if getpass.getpass("Again: ") != first:
            raise CliError("the passwords differ")
        return first
    return sys.stdin.readline().rstrip("\n")


def _check(results: list[Any], what: str) -> int:
    failed = 0
    for r in results:
        if r.error_code.value != 0:
            print(f"error: {KafkaError(r.error_code.value, f'user {r.user!r}', r.error_message)}", file=sys.stderr)
            failed += 1
        else:
            print(f"{what} user {r.user}.")
    return 1 if failed else 0


def cmd_create(client: RoutingClient, args: argparse.Namespace) -> int:
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise CliError(f"--iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}")
    password = _password(args)
    if not password:
        raise CliError("the password is empty")
    upsertions = []
    for mechanism in _mechanisms(args):
        salt = os.urandom(32)
        salted = salted_password(mechanism, password, salt, args.iterations)
        upsertions.append({"name": args.name, "mechanism": int(mechanism), "iterations": args.iterations,
                           "salt": salt, "salted_password": salted})
    r = client.request(client.any_connection(), ALTER, {"deletions": (), "upsertions": upsertions})
    return _check(list(r.results), "Created or updated")


def cmd_delete(client: RoutingClient, args: argparse.Namespace) -> int:
    mechanisms = _mechanisms(args) if args.mechanism else _existing(client, args.name)
    if not mechanisms:
        raise CliError(f"user {args.name!r} has no SCRAM credentials")
    deletions = [{"name": args.name, "mechanism": int(m)} for m in mechanisms]
    r = client.request(client.any_connection(), ALTER, {"deletions": deletions, "upsertions": ()})
    return _check(list(r.results), "Deleted")


def _existing(client: RoutingClient, name: str) -> list[ScramMechanism]:
    r = client.request(client.any_connection(), DESCRIBE, {"users": [{"name": name}]})
    found: list[ScramMechanism] = []
    for result in r.results:
        for info in result.credential_infos:
            mechanism = ScramMechanism.from_id(int(info.mechanism))
            if mechanism is not None:
                found.append(mechanism)
    return found


def cmd_list(client: RoutingClient, args: argparse.Namespace) -> int:
    users = [{"name": n} for n in args.names] if args.names else None
    r = client.request(client.any_connection(), DESCRIBE, {"users": users})
    rows: list[list[Any]] = []
    failed = 0
    for result in r.results:
        if result.error_code.value != 0:
            print(f"error: {KafkaError(result.error_code.value, f'user {result.user!r}', result.error_message)}",
                  file=sys.stderr)
            failed += 1
            continue
        for info in result.credential_infos:
            mechanism = ScramMechanism.from_id(int(info.mechanism))
            rows.append([result.user, mechanism.mechanism_name if mechanism else str(info.mechanism),
                         int(info.iterations)])
    headers = ["USER", "MECHANISM", "ITERATIONS"]
    emit(args, records(headers, rows), headers, rows)
    return 1 if failed else 0


@guarded
def cmd_user(args: argparse.Namespace) -> int:
    with RoutingClient(settings_from_args(args)) as client:
        return {"create": cmd_create, "delete": cmd_delete, "list": cmd_list}[args.user_command](client, args)


def add_commands(sub: Any, one_line: Any) -> None:
    user = one_line(sub.add_parser("user", help="create, delete or list SCRAM users"))
    actions = user.add_subparsers(dest="user_command", required=True)
    p = one_line(actions.add_parser("create", help="create a SCRAM user or change its password"))
    p.add_argument("name", metavar="USER")
    p.add_argument("--password", default=None, help="the password (default: asked, or one line of stdin)")
    p.add_argument("--mechanism", action="append", choices=MECHANISMS,
                   help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (default: both)")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"PBKDF2 iterations, {MIN_ITERATIONS} to {MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})")
    add_connection_options(p)
    p.set_defaults(func=cmd_user)
    p = one_line(actions.add_parser("delete", help="delete a SCRAM user's credentials"))
    p.add_argument("name", metavar="USER")
    p.add_argument("--mechanism", action="append", choices=MECHANISMS, help="only this mechanism (default: all)")
    add_connection_options(p)
    p.set_defaults(func=cmd_user)
    p = one_line(actions.add_parser("list", help="SCRAM users with their mechanisms and iterations"))
    p.add_argument("names", nargs="*", metavar="USER")
    add_output_option(p)
    add_connection_options(p)
    p.set_defaults(func=cmd_user)
