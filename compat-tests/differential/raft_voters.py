"""Differential scenario of KIP-853's AddRaftVoter (80) and RemoveRaftVoter (81) refusals, on a one-voter
quorum (the reference Kafka is formatted with --standalone; a single Samsa node is its own voter), sent to
the broker listener (both forward them to the active controller). Only answers that change nothing are
compared: a duplicate voter id, an unknown or the last voter, a missing directory id or controller
listener, another cluster's id. Directory and cluster ids differ between the two brokers, so they are
replaced by names (<voter dir>, <asked dir>, <cluster>) before comparing; DescribeQuorum v2 says which
directory id the voter has."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from differential.framework import Ctx, err, scenario
from samsa.broker.client import Connection

ASKED = uuid.UUID("6b0a3b5e-3f47-4c1b-9a8e-0c7b1d2e3f40")
ZERO = uuid.UUID(int=0)


def _kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def _voters(conn: Connection) -> list[tuple[int, uuid.UUID]]:
    r = conn.request(55, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
                     version=2)
    p = r.topics[0].partitions[0]
    return [(int(v.replica_id), v.replica_directory_id) for v in p.current_voters]


@scenario
def raft_voters(ctx: Ctx) -> Any:
    c = ctx.connect()
    voters = _voters(c)
    cluster_id = c.request(60, {"include_cluster_authorized_operations": False}, version=0).cluster_id
    names = {_kafka_uuid(d): "<voter dir>" for _, d in voters} | {_kafka_uuid(ASKED): "<asked dir>",
                                                                  str(cluster_id): "<cluster>"}

    def clean(text: str | None) -> str | None:
        if text is None:
            return None
        for raw, name in names.items():
            text = text.replace(raw, name)
        return text

    def add(voter_id: int, directory: uuid.UUID, listener: str = "CONTROLLER", cluster: str | None = None,
            version: int = 1) -> tuple[str, str | None]:
        values: dict[str, Any] = {"cluster_id": cluster, "timeout": 10_000, "voter_id": voter_id,
                                  "voter_directory_id": directory,
                                  "listeners": [{"name": listener, "host": "127.0.0.1", "port": 1}]}
        r = c.request(80, values, version=version)
        return err(r), clean(r.error_message)

    def remove(voter_id: int, directory: uuid.UUID, cluster: str | None = None) -> tuple[str, str | None]:
        r = c.request(81, {"cluster_id": cluster, "voter_id": voter_id, "voter_directory_id": directory}, version=0)
        return err(r), clean(r.error_message)

    (voter_id, voter_dir), = voters
    return {
        "voter_count": len(voters),
        "voter_has_directory_id": voter_dir not in (None, ZERO),
        "add_duplicate_id": add(voter_id, ASKED),
        "add_duplicate_id_v0": add(voter_id, ASKED, version=0),
        "add_without_directory_id": add(7, ZERO),
        "add_without_controller_listener": add(7, ASKED, listener="PLAINTEXT")[0],
        "add_for_another_cluster": add(7, ASKED, cluster="another-cluster"),
        # Its controller listener (port 1) does not answer ApiVersions. (Asked again at once, Kafka answers "New
        # voter ... is not ready to receive requests" while its client backs off reconnecting, 50 ms growing to
        # 1 s: timing, not compared; Samsa asks again.)
        "add_unreachable": add(7, ASKED),
        "remove_unknown_id": remove(99, ASKED),
        "remove_with_another_directory_id": remove(voter_id, ASKED),
        "remove_without_directory_id": remove(voter_id, ZERO),
        "remove_the_last_voter": remove(voter_id, voter_dir),
        "remove_for_another_cluster": remove(voter_id, voter_dir, cluster="another-cluster"),
        "voters_after": len(_voters(c)),
    }
