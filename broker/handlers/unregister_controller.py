"""UnregisterController (key 94), v0 (Kafka 4.4): remove a controller's registration (KIP-919), what
`kafka-cluster.sh unregister-controller --id N` and `kafka-metadata-quorum.sh remove-controller --unregister` send.

Served on the broker listener (forwarded to the active controller, as Kafka's KafkaApis forwards it) and on the
controller listener (Kafka's ControllerApis). Needs ALTER on the cluster. The active controller cannot unregister
itself (INVALID_REQUEST), an id without a registration answers CONTROLLER_ID_NOT_REGISTERED (136), a
metadata.version before 4.4-IV2 UNSUPPORTED_VERSION; otherwise an UnregisterControllerRecord removes the
registration and DescribeCluster on the controller listener stops listing it (a running controller registers
again, as Kafka's does: broker.controller_registrations). The voter set is not changed (RemoveRaftVoter does that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from samsa.kproto.schema.unregister_controller.v0 import (
        UnregisterControllerRequest,
        UnregisterControllerResponse,
    )

API = ApiSpec(key=94, min_version=0, max_version=0)


async def handle_unregister_controller(request: UnregisterControllerRequest, ctx: RequestContext
                                       ) -> UnregisterControllerResponse:
    cls: type[UnregisterControllerResponse] = response_class(94, ctx.version)
    denied = cluster_error(ctx, AclOperation.ALTER)
    if denied:
        return build(cls, {"throttle_time": 0, "error_code": denied, "error_message": None})
    error, message, pending = ctx.broker.controller.registrations.unregister_controller(int(request.controller_id))
    if pending is not None:
        await pending
    return build(cls, {"throttle_time": 0, "error_code": error, "error_message": message})
