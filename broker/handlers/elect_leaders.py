"""ElectLeaders (key 43), v0-v2: kafka-leader-election.sh.

v0 elects preferred leaders only; v1 adds election_type (KIP-460: 0 preferred, 1 unclean) and a
top-level error_code; v2 is the first flexible version. A null topic_partitions means every
partition, and then the answer leaves out partitions that need no election (as Kafka does).
Controller-only: other brokers forward it to the active controller (broker.forwarding); the election
itself is broker.reassignment's.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.reassignment import ElectionType
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=43, min_version=0, max_version=2)


async def handle_elect_leaders(request: Any, ctx: RequestContext) -> Any:
    cls = response_class(43, ctx.version)
    raw_type = int(field(request, "election_type", ElectionType.PREFERRED))
    requested = request.topic_partitions
    if raw_type not in tuple(ElectionType):
        message = f"Unknown election type {raw_type}"
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "replica_election_results": [
            {"topic": t.topic, "partition_result": [
                {"partition_id": p, "error_code": ErrorCode.invalid_request, "error_message": message}
                for p in t.partitions]} for t in requested or ()]})
    partitions = None if requested is None else [(str(t.topic), [int(p) for p in t.partitions]) for t in requested]
    try:
        pending = ctx.broker.controller.reassignments.elect_leaders(ElectionType(raw_type), partitions)
    except TooManyRecordsError as e:  # more elections than one operation may write (Kafka's bound)
        return error_response(43, ctx.version, request, e.error_code, e.message)
    results = await pending
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": [
        {"topic": r.topic, "partition_result": [
            {"partition_id": p.partition_id, "error_code": p.error_code, "error_message": p.error_message}
            for p in r.partitions]} for r in results]})
