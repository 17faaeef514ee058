"""DeleteTopics (key 20), v1-v6.

v4 is flexible; v5 adds error_message; v6 lets topics be named by topic_id (KIP-516). Deleting
removes the topic from metadata and its partition logs from disk (renamed, then removed).
"""

from __future__ import annotations

import uuid
from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=20, min_version=1, max_version=6)

ZERO_UUID = uuid.UUID(int=0)


async def handle_delete_topics(request: Any, ctx: RequestContext) -> Any:
    image = ctx.broker.image
    names: list[str] = []
    early: list[dict[str, Any]] = []
    if ctx.version >= 6:
        for t in request.topics:
            if t.name is not None:
                names.append(t.name)
                continue
            topic = image.topics_by_id.get(str(t.topic_id))
            if topic is None:
                early.append({"name": None, "topic_id": t.topic_id, "error_code": ErrorCode.unknown_topic_id,
                              "error_message": None})
            else:
                names.append(topic.name)
    else:
        names = list(field(request, "topic_names", ()))
    if not ctx.broker.config.get_bool("delete.topic.enable"):
        responses = [{"name": n, "error_code": ErrorCode.topic_deletion_disabled} for n in names]
    else:
        try:
            pending = ctx.broker.controller.delete_topics(names)
        except TooManyRecordsError as e:  # more topics than one operation may remove (Kafka's bound)
            return error_response(20, ctx.version, request, e.error_code, e.message)
        responses = [
            {"name": name, "topic_id": uuid.UUID(tid) if tid else ZERO_UUID, "error_code": error,
             "error_message": None}
            for name, tid, error in await pending
        ]
    return build(response_class(20, ctx.version), {"throttle_time": 0, "responses": early + responses})
