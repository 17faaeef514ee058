"""What a handler's answer says, counted once it is there: error codes per API (Kafka's RequestMetrics
ErrorsPerSec), a consumer Fetch's bytes out per topic and a follower's replication bytes out
(BrokerTopicStats.updateBytesOut), and every error code of a response for the request log.

Produce counts its own (broker/handlers/produce.py: it knows each partition's outcome before the response is
built); Fetch is read back from its response because that is the response sent: after a long poll only the
final read goes out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from samsa.broker.observability.request_metrics import RequestMetrics

PRODUCE_KEY = 0
FETCH_KEY = 1


def count_top_level_error(metrics: RequestMetrics, api_key: int, response: Any) -> None:
    """ErrorsPerSec of an API whose response has one top-level error code (none counted otherwise)."""
    code = getattr(response, "error_code", None)
    if code is not None:
        metrics.count_error(api_key, int(code))


def fetch_replica_id(request: Any) -> int:
    """The fetching replica's id (v15+ in replica_state), -1 for a consumer."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


def observe_fetch(metrics: RequestMetrics, request: Any, response: Any, topics_by_id: Mapping[str, Any]) -> None:
    """ErrorsPerSec per partition (and a top-level error), bytes out per topic or replication bytes out."""
    top = int(getattr(response, "error_code", 0))  # v7+ (fetch sessions); v4-v6 have none
    if top:
        metrics.count_error(FETCH_KEY, top)
    topics = metrics.topics
    if fetch_replica_id(request) >= 0:
        # A follower's fetch: ReplicationBytesOutPerSec only (Kafka leaves it out of BytesOutPerSec and of
        # the per-topic request counts).
        for t in response.responses:
            for p in t.partitions:
                metrics.count_error(FETCH_KEY, int(p.error_code))
                records = p.records
                if records:
                    topics.replication_bytes_out += len(records)
        return
    for t in response.responses:
        name = getattr(t, "topic", None)
        if name is None:
            found = topics_by_id.get(str(t.topic_id))
            name = found.name if found is not None else str(t.topic_id)
        for p in t.partitions:
            code = int(p.error_code)
            metrics.count_error(FETCH_KEY, code)
            records = p.records
            topics.record_fetch(name, code != 0, len(records) if records else 0)


def error_codes(response: Any) -> Iterator[int]:
    """Every error_code field of a kio response, depth first (for the request log, not the request path)."""
    if not dataclasses.is_dataclass(response) or isinstance(response, type):
        return
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if f.name == "error_code" and value is not None:
            yield int(value)
        elif isinstance(value, tuple):
            for item in value:
                yield from error_codes(item)
        elif dataclasses.is_dataclass(value):
            yield from error_codes(value)
