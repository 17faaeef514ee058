"""The request log (samsa.request.log.enable, off by default; dynamic): one INFO line per answered request on
logger "samsa.request", as Kafka's kafka.request.logger writes "Completed request" lines.

A line: API name and version, correlation id, client id, principal (the authenticated one, else User:ANONYMOUS),
the connection's address and listener, the total time in ms (decode to response, as TotalTimeMs) and the
error codes of the response, each with how many times it occurs (partitions of a Produce or Fetch), or "-"
for a request without a response (acks=0).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from samsa.broker.observability.response_metrics import error_codes
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import API_NAMES, RequestHeader

REQUEST_LOG_KEY = "samsa.request.log.enable"
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"  # Kafka's principal of an unauthenticated connection

request_logger = logging.getLogger("samsa.request")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def errors_text(response: Any) -> str:
    """"NONE", "NONE:2,NOT_LEADER_OR_FOLLOWER:1", or "-" without a response."""
    if response is None:
        return "-"
    counts = Counter(error_codes(response))
    if not counts:
        return "NONE"
    return ",".join(_error_name(code) if n == 1 and len(counts) == 1 else f"{_error_name(code)}:{n}"
                    for code, n in sorted(counts.items()))


def log_request(header: RequestHeader, connection: str, listener: str, seconds: float, response: Any,
                principal: str = ANONYMOUS_PRINCIPAL) -> None:
    api = "".join(part.capitalize() for part in API_NAMES.get(header.api_key, str(header.api_key)).split("_"))
    request_logger.info(
        "Completed request api=%s version=%d correlation_id=%d client_id=\"%s\" principal=%s connection=%s "
        "listener=%s latency_ms=%.3f errors=%s", api, header.api_version, header.correlation_id,
        header.client_id if header.client_id is not None else "-", principal, connection, listener,
        seconds * 1000, errors_text(response))
