"""WriteTxnMarkers (key 27), v1-v2 (Kafka 4 removed v0).

A transaction coordinator asks a partition leader to append COMMIT/ABORT markers.  Samsa's own
coordinator calls the replica manager directly; this handler serves the same call over the wire.
v1 is flexible. v2 (Kafka 4.4, KIP-1228) adds each marker's transaction_version: a version 2 transaction's
coordinator bumps the producer epoch before it writes the markers, so the partition leader refuses such a marker
unless its epoch is newer than the producer's (INVALID_PRODUCER_EPOCH: a marker written already, or a stale
one); other markers keep the older rule (not older than the producer's epoch). v1 reads as version 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build, field
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.write_txn_markers import v1, v2
    WriteTxnMarkersRequest = v1.WriteTxnMarkersRequest | v2.WriteTxnMarkersRequest
    WriteTxnMarkersResponse = v1.WriteTxnMarkersResponse | v2.WriteTxnMarkersResponse

API = ApiSpec(key=27, min_version=1, max_version=2)



def handle_write_txn_markers(request: WriteTxnMarkersRequest, ctx: RequestContext) -> WriteTxnMarkersResponse:
    markers = []
    denied = cluster_error(ctx, AclOperation.CLUSTER_ACTION)  # KafkaApis: from brokers only
    for m in request.markers:
        partitions: list[tuple[str, int]] = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        results = ({tp: denied for tp in partitions} if denied else
                   ctx.broker.txn.write_markers(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                                bool(m.transaction_result), partitions, ctx.now_ms,
                                                int(field(m, "transaction_version", 0))))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), error in results.items():
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": error})
        markers.append({"producer_id": m.producer_id,
                        "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]})
    cls: type[WriteTxnMarkersResponse] = response_class(27, ctx.version)
    return build(cls, {"markers": markers})
