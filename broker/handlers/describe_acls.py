"""DescribeAcls (key 29), v1-v3.

v1 adds pattern_type_filter (KIP-290); v2 is flexible; v3 is identical. Needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED); without an authorizer SECURITY_DISABLED. Answered from this broker's
metadata image, grouped by resource pattern as Kafka's AclApis does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import Acl, AclFilter, AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.broker.security.authorizer import authorize_cluster, enabled
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_acls import v1, v2, v3
    DescribeAclsRequest = v1.DescribeAclsRequest | v2.DescribeAclsRequest | v3.DescribeAclsRequest
    DescribeAclsResponse = v1.DescribeAclsResponse | v2.DescribeAclsResponse | v3.DescribeAclsResponse

API = ApiSpec(key=29, min_version=1, max_version=3)


def acl_filter(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
               host: str | None, operation: int, permission_type: int) -> AclFilter | str:
    """The filter a request carries, or why it is invalid (INVALID_REQUEST): an UNKNOWN or unheard-of code."""
    try:
        f = AclFilter(ResourceType(resource_type), resource_name, PatternType(pattern_type), principal, host,
                      AclOperation(operation), AclPermissionType(permission_type))
    except ValueError as e:
        return f"Invalid filter: {e}"
    unknown = f.unknown_field()
    return f"Invalid filter: unknown {unknown}" if unknown is not None else f


def handle_describe_acls(request: DescribeAclsRequest, ctx: RequestContext) -> DescribeAclsResponse:
    if not enabled(ctx):
        return _response(ctx, ErrorCode.security_disabled, "No Authorizer is configured.", [])
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _response(ctx, ErrorCode.cluster_authorization_failed, None, [])
    f = acl_filter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                   request.principal_filter, request.host_filter, request.operation, request.permission_type)
    if isinstance(f, str):
        return _response(ctx, ErrorCode.invalid_request, f, [])
    return _response(ctx, ErrorCode.none, None, [a for a in ctx.broker.image.acls.values() if f.matches(a)])


def _response(ctx: RequestContext, error: ErrorCode, message: str | None, acls: list[Acl]) -> DescribeAclsResponse:
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for a in sorted(acls, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                                         a.operation, a.permission_type)):
        by_resource.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
            {"principal": a.principal, "host": a.host, "operation": a.operation,
             "permission_type": a.permission_type})
    cls: type[DescribeAclsResponse] = response_class(29, ctx.version)
    return build(cls, {"throttle_time": 0, "error_code": error, "error_message": message, "resources": [
        {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": entries}
        for (rt, name, pt), entries in by_resource.items()]})
