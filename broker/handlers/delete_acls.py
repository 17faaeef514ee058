"""DeleteAcls (key 31), v1-v3.

v1 adds pattern_type_filter (KIP-290); v2 is flexible; v3 is identical. Needs ALTER on the cluster;
without an authorizer every filter is SECURITY_DISABLED. Each filter answers the ACLs it removed.
Forwarded to the active controller (KIP-590).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.handlers.describe_acls import acl_filter
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_control import AclDeletionResult
from samsa.broker.security.authorizer import authorize_cluster, enabled
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.delete_acls import v1, v2, v3
    DeleteAclsRequest = v1.DeleteAclsRequest | v2.DeleteAclsRequest | v3.DeleteAclsRequest
    DeleteAclsResponse = v1.DeleteAclsResponse | v2.DeleteAclsResponse | v3.DeleteAclsResponse

API = ApiSpec(key=31, min_version=1, max_version=3)


async def handle_delete_acls(request: DeleteAclsRequest, ctx: RequestContext) -> DeleteAclsResponse:
    count = len(request.filters)
    if not enabled(ctx):
        return _response(ctx, [AclDeletionResult(ErrorCode.security_disabled, "No Authorizer is configured.")] * count)
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _response(ctx, [AclDeletionResult(ErrorCode.cluster_authorization_failed, None)] * count)
    filters = [acl_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                          f.host_filter, f.operation, f.permission_type) for f in request.filters]
    try:
        pending = ctx.broker.controller.acls.delete_acls(filters)
    except TooManyRecordsError as e:  # more than one controller operation may write (Kafka's bound)
        return _response(ctx, [AclDeletionResult(e.error_code, e.message)] * count)
    return _response(ctx, await pending)


def _response(ctx: RequestContext, results: list[AclDeletionResult]) -> DeleteAclsResponse:
    cls: type[DeleteAclsResponse] = response_class(31, ctx.version)
    out: list[dict[str, Any]] = []
    for r in results:
        out.append({"error_code": r.error, "error_message": r.message, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": a.resource_type,
             "resource_name": a.resource_name, "pattern_type": a.pattern_type, "principal": a.principal,
             "host": a.host, "operation": a.operation, "permission_type": a.permission_type}
            for a in r.deleted]})
    return build(cls, {"throttle_time": 0, "filter_results": out})
