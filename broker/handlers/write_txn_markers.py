"""WriteTxnMarkers (key 27), v1 (Kafka 4 removed v0).

A transaction coordinator asks a partition leader to append COMMIT/ABORT markers.  Samsa's own
coordinator calls the replica manager directly; this handler serves the same call over the wire.
v1 is flexible. v2 (Kafka 4.1) adds transaction_version (KIP-890), which only changes how Kafka
validates the epoch; Samsa does not advertise it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.write_txn_markers import v1
    WriteTxnMarkersRequest = v1.WriteTxnMarkersRequest
    WriteTxnMarkersResponse = v1.WriteTxnMarkersResponse

API = ApiSpec(key=27, min_version=1, max_version=1)



def handle_write_txn_markers(request: WriteTxnMarkersRequest, ctx: RequestContext) -> WriteTxnMarkersResponse:
    markers = []
    denied = cluster_error(ctx, AclOperation.CLUSTER_ACTION)  # KafkaApis: from brokers only
    for m in request.markers:
        partitions: list[tuple[str, int]] = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        results = ({tp: denied for tp in partitions} if denied else
                   ctx.broker.txn.write_markers(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                                bool(m.transaction_result), partitions, ctx.now_ms))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), error in results.items():
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": error})
        markers.append({"producer_id": m.producer_id,
                        "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]})
    cls: type[WriteTxnMarkersResponse] = response_class(27, ctx.version)
    return build(cls, {"markers": markers})
