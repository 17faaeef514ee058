"""CreateAcls (key 30), v1-v3.

v1 adds resource_pattern_type (KIP-290, prefixed ACLs); v2 is flexible; v3 is identical. Needs ALTER on
the cluster; without an authorizer every creation is SECURITY_DISABLED. Forwarded to the active
controller (KIP-590), which writes the new ACLs as one metadata entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.security.acl import Acl, AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.broker.security.acl_control import AclCreationResult
from samsa.broker.security.authorizer import authorize_cluster, enabled
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.create_acls import v1, v2, v3
    CreateAclsRequest = v1.CreateAclsRequest | v2.CreateAclsRequest | v3.CreateAclsRequest
    CreateAclsResponse = v1.CreateAclsResponse | v2.CreateAclsResponse | v3.CreateAclsResponse
    AclCreation = v1.request.AclCreation | v2.request.AclCreation | v3.request.AclCreation

API = ApiSpec(key=30, min_version=1, max_version=3)

NO_AUTHORIZER = "No Authorizer is configured."


def _acl(c: AclCreation) -> Acl | str:
    """The ACL a creation asks for, or why it is invalid (a code Kafka does not know)."""
    try:
        return Acl(ResourceType(c.resource_type), c.resource_name, PatternType(c.resource_pattern_type),
                   c.principal, c.host, AclOperation(c.operation), AclPermissionType(c.permission_type))
    except ValueError as e:
        return f"Invalid ACL: {e}"


async def handle_create_acls(request: CreateAclsRequest, ctx: RequestContext) -> CreateAclsResponse:
    if not enabled(ctx):
        return _response(ctx, [AclCreationResult(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(request.creations))
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _response(ctx, [AclCreationResult(ErrorCode.cluster_authorization_failed, None)]
                         * len(request.creations))
    try:
        pending = ctx.broker.controller.acls.create_acls([_acl(c) for c in request.creations])
    except TooManyRecordsError as e:  # more than one controller operation may write (Kafka's bound)
        return _response(ctx, [AclCreationResult(e.error_code, e.message)] * len(request.creations))
    return _response(ctx, await pending)


def _response(ctx: RequestContext, results: list[AclCreationResult]) -> CreateAclsResponse:
    cls: type[CreateAclsResponse] = response_class(30, ctx.version)
    return build(cls, {"throttle_time": 0, "results": [
        {"error_code": r.error, "error_message": r.message} for r in results]})
