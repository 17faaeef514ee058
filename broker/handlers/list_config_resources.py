"""ListConfigResources (key 74), v0-v1 (KIP-1142; v0 was ListClientMetricsResources, KIP-714).

v0 lists the client-metrics resources only (names, no type). v1 adds resource_types to the request and
resource_type to each answer: the types asked for, or when none are, every type the API supports (GROUP,
CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC); a type outside those fails the whole request with
UNSUPPORTED_VERSION, as in Kafka. Groups and client-metrics resources are listed when they have a dynamic
config; BROKER and BROKER_LOGGER name each registered broker (fenced too); TOPIC every topic. Kafka's order: groups,
client metrics, broker loggers, brokers, topics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.metadata import broker_entries
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.list_config_resources import v0, v1
    ListConfigResourcesRequest = v0.ListConfigResourcesRequest | v1.ListConfigResourcesRequest
    ListConfigResourcesResponse = v0.ListConfigResourcesResponse | v1.ListConfigResourcesResponse

API = ApiSpec(key=74, min_version=0, max_version=1)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# In the order Kafka lists them.
SUPPORTED_V1 = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


class ConfigResource(TypedDict):
    resource_name: str
    resource_type: int


def handle_list_config_resources(request: ListConfigResourcesRequest,
                                 ctx: RequestContext) -> ListConfigResourcesResponse:
    cls: type[ListConfigResourcesResponse] = response_class(74, ctx.version)
    supported = SUPPORTED_V1 if ctx.version >= 1 else (CLIENT_METRICS,)
    asked = {int(t) for t in field(request, "resource_types", ())} or set(supported)
    if not asked <= set(supported):
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.unsupported_version, "config_resources": ()})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none,
                       "config_resources": [r for t in supported if t in asked for r in _resources(ctx, t)]})


def _resources(ctx: RequestContext, resource_type: int) -> list[ConfigResource]:
    image = ctx.broker.image
    if resource_type in (GROUP, CLIENT_METRICS):
        names = sorted(name for (kind, name), values in image.configs.items() if kind == resource_type and values)
    elif resource_type in (BROKER, BROKER_LOGGER):
        # Every registered broker, fenced ones too (Kafka's getBrokerNodes); this one before it registers.
        names = [str(i) for i in sorted(image.brokers)] or [str(b["node_id"]) for b in broker_entries(ctx.broker)]
    else:
        names = list(image.topics_by_name)
    return [{"resource_name": name, "resource_type": resource_type} for name in names]
