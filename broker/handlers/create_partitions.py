"""CreatePartitions (key 37), v0-v3.

Adds partitions to an existing topic (never removes); v2 is flexible; v3 is identical. The new
partitions of every topic are written as one entry; more than MAX_RECORDS_PER_USER_OP of them (or
topics) refuse the whole request with POLICY_VIOLATION, as Kafka's controller does.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import PartitionsSpec, TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=37, min_version=0, max_version=3)


async def handle_create_partitions(request: Any, ctx: RequestContext) -> Any:
    names = [t.name for t in request.topics]
    # A topic named twice gets one INVALID_REQUEST and no change, as in Kafka.
    duplicated = {n for n, times in Counter(names).items() if times > 1}  # (list.count was quadratic)
    duplicates = sorted(duplicated)
    results: list[dict[str, Any]] = [
        {"name": name, "error_code": ErrorCode.invalid_request,
         "error_message": f"Duplicate topic in request: {name}"} for name in duplicates
    ]
    specs = [PartitionsSpec(t.name, t.count,
                            [tuple(a.broker_ids) for a in t.assignments] if t.assignments is not None else None)
             for t in request.topics if t.name not in duplicated]
    try:
        pending = ctx.broker.controller.create_partitions_many(specs, validate_only=request.validate_only)
    except TooManyRecordsError as e:
        return error_response(37, ctx.version, request, e.error_code, e.message)
    results += [{"name": name, "error_code": error, "error_message": message} for name, error, message in await pending]
    return build(response_class(37, ctx.version), {"throttle_time": 0, "results": results})
