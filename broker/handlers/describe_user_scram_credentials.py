"""DescribeUserScramCredentials (key 50), v0 (KIP-554): each user's SCRAM mechanisms and iteration counts.

Only the mechanism and iterations are told, never the salt or keys. users null or empty lists every
user with a credential; a named user without one is RESOURCE_NOT_FOUND, a user named twice
DUPLICATE_RESOURCE (Kafka's ScramControlManager.describeScramCredentials messages).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials.v0 import (
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    )

API = ApiSpec(key=50, min_version=0, max_version=0)


def handle_describe_user_scram_credentials(request: DescribeUserScramCredentialsRequest, ctx: RequestContext
                                           ) -> DescribeUserScramCredentialsResponse:
    cls: type[DescribeUserScramCredentialsResponse] = response_class(50, ctx.version)
    denied = cluster_error(ctx, AclOperation.DESCRIBE)  # KafkaApis: DESCRIBE on the cluster
    if denied:  # Kafka's error response: the error at the top and once per user asked about, names left out
        message = "Cluster authorization failed."
        return build(cls, {"throttle_time": 0, "error_code": denied, "error_message": message, "results": [
            {"user": "", "error_code": denied, "error_message": message, "credential_infos": ()}
            for _ in request.users or ()]})
    credentials = ctx.broker.image.scram_credentials
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mechanism), record in sorted(credentials.items()):
        by_user.setdefault(user, []).append({"mechanism": mechanism, "iterations": record.iterations})
    results: list[dict[str, Any]] = []
    if not request.users:
        results = [_found(user, infos) for user, infos in sorted(by_user.items())]
    else:
        counts = Counter(u.name for u in request.users)
        for name in dict.fromkeys(u.name for u in request.users):
            if counts[name] > 1:
                results.append(_error(name, ErrorCode.duplicate_resource,
                                      f"Cannot describe SCRAM credentials for the same user twice in a single "
                                      f"request: {name}"))
            elif name not in by_user:
                results.append(_error(name, ErrorCode.resource_not_found,
                                      f"Attempt to describe a user credential that does not exist: {name}"))
            else:
                results.append(_found(name, by_user[name]))
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results})


def _found(user: str, infos: list[dict[str, int]]) -> dict[str, Any]:
    return {"user": user, "error_code": ErrorCode.none, "error_message": None, "credential_infos": infos}


def _error(user: str, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"user": user, "error_code": error, "error_message": message, "credential_infos": ()}
