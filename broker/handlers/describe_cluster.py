"""DescribeCluster (key 60), v0-v2.

v1 adds endpoint_type (KIP-919): 1 = brokers; 2 = controllers, which a Samsa broker does not serve
(UNSUPPORTED_ENDPOINT_TYPE), as a Kafka broker answers.
v2 adds include_fenced_brokers to the request and is_fenced to each broker (KIP-1073): asked for, every
registered broker is listed, fenced ones marked, so `kafka-cluster.sh list-endpoints --include-fenced-brokers`
and admin tools can tell a broker that is down from one that was never there. Without it (and before v2)
only unfenced brokers are listed, as before.

On the controller listener (KIP-919, what `kafka-metadata-quorum.sh --bootstrap-controller` and the admin
client's bootstrap.controllers ask first) it answers endpoint_type 2 only, as Kafka's ControllerApis: the
controllers are the registered ones (KIP-919's RegisterControllerRecord, broker.controller_registrations; a
controller unregistered by UnregisterController is not listed), controller_id the quorum's leader, and it needs
ALTER on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS, broker_entries
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_authorized_operations, cluster_error
from samsa.broker.security.listeners import endpoint_on
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_cluster import v0, v1, v2

    from samsa.broker.broker import Broker

    DescribeClusterRequest = v0.DescribeClusterRequest | v1.DescribeClusterRequest | v2.DescribeClusterRequest
    DescribeClusterResponse = v0.DescribeClusterResponse | v1.DescribeClusterResponse | v2.DescribeClusterResponse

API = ApiSpec(key=60, min_version=0, max_version=2)

BROKERS = 1
CONTROLLERS = 2


def handle_describe_cluster(request: DescribeClusterRequest, ctx: RequestContext) -> DescribeClusterResponse:
    broker = ctx.broker
    cls: type[DescribeClusterResponse] = response_class(60, ctx.version)
    endpoint_type: int = field(request, "endpoint_type", BROKERS)  # v1+
    if endpoint_type != BROKERS:
        return build(cls, {"error_code": ErrorCode.unsupported_endpoint_type,
                           "error_message": "The target broker only supports broker endpoints",
                           "endpoint_type": endpoint_type, "cluster_id": broker.cluster_id, "brokers": ()})
    return build(cls, {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "endpoint_type": BROKERS,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": _brokers(broker, include_fenced=bool(field(request, "include_fenced_brokers", False)),
                           listener=ctx.listener_name),  # v2+
        "cluster_authorized_operations": (cluster_authorized_operations(ctx, CLUSTER_OPERATIONS)
                                          if request.include_cluster_authorized_operations
                                          else AUTHORIZED_OPERATIONS_OMITTED),
    })


def handle_describe_cluster_on_controller(request: DescribeClusterRequest,
                                          ctx: RequestContext) -> DescribeClusterResponse:
    """Kafka: ControllerApis.handleDescribeCluster and AuthHelper.computeDescribeClusterResponse."""
    broker = ctx.broker
    cls: type[DescribeClusterResponse] = response_class(60, ctx.version)
    endpoint_type: int = field(request, "endpoint_type", BROKERS)
    base = {"throttle_time": 0, "endpoint_type": CONTROLLERS, "cluster_id": broker.cluster_id, "brokers": ()}
    denied = cluster_error(ctx, AclOperation.ALTER)
    if denied:
        return build(cls, {**base, "error_code": denied, "error_message": None})
    if endpoint_type not in (BROKERS, CONTROLLERS):
        return build(cls, {**base, "error_code": ErrorCode.invalid_request if ctx.version == 0
                           else ErrorCode.unsupported_endpoint_type,
                           "error_message": f"Unsupported endpoint type {endpoint_type}"})
    if endpoint_type != CONTROLLERS:
        return build(cls, {**base, "error_code": ErrorCode.invalid_request if ctx.version == 0
                           else ErrorCode.mismatched_endpoint_type,
                           "error_message": "The request was sent to an endpoint of type CONTROLLER, but we wanted "
                                            "an endpoint of type BROKER"})
    voters = broker.quorum.voters
    leader = broker.quorum.leader_id if not broker.quorum.is_leader else broker.node_id
    return build(cls, {
        **base, "error_code": ErrorCode.none, "error_message": None,
        "controller_id": leader if leader in voters else -1,
        "brokers": [{"broker_id": n, "host": host, "port": port, "rack": None, "is_fenced": False}
                    for n, (host, port) in _controllers(broker).items()],
        "cluster_authorized_operations": (cluster_authorized_operations(ctx, CLUSTER_OPERATIONS)
                                          if request.include_cluster_authorized_operations
                                          else AUTHORIZED_OPERATIONS_OMITTED),
    })


def _controllers(broker: Broker) -> dict[int, tuple[str, int]]:
    """The registered controllers' controller listeners (Kafka: the image's controller registrations; none in
    the moment before the active controller has written its own)."""
    registered = broker.image.controllers
    out: dict[int, tuple[str, int]] = {}
    for n in sorted(registered):
        _, _, address = registered[n].listeners.split(",")[0].partition("://")
        host, _, port = address.rpartition(":")
        out[n] = (host.strip("[]"), int(port))
    return out


def _brokers(broker: Broker, *, include_fenced: bool, listener: str | None = None) -> list[dict[str, object]]:
    if not include_fenced:
        return [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                 "is_fenced": False} for b in broker_entries(broker, listener)]
    registered = sorted(broker.image.brokers.values(), key=lambda b: b.broker_id)
    if not registered and broker.lifecycle.broker_epoch < 0:
        # before this broker's own registration lands: itself, as broker_entries says (once registered and
        # then unregistered, nothing: Kafka lists no broker then)
        return _brokers(broker, include_fenced=False, listener=listener)
    entries: list[dict[str, object]] = []
    for b in registered:
        host, port = b.host, b.port
        if listener is not None:
            host, port = endpoint_on(broker.config, broker.image, broker.node_id, listener, b.broker_id, host, port)
        entries.append({"broker_id": b.broker_id, "host": host, "port": port, "rack": b.rack, "is_fenced": b.fenced})
    return entries
