"""CreatePartitions (key 37), v0-v3.

Adds partitions to an existing topic (never removes); v2 is flexible; v3 is identical.
"""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.wire import build
from kproto.messages import response_class


def handle_create_partitions(request: Any, ctx: RequestContext) -> Any:
    results = []
    for t in request.topics:
        assignments = [tuple(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
        error, message = ctx.broker.controller.create_partitions(
            t.name, t.count, assignments, validate_only=request.validate_only
        )
        results.append({"name": t.name, "error_code": error, "error_message": message})
    return build(response_class(37, ctx.version), {"throttle_time": 0, "results": results})
