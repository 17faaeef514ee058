"""ListGroups (key 16), v0-v5.

v1 adds throttle_time; v3 is flexible; v4 adds states_filter and group_state (KIP-518); v5 adds
types_filter and group_type (KIP-848: "classic", or "consumer" for a group of the consumer protocol).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
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


CLASSIC = "classic"
CONSUMER = "consumer"  # a KIP-848 consumer group (protocol type "consumer" too)
STREAMS = "streams"  # a KIP-1071 streams group (protocol type "streams" too)


def handle_list_groups(request: ListGroupsRequest, ctx: RequestContext) -> ListGroupsResponse:
    cls: type[ListGroupsResponse] = response_class(16, ctx.version)
    states = {name.strip().lower() for name in field(request, "states_filter") or ()}
    types = {t.strip().lower() for t in field(request, "types_filter") or ()}
    groups = ctx.broker.groups
    consumer = groups.consumer.list_groups()
    streams = groups.streams.list_groups()
    modern_ids = {g for g, _ in consumer} | {g for g, _ in streams}
    listed = [(g, t, s.value, CLASSIC) for g, t, s in groups.coordinator.list_groups() if g not in modern_ids]
    listed += [(g, CONSUMER, s.value, CONSUMER) for g, s in consumer]
    listed += [(g, STREAMS, s.value, STREAMS) for g, s in streams]
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        # KafkaApis: without DESCRIBE on the cluster, only the groups the principal may DESCRIBE
        listed = [g for g in listed if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g[0],
                                                  log_if_denied=False)]
    return build(cls, {"error_code": ErrorCode.none, "groups": [
        {"group_id": g, "protocol_type": t, "group_state": s, "group_type": kind}
        for g, t, s, kind in sorted(listed)
        if (not states or s.lower() in states) and (not types or kind in types)]})
