"""DeleteTopics (key 20), v1-v6.

v4 is flexible; v5 adds error_message; v6 lets topics be named by topic_id (KIP-516). Deleting
removes the topic from metadata and its partition logs from disk (renamed, then removed).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.security.acl_requests import delete_topics_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.delete_topics import v1, v2, v3, v4, v5, v6
    DeleteTopicsRequest = (v1.DeleteTopicsRequest | v2.DeleteTopicsRequest | v3.DeleteTopicsRequest
                           | v4.DeleteTopicsRequest | v5.DeleteTopicsRequest | v6.DeleteTopicsRequest)
    DeleteTopicsResponse = (v1.DeleteTopicsResponse | v2.DeleteTopicsResponse | v3.DeleteTopicsResponse
                            | v4.DeleteTopicsResponse | v5.DeleteTopicsResponse | v6.DeleteTopicsResponse)

API = ApiSpec(key=20, min_version=1, max_version=6)


ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """One topic's answer (a DeletableTopicResult before it is built for the version; topic_id None is
    the null a v6 result has when it is not known, as an omitted field builds)."""

    name: str | None
    error: ErrorCode
    topic_id: uuid.UUID | None = None


async def handle_delete_topics(request: DeleteTopicsRequest, ctx: RequestContext) -> DeleteTopicsResponse:
    image = ctx.broker.image
    names: list[str] = []
    early: list[TopicDeletion] = []
    # ControllerApis.deleteTopics: DELETE on the cluster or the topic; a topic named but not DESCRIBE-able
    # is TOPIC_AUTHORIZATION_FAILED whether or not it exists (one named by id keeps its id: ids are not secret).
    auth = delete_topics_authorization(ctx)

    def by_name(name: str) -> None:
        if not auth.describable(name) or (name in image.topics_by_name and not auth.deletable(name)):
            early.append(TopicDeletion(name, ErrorCode.topic_authorization_failed, topic_id=ZERO_UUID))
        else:
            names.append(name)

    if ctx.version >= 6:  # v6 names topics by name or id (the request was decoded with this version's class)
        for t in cast("v6.DeleteTopicsRequest", request).topics:
            if t.name is not None:
                by_name(t.name)
                continue
            topic = image.topics_by_id.get(str(t.topic_id))
            if topic is None:
                early.append(TopicDeletion(None, ErrorCode.unknown_topic_id, topic_id=t.topic_id))
            elif not auth.deletable(topic.name):
                early.append(TopicDeletion(topic.name if auth.describable(topic.name) else None,
                                           ErrorCode.topic_authorization_failed, topic_id=t.topic_id))
            else:
                names.append(topic.name)
    else:
        for name in cast("v1.DeleteTopicsRequest | v2.DeleteTopicsRequest | v3.DeleteTopicsRequest"
                         " | v4.DeleteTopicsRequest | v5.DeleteTopicsRequest", request).topic_names:
            by_name(name)
    if not ctx.broker.config.get_bool("delete.topic.enable"):
        responses = [TopicDeletion(n, ErrorCode.topic_deletion_disabled) for n in names]
    else:
        try:
            pending = ctx.broker.controller.delete_topics(names)
        except TooManyRecordsError as e:  # more topics than one operation may remove (Kafka's bound)
            refused: DeleteTopicsResponse = error_response(20, ctx.version, request, e.error_code, e.message)
            return refused
        responses = [TopicDeletion(name, error, topic_id=uuid.UUID(tid) if tid else ZERO_UUID)
                     for name, tid, error in await pending]
    return _response(ctx, early + responses)


def _response(ctx: RequestContext, results: list[TopicDeletion]) -> DeleteTopicsResponse:
    """The one place the answers become the kio response of the request's version (error_message is
    always null, topic_id is only in v6)."""
    cls: type[DeleteTopicsResponse] = response_class(20, ctx.version)
    return build(cls, {"throttle_time": 0, "responses": [
        {"name": r.name, "topic_id": r.topic_id, "error_code": r.error, "error_message": None} for r in results]})
