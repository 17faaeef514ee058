"""Requests only the active controller can carry out, forwarded there by any other broker.

Kafka's brokers forward CreateTopics, DeleteTopics, CreatePartitions and the config-changing requests
to the active controller and relay its answer (KIP-590). We do the same, over the controller's
listener, with the request as the client sent it. When no controller can be reached in time the
client gets REQUEST_TIMED_OUT, and when the controller changed under the request NOT_CONTROLLER, both
per topic or resource as each API reports errors; Kafka's clients retry both.
"""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from samsa.broker.metadata.quorum import NotControllerError
from samsa.broker.node_client import NodeUnavailableError
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import decode_response, encode_request, request_class, response_class

if TYPE_CHECKING:
    from samsa.broker.lifecycle import BrokerLifecycle

ZERO_UUID = uuid.UUID(int=0)
CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 33, 37, 44
ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 43, 45, 46
CREATE_ACLS, DELETE_ACLS = 30, 31
ENVELOPE = 58
ALTER_USER_SCRAM_CREDENTIALS = 51
UPDATE_FEATURES = 57
UNREGISTER_BROKER = 64
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 80, 81
UNREGISTER_CONTROLLER = 94
# How long a broker waits for a controller to be known / to answer (Kafka: request.timeout.ms-ish).
FORWARD_TIMEOUT_S = 10.0


class ForwardingBroker(Protocol):
    """What forwarding uses of its broker (samsa.broker.broker.Broker is one)."""

    @property
    def is_active_controller(self) -> bool: ...
    @property
    def lifecycle(self) -> BrokerLifecycle: ...


def _create_topics_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "topic_id": ZERO_UUID, "error_code": error, "error_message": message,
         "num_partitions": -1, "replication_factor": -1, "configs": ()} for t in request.topics]}


def _delete_topics_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    topics = field(request, "topics", None)
    if topics is not None:
        entries = [{"name": t.name, "topic_id": t.topic_id or ZERO_UUID} for t in topics]
    else:
        entries = [{"name": n, "topic_id": ZERO_UUID} for n in field(request, "topic_names", ())]
    return {"throttle_time": 0, "responses": [
        {**e, "error_code": error, "error_message": message} for e in entries]}


def _create_partitions_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [
        {"name": t.name, "error_code": error, "error_message": message} for t in request.topics]}


def _alter_configs_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [
        {"error_code": error, "error_message": message, "resource_type": r.resource_type,
         "resource_name": r.resource_name} for r in request.resources]}


def _elect_leaders_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "replica_election_results": [
        {"topic": t.topic, "partition_result": [
            {"partition_id": p, "error_code": error, "error_message": message} for p in t.partitions]}
        for t in request.topic_partitions or ()]}


def _alter_reassignments_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "error_message": message, "responses": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": error, "error_message": message}
            for p in t.partitions]} for t in request.topics]}


def _create_acls_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [{"error_code": error, "error_message": message} for _ in request.creations]}


def _delete_acls_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "filter_results": [
        {"error_code": error, "error_message": message, "matching_acls": ()} for _ in request.filters]}


def _list_reassignments_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "error_message": message, "topics": ()}


def _alter_scram_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return {"throttle_time": 0, "results": [{"user": u, "error_code": error, "error_message": message} for u in users]}


def _update_features_error(request: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "error_message": message, "results": ()}


ERROR_RESPONSES: dict[int, Callable[[Any, ErrorCode, str], dict[str, Any]]] = {
    CREATE_TOPICS: _create_topics_error,
    DELETE_TOPICS: _delete_topics_error,
    CREATE_PARTITIONS: _create_partitions_error,
    ALTER_CONFIGS: _alter_configs_error,
    INCREMENTAL_ALTER_CONFIGS: _alter_configs_error,
    ELECT_LEADERS: _elect_leaders_error,
    ALTER_PARTITION_REASSIGNMENTS: _alter_reassignments_error,
    LIST_PARTITION_REASSIGNMENTS: _list_reassignments_error,
    CREATE_ACLS: _create_acls_error,
    DELETE_ACLS: _delete_acls_error,
    ALTER_USER_SCRAM_CREDENTIALS: _alter_scram_error,
    UPDATE_FEATURES: _update_features_error,
    UNREGISTER_BROKER: lambda _request, error, message: {"throttle_time": 0, "error_code": error,
                                                         "error_message": message},
    # KIP-853 (Kafka's KafkaApis forwards both to the controller)
    ADD_RAFT_VOTER: lambda _request, error, message: {"throttle_time": 0, "error_code": error,
                                                      "error_message": message},
    REMOVE_RAFT_VOTER: lambda _request, error, message: {"throttle_time": 0, "error_code": error,
                                                         "error_message": message},
    UNREGISTER_CONTROLLER: lambda _request, error, message: {"throttle_time": 0, "error_code": error,
                                                             "error_message": message},
}
FORWARDED_APIS = frozenset(ERROR_RESPONSES)


def error_response(api_key: int, version: int, request: Any, error: ErrorCode, message: str) -> Any:
    return build(response_class(api_key, version), ERROR_RESPONSES[api_key](request, error, message))


def _not_controller(response: Any) -> bool:
    """The controller we reached had lost its leadership: ask the new one (the client would anyway)."""
    if getattr(response, "error_code", None) == ErrorCode.not_controller:
        return True  # APIs with a top-level error code (ElectLeaders v1+, the reassignment APIs)
    for name in ("topics", "responses", "results"):
        for entry in getattr(response, name, None) or ():
            if getattr(entry, "error_code", None) == ErrorCode.not_controller:
                return True
    return False


def pack_host(host: str) -> bytes:
    """An address as Envelope's client_host_address carries it: the IP's packed bytes."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return host.encode()


def unpack_host(data: bytes) -> str:
    if len(data) in (4, 16):
        return str(ipaddress.ip_address(data))
    return data.decode(errors="replace")


def _enveloped(api_key: int, version: int, request: Any, principal: str, client_host: str) -> Any:
    """The request wrapped with its client's principal and address (broker.handlers.envelope)."""
    frame = encode_request(request, correlation_id=0, client_id="forwarded")
    return build(request_class(ENVELOPE, 0), {"request_data": frame[4:], "request_principal": principal.encode(),
                                              "client_host_address": pack_host(client_host)})


def _unwrapped(api_key: int, version: int, request: Any, response: Any) -> Any:
    if response.error_code != ErrorCode.none or response.response_data is None:
        return error_response(api_key, version, request, response.error_code,
                              f"The controller refused the forwarded request: {response.error_code.name}")
    return decode_response(api_key, version, response.response_data)[1]


async def forward(broker: ForwardingBroker, api_key: int, version: int, request: Any,
                  principal: str | None = None, client_host: str = "") -> Any:
    """Send `request` to the active controller and return its response (or an error response). With a
    `principal` (the authorizer is on) it goes in an Envelope, so the controller authorizes its client."""
    deadline = asyncio.get_running_loop().time() + FORWARD_TIMEOUT_S
    last = "no active controller is known"
    while True:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return error_response(api_key, version, request, ErrorCode.request_timed_out,
                                  f"The controller could not be reached in time: {last}")
        if broker.is_active_controller:
            return None  # leadership came here meanwhile: the caller handles it locally
        try:
            if principal is None:
                response = await broker.lifecycle.channel.forward(request, timeout_s=remaining)
            else:
                wrapped = await broker.lifecycle.channel.forward(
                    _enveloped(api_key, version, request, principal, client_host), timeout_s=remaining)
                response = _unwrapped(api_key, version, request, wrapped)
            if not _not_controller(response):
                return response
            last = "the controller we asked is no longer active"
        except (NotControllerError, NodeUnavailableError) as e:
            last = str(e)
        except TimeoutError:
            last = "the controller did not answer"
            continue
        await asyncio.sleep(min(0.1, max(0.0, deadline - asyncio.get_running_loop().time())))
