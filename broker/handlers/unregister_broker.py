"""UnregisterBroker (key 64), v0 (KIP-631): remove a broker's registration (kafka-cluster unregister --id N).

Needs ALTER on the cluster; forwarded to the active controller (KIP-590) like the other metadata writes. As in
Kafka's controller, any registered broker can be unregistered, fenced or not: its leadership and ISR membership
move off it as when it is fenced, then an UnregisterBrokerRecord removes it, so Metadata and DescribeCluster stop
listing it (partitions keep it among their replicas). A broker still running stays unregistered until it
restarts, as Kafka's: its heartbeats get STALE_BROKER_EPOCH and it never registers again meanwhile
(broker.lifecycle). An id without a registration answers BROKER_ID_NOT_REGISTERED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.unregister_broker.v0 import UnregisterBrokerRequest, UnregisterBrokerResponse

API = ApiSpec(key=64, min_version=0, max_version=0)


async def handle_unregister_broker(request: UnregisterBrokerRequest, ctx: RequestContext
                                   ) -> UnregisterBrokerResponse:
    cls: type[UnregisterBrokerResponse] = response_class(64, ctx.version)
    denied = cluster_error(ctx, AclOperation.ALTER)
    if denied:
        return build(cls, {"throttle_time": 0, "error_code": denied, "error_message": None})
    error, pending = ctx.broker.controller.unregister_broker(int(request.broker_id))
    if pending is not None:
        await pending
    message = (f"Broker ID {request.broker_id} is not currently registered"
               if error == ErrorCode.broker_id_not_registered else None)
    return build(cls, {"throttle_time": 0, "error_code": error, "error_message": message})
