"""ListGroups (key 16), v0-v5.

v1 adds throttle_time; v3 is flexible; v4 adds states_filter and group_state (KIP-518); v5 adds
types_filter and group_type (KIP-848: every Samsa group is "classic").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.state import GroupState, parse_state
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.list_groups import v0, v1, v2, v3, v4, v5
    ListGroupsRequest = (v0.ListGroupsRequest | v1.ListGroupsRequest | v2.ListGroupsRequest | v3.ListGroupsRequest
                         | v4.ListGroupsRequest | v5.ListGroupsRequest)
    ListGroupsResponse = (v0.ListGroupsResponse | v1.ListGroupsResponse | v2.ListGroupsResponse | v3.ListGroupsResponse
                          | v4.ListGroupsResponse | v5.ListGroupsResponse)

API = ApiSpec(key=16, min_version=0, max_version=5)


GROUP_TYPE = "classic"


def handle_list_groups(request: ListGroupsRequest, ctx: RequestContext) -> ListGroupsResponse:
    cls: type[ListGroupsResponse] = response_class(16, ctx.version)
    states_filter = field(request, "states_filter") or ()
    types_filter = field(request, "types_filter") or ()
    states: set[GroupState] = set()
    for name in states_filter:
        state = parse_state(name)
        if state is None:
            return build(cls, {"error_code": ErrorCode.none, "groups": []})  # unknown state: nothing matches
        states.add(state)
    if types_filter and GROUP_TYPE not in {t.strip().lower() for t in types_filter}:
        return build(cls, {"error_code": ErrorCode.none, "groups": []})
    listed = ctx.broker.groups.coordinator.list_groups(states or None)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        # KafkaApis: without DESCRIBE on the cluster, only the groups the principal may DESCRIBE
        listed = [g for g in listed if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g[0],
                                                  log_if_denied=False)]
    return build(cls, {"error_code": ErrorCode.none, "groups": [
        {"group_id": g, "protocol_type": t, "group_state": s.value, "group_type": GROUP_TYPE}
        for g, t, s in sorted(listed)]})
