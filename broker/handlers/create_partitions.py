"""CreatePartitions (key 37), v0-v3.

Adds partitions to an existing topic (never removes); v2 is flexible; v3 is identical. The new
partitions of every topic are written as one entry; more than MAX_RECORDS_PER_USER_OP of them (or
topics) refuse the whole request with POLICY_VIOLATION, as Kafka's controller does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import PartitionsSpec, TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import topic_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.create_partitions import v0, v1, v2, v3
    CreatePartitionsRequest = (v0.CreatePartitionsRequest | v1.CreatePartitionsRequest | v2.CreatePartitionsRequest
                               | v3.CreatePartitionsRequest)
    CreatePartitionsResponse = (v0.CreatePartitionsResponse | v1.CreatePartitionsResponse
                                | v2.CreatePartitionsResponse | v3.CreatePartitionsResponse)

API = ApiSpec(key=37, min_version=0, max_version=3)



@dataclass(frozen=True, slots=True)
class TopicResult:
    """One topic's answer (a CreatePartitionsTopicResult before it is built for the version)."""

    name: str
    error: ErrorCode
    error_message: str | None


async def handle_create_partitions(request: CreatePartitionsRequest, ctx: RequestContext) -> CreatePartitionsResponse:
    names = [t.name for t in request.topics]
    # A topic named twice gets one INVALID_REQUEST and no change, as in Kafka.
    duplicated = {n for n, times in Counter(names).items() if times > 1}  # (list.count was quadratic)
    duplicates = sorted(duplicated)
    results = [TopicResult(name, ErrorCode.invalid_request, f"Duplicate topic in request: {name}")
               for name in duplicates]
    alterable = topic_authorization(ctx, AclOperation.ALTER)  # ControllerApis: ALTER on each topic
    denied = [n for n in dict.fromkeys(names) if n not in duplicated and not alterable(n)]
    results += [TopicResult(name, ErrorCode.topic_authorization_failed, None) for name in denied]
    duplicated.update(denied)
    specs = [PartitionsSpec(t.name, t.count,
                            [tuple(a.broker_ids) for a in t.assignments] if t.assignments is not None else None)
             for t in request.topics if t.name not in duplicated]
    try:
        pending = ctx.broker.controller.create_partitions_many(specs, validate_only=request.validate_only)
    except TooManyRecordsError as e:
        refused: CreatePartitionsResponse = error_response(37, ctx.version, request, e.error_code, e.message)
        return refused
    results += [TopicResult(name, error, message) for name, error, message in await pending]
    return _response(ctx, results)


def _response(ctx: RequestContext, results: list[TopicResult]) -> CreatePartitionsResponse:
    """The one place the answers become the kio response of the request's version."""
    cls: type[CreatePartitionsResponse] = response_class(37, ctx.version)
    return build(cls, {"throttle_time": 0, "results": [
        {"name": r.name, "error_code": r.error, "error_message": r.error_message} for r in results]})
