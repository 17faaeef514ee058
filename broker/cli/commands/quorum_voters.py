"""`samsa cluster add-controller|remove-controller`: change the metadata quorum's voters (KIP-853), as Kafka's
`kafka-metadata-quorum.sh add-controller|remove-controller` does, with AddRaftVoter / RemoveRaftVoter sent to a
broker (it forwards them to the active controller).

    samsa cluster add-controller --controller-id 4 --controller-data-dir /data/node-4 \\
        --controller-endpoint 10.0.0.4:9093 -b 10.0.0.1:9092
    samsa cluster remove-controller --controller-id 4 --controller-directory-id=-qpS8KRkRaGpWBfk3rGoVw

(`--controller-directory-id=ID`: a Kafka id may start with "-", which would otherwise read as an option.)

The new controller must already run and follow the quorum (an observer that has caught up); its directory id is
the `directory.id` of its meta.properties (--controller-data-dir reads it) or given with --controller-directory-id.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import uuid
from pathlib import Path
from typing import Any

from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.errors import CliError, check, guarded
from samsa.broker.cli.commands.settings import settings_from_args

ACTIONS = ("add-controller", "remove-controller")
CONTROLLER_LISTENER = "CONTROLLER"
TIMEOUT_MS = 30_000


def add_options(cluster: argparse.ArgumentParser) -> None:
    cluster.add_argument("--controller-id", type=int, help="add-/remove-controller: the controller's node id")
    cluster.add_argument("--controller-directory-id",
                         help="add-/remove-controller: its metadata directory id (meta.properties directory.id)")
    cluster.add_argument("--controller-data-dir", help="add-controller: read the directory id from its meta.properties")
    cluster.add_argument("--controller-endpoint", help="add-controller: HOST:PORT of its controller listener")


def _kafka_uuid(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise CliError(f"Failed to parse --controller-directory-id: {text!r} is not a Kafka id "
                       "(22 characters of URL-safe base64)")
    return uuid.UUID(bytes=raw)


def _directory_id(args: argparse.Namespace) -> uuid.UUID:
    if args.controller_directory_id:
        return _kafka_uuid(args.controller_directory_id)
    if args.action == "add-controller" and args.controller_data_dir:
        path = Path(args.controller_data_dir) / "meta.properties"
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise CliError(f"Unable to read meta.properties from {args.controller_data_dir}: {e}") from None
        props = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
        if "directory.id" not in props:
            raise CliError(f"No directory id found in {args.controller_data_dir}")
        return _kafka_uuid(props["directory.id"].strip())
    raise CliError(f"{args.action} needs --controller-directory-id" +
                   (" or --controller-data-dir" if args.action == "add-controller" else ""))


def _endpoint(text: str | None) -> tuple[str, int]:
    host, sep, port = (text or "").rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise CliError("add-controller needs --controller-endpoint HOST:PORT (its controller listener)")
    return host.strip("[]"), int(port)


def _print_id(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


@guarded
def cmd_voter_change(args: argparse.Namespace) -> int:
    if args.controller_id is None or args.controller_id < 0:
        raise CliError(f"{args.action} needs --controller-id N (0 or more)")
    directory = _directory_id(args)
    with RoutingClient(settings_from_args(args)) as client:
        conn = client.any_connection()
        r: Any
        if args.action == "add-controller":
            host, port = _endpoint(args.controller_endpoint)
            r = client.request(conn, 80, {"cluster_id": None, "timeout": TIMEOUT_MS, "voter_id": args.controller_id,
                                          "voter_directory_id": directory,
                                          "listeners": [{"name": CONTROLLER_LISTENER, "host": host, "port": port}]},
                               version=min(1, client.version(80, conn)))
            check(r.error_code, f"adding controller {args.controller_id}", r.error_message)
            print(f"Added controller {args.controller_id} with directory id {_print_id(directory)} and endpoints: "
                  f"{CONTROLLER_LISTENER}://{host}:{port}")
        else:
            r = client.request(conn, 81, {"cluster_id": None, "voter_id": args.controller_id,
                                          "voter_directory_id": directory}, version=0)
            check(r.error_code, f"removing controller {args.controller_id}", r.error_message)
            print(f"Removed KRaft controller {args.controller_id} with directory id {_print_id(directory)}")
    return 0
