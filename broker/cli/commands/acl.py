"""`samsa acl add|list|remove`: the cluster's ACLs (CreateAcls, DescribeAcls, DeleteAcls), as kafka-acls.sh.

A resource is one of --topic, --group, --transactional-id, --cluster (kafka-acls.sh's options), LITERAL
unless --prefixed. `add` creates one ACL per operation; `list` and `remove` take the same options as a
filter (leave one out to match any value; `list` with no resource lists every ACL).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.errors import CliError, KafkaError, guarded
from samsa.broker.cli.commands.output import add_output_option, emit, records
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args
from samsa.broker.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
_OPERATIONS = {op.name.replace("_", ""): op for op in AclOperation
               if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}


def _operation(text: str) -> AclOperation:
    """kafka-acls.sh's names (Read, IdempotentWrite, DescribeConfigs) or ours (read, idempotent-write)."""
    found = _OPERATIONS.get(text.upper().replace("-", "").replace("_", ""))
    if found is None:
        raise CliError(f"unknown operation {text!r}: one of {', '.join(sorted(o.lower() for o in _OPERATIONS))}")
    return found


def _resource(args: argparse.Namespace, *, required: bool) -> tuple[ResourceType, str | None]:
    given = [(rt, name) for rt, name in ((ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
                                         (ResourceType.TRANSACTIONAL_ID, args.transactional_id))
             if name is not None]
    if args.cluster:
        given.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if len(given) > 1:
        raise CliError("name one resource: --topic, --group, --transactional-id or --cluster")
    if not given:
        if required:
            raise CliError(f"acl {args.action} needs a resource: --topic, --group, --transactional-id or --cluster")
        return ResourceType.ANY, None
    return given[0]


def _permission(args: argparse.Namespace) -> AclPermissionType:
    return AclPermissionType.DENY if args.deny else AclPermissionType.ALLOW


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    resource_type, name = _resource(args, required=args.action == "remove")
    ops = [_operation(o) for o in args.operation or ()]
    if len(ops) > 1:
        raise CliError(f"acl {args.action} takes at most one --operation")
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL if name is not None else PatternType.ANY
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": args.principal, "host_filter": args.host,
            "operation": ops[0] if ops else AclOperation.ANY,
            "permission_type": _permission(args) if args.deny or args.allow_only else AclPermissionType.ANY}


def _row(resource_type: int, name: str, pattern: int, acl: Any) -> list[Any]:
    return [ResourceType(resource_type).name, name, PatternType(pattern).name, acl.principal, acl.host,
            AclOperation(acl.operation).name, AclPermissionType(acl.permission_type).name]


HEADERS = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


def cmd_add(client: RoutingClient, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args, required=True)
    if not args.principal:
        raise CliError("acl add needs --principal (User:NAME)")
    if not args.operation:
        raise CliError("acl add needs --operation (read, write, describe, ...)")
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    creations = [{"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
                  "principal": args.principal, "host": args.host or "*", "operation": _operation(o),
                  "permission_type": _permission(args)} for o in args.operation]
    r = client.request(client.any_connection(), CREATE_ACLS, {"creations": creations})
    failed = 0
    for creation, result in zip(creations, r.results, strict=True):
        what = (f"{creation['permission_type'].name} {creation['operation'].name} for {args.principal} on "
                f"{resource_type.name}:{pattern.name}:{name}")
        if result.error_code.value != 0:
            print(f"error: {KafkaError(result.error_code.value, what, result.error_message)}", file=sys.stderr)
            failed += 1
        else:
            print(f"Added ACL {what}.")
    return 1 if failed else 0


def cmd_list(client: RoutingClient, args: argparse.Namespace) -> int:
    r = client.request(client.any_connection(), DESCRIBE_ACLS, _filter(args))
    if r.error_code.value != 0:
        raise KafkaError(r.error_code.value, "the ACLs", r.error_message)
    rows = [_row(res.resource_type, res.resource_name, res.pattern_type, acl)
            for res in r.resources for acl in res.acls]
    emit(args, records(HEADERS, rows), HEADERS, rows)
    return 0


def cmd_remove(client: RoutingClient, args: argparse.Namespace) -> int:
    r = client.request(client.any_connection(), DELETE_ACLS, {"filters": [_filter(args)]})
    (result,) = r.filter_results
    if result.error_code.value != 0:
        raise KafkaError(result.error_code.value, "the ACLs", result.error_message)
    for acl in result.matching_acls:
        row = _row(acl.resource_type, acl.resource_name, acl.pattern_type, acl)
        print(f"Removed ACL {row[6]} {row[5]} for {row[3]} from {row[4]} on {row[0]}:{row[2]}:{row[1]}.")
    if not result.matching_acls:
        print("No ACL matched.")
    return 0


ACTIONS = {"add": cmd_add, "list": cmd_list, "remove": cmd_remove}


@guarded
def cmd_acl(args: argparse.Namespace) -> int:
    with RoutingClient(settings_from_args(args)) as client:
        return ACTIONS[args.action](client, args)


def add_commands(sub: Any, one_line: Any) -> None:
    acl = one_line(sub.add_parser("acl", help="add, list and remove ACLs (authorizer.class.name must be set)"))
    actions = acl.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_ in (("add", "allow (or --deny) operations on a resource"),
                        ("list", "the ACLs, all or those matching the options"),
                        ("remove", "remove the ACLs matching the options")):
        p: argparse.ArgumentParser = one_line(actions.add_parser(name, help=help_))
        p.add_argument("--principal", help="User:NAME (User:* for everyone)")
        p.add_argument("--operation", action="append", metavar="OP",
                       help="read, write, create, delete, alter, describe, cluster-action, describe-configs, "
                            "alter-configs, idempotent-write, all" + (" (repeatable)" if name == "add" else ""))
        p.add_argument("--host", help="the client address the ACL applies to (default: every host)")
        p.add_argument("--topic", help="a topic (with --prefixed: every topic starting with it)")
        p.add_argument("--group", help="a consumer group")
        p.add_argument("--transactional-id", help="a transactional id")
        p.add_argument("--cluster", action="store_true", help="the cluster")
        p.add_argument("--prefixed", action="store_true", help="the name is a prefix (PREFIXED pattern)")
        p.add_argument("--deny", action="store_true", help="a DENY ACL (DENY wins over any ALLOW)")
        if name != "add":
            p.add_argument("--allow-only", action="store_true", help="only ALLOW ACLs")
        add_connection_options(p)
        if name == "list":
            add_output_option(p)
        p.set_defaults(func=cmd_acl, action=name, allow_only=False)
