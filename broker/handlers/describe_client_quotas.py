"""DescribeClientQuotas (key 48), v0-v1 (KIP-546): the client quotas matching a filter -- none, in Samsa.

Samsa throttles no client and stores no quota (AlterClientQuotas is not offered), so every valid filter
matches nothing: entries is empty, as Kafka answers on a cluster without quotas. The filter is still checked
as Kafka's ClientQuotasImage.describe checks it, in its order and with its messages (INVALID_REQUEST, or
UNSUPPORTED_VERSION for an entity type other than user, client-id and ip), and the caller needs
DESCRIBE_CONFIGS on the cluster (KafkaApis), else CLUSTER_AUTHORIZATION_FAILED. v1 is flexible. This is what
`kafka-configs --describe --entity-type users|clients|ips` asks.
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
    from kio.schema.describe_client_quotas import v0, v1
    DescribeClientQuotasRequest = v0.DescribeClientQuotasRequest | v1.DescribeClientQuotasRequest
    DescribeClientQuotasResponse = v0.DescribeClientQuotasResponse | v1.DescribeClientQuotasResponse

API = ApiSpec(key=48, min_version=0, max_version=1)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def filter_error(request: DescribeClientQuotasRequest) -> tuple[ErrorCode, str] | None:
    """Why Kafka refuses this filter (its error and message), None if it is valid."""
    seen: set[str] = set()
    for c in request.components:
        if not c.entity_type:
            return ErrorCode.invalid_request, "Invalid empty entity type."
        if c.entity_type in seen:
            return ErrorCode.invalid_request, f"Entity type {c.entity_type} cannot appear more than once in the filter."
        if c.entity_type not in (USER, CLIENT_ID, IP):
            return ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}"
        if c.match_type == MATCH_EXACT and c.match is None:
            return ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if c.match_type == MATCH_DEFAULT and c.match is not None:
            return ErrorCode.invalid_request, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
        if c.match_type == MATCH_SPECIFIED and c.match is not None:
            return ErrorCode.invalid_request, ("Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                                               "string.")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return ErrorCode.invalid_request, f"Unknown match type {c.match_type}"
        seen.add(c.entity_type)
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        return ErrorCode.invalid_request, ("Invalid entity filter component combination. IP filter component should "
                                           "not be used with user or clientId filter component.")
    return None


def handle_describe_client_quotas(request: DescribeClientQuotasRequest,
                                  ctx: RequestContext) -> DescribeClientQuotasResponse:
    cls: type[DescribeClientQuotasResponse] = response_class(48, ctx.version)
    denied = cluster_error(ctx, AclOperation.DESCRIBE_CONFIGS)
    refused = (denied, "Cluster authorization failed.") if denied else filter_error(request)
    if refused is not None:
        return build(cls, {"throttle_time": 0, "error_code": refused[0], "error_message": refused[1],
                           "entries": None})
    # Kafka answers an empty error_message (not null) with its entries
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": "", "entries": ()})
