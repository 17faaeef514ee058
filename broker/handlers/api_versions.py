"""ApiVersions (key 18), v0-v5.

v1 adds throttle_time; v3 is flexible and adds client_software_name/version (KIP-511) and the
supported/finalized features tags (KIP-584: the levels of broker.metadata.features, finalized_features_epoch
the offset of the metadata image they come from, as Kafka's); an unknown version is answered with a v0 response (see
handlers.api_versions_v0_fallback).
v5 (KIP-1242) adds the cluster_id and node_id the client means to reach, both or neither (null and -1).

Kafka's ApiVersionsRequest.isValid refuses with INVALID_REQUEST (an answer with no api_keys) a v3+ request whose
software name or version is not [a-zA-Z0-9] with '-' and '.' inside, and a v5 request carrying one of cluster_id
and node_id without the other. A broker's listener (Kafka's KafkaApis) then answers REBOOTSTRAP_REQUIRED (129,
again with no api_keys) to a v5 request naming a cluster_id that is not this cluster's, or a node_id that is not
this node's; Kafka 4.4's clients then bootstrap again. Two paths skip that check, as Kafka's do: the controller
listener (ControllerApis), and the ApiVersions a SASL listener answers before authentication
(SaslServerAuthenticator).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.metadata.features import SUPPORTED
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.api_versions import v0, v1, v2, v3, v4

    from samsa.kproto.schema.api_versions import v5
    ApiVersionsRequest = (v0.ApiVersionsRequest | v1.ApiVersionsRequest | v2.ApiVersionsRequest | v3.ApiVersionsRequest
                          | v4.ApiVersionsRequest | v5.ApiVersionsRequest)
    ApiVersionsResponse = (v0.ApiVersionsResponse | v1.ApiVersionsResponse | v2.ApiVersionsResponse
                           | v3.ApiVersionsResponse | v4.ApiVersionsResponse | v5.ApiVersionsResponse)

API = ApiSpec(key=18, min_version=0, max_version=5)

# KIP-511's client software name and version (Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
NO_NODE_ID = -1

_supported: Callable[[], list[tuple[int, int, int]]] = list
_controller_supported: Callable[[], list[tuple[int, int, int]]] = list


def set_supported(broker: Callable[[], list[tuple[int, int, int]]],
                  controller: Callable[[], list[tuple[int, int, int]]] = list) -> None:
    global _supported, _controller_supported
    _supported = broker
    _controller_supported = controller


class ApiVersion(TypedDict):
    """One ApiVersion entry of the answer: an API this listener serves and its version range."""

    api_key: int
    min_version: int
    max_version: int


def api_keys(controller_plane: bool = False) -> list[ApiVersion]:
    supported = _controller_supported if controller_plane else _supported
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported()]


def request_error(request: ApiVersionsRequest, ctx: RequestContext) -> ErrorCode:
    """INVALID_REQUEST, REBOOTSTRAP_REQUIRED or NONE for this request on this listener (the module's docstring)."""
    cluster_id: str | None = field(request, "cluster_id")  # v5+
    node_id: int = field(request, "node_id", NO_NODE_ID)
    if ctx.version >= 5 and (cluster_id is None) != (node_id == NO_NODE_ID):
        return ErrorCode.invalid_request
    if ctx.version >= 3 and not (SOFTWARE_NAME_VERSION.fullmatch(field(request, "client_software_name", ""))
                                 and SOFTWARE_NAME_VERSION.fullmatch(field(request, "client_software_version", ""))):
        return ErrorCode.invalid_request
    if cluster_id is not None and not ctx.controller_plane and not ctx.sasl_authenticating \
            and (cluster_id != ctx.broker.cluster_id or node_id != ctx.broker.node_id):
        return ErrorCode.rebootstrap_required
    return ErrorCode.none


def handle_api_versions(request: ApiVersionsRequest, ctx: RequestContext) -> ApiVersionsResponse:
    cls: type[ApiVersionsResponse] = response_class(18, ctx.version)
    error = request_error(request, ctx)
    if error != ErrorCode.none:
        return build(cls, {"error_code": error, "api_keys": (), "throttle_time": 0})
    image = ctx.broker.image
    return build(
        cls,
        {
            "error_code": ErrorCode.none,
            "api_keys": api_keys(ctx.controller_plane),
            "throttle_time": 0,
            # Before v4 a supported range starting at 0 is left out (KIP-1022: older clients read a
            # min_version of 0 as an error), as Kafka does; finalized levels are listed either way.
            "supported_features": [{"name": f.name, "min_version": f.min_version, "max_version": f.max_version}
                                   for f in SUPPORTED if ctx.version >= 4 or f.min_version >= 1],
            "finalized_features_epoch": image.offset,
            "finalized_features": [{"name": name, "max_version_level": level, "min_version_level": level}
                                   for name, level in image.finalized_features().items()],
        },
    )
