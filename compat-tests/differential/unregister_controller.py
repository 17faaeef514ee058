"""Differential scenario of UnregisterController (key 94, Kafka 4.4) on a one-voter quorum, sent to the broker
listener (both forward it to the active controller; a single Samsa node has no controller listener to send it
to): the active controller refuses to unregister itself, an unknown id answers CONTROLLER_ID_NOT_REGISTERED (136,
newer than kio's ErrorCode: UNKNOWN(136) on both sides), and the voter is still the voter after them.
tests/cluster/test_unregister_controller.py removes a registration on three nodes."""

from __future__ import annotations

from typing import Any

from differential.framework import Ctx, err, scenario
from samsa.broker.client import Connection


def _voters(conn: Connection) -> list[int]:
    r = conn.request(55, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
                     version=2)
    return [int(v.replica_id) for v in r.topics[0].partitions[0].current_voters]


@scenario
def unregister_controller(ctx: Ctx) -> Any:
    c = ctx.connect()
    (voter_id,) = _voters(c)

    def unregister(controller_id: int) -> tuple[str, str | None]:
        r = c.request(94, {"controller_id": controller_id}, version=0)
        return err(r), r.error_message

    return {
        "unregister_itself": unregister(voter_id),
        "unregister_unknown_id": unregister(42),
        "unregister_negative_id": unregister(-1),
        "unregister_itself_again": unregister(voter_id),
        "voters_after": _voters(c) == [voter_id],
    }
