"""Differential scenarios of Kafka 4.4's newest versions of two old APIs.

``api_versions_v5``: ApiVersions v5 (KIP-1242), the client naming the cluster and node it means to reach: neither,
this broker's own, another cluster's or node's (REBOOTSTRAP_REQUIRED), only one of the two (INVALID_REQUEST), and
KIP-511's software name and version pattern at v3-v5 (INVALID_REQUEST). Each broker's own cluster id comes from
its Metadata (both fixtures are node 1). A refusal's whole answer is compared byte for byte, on a fresh
connection; the connection that was refused still serves afterwards.

``delete_groups_v3``: DeleteGroups v3 (a message per group): an Empty group, a group with a member, an unknown
group, an empty group id, a group named twice; the messages are compared as text (``message``, which
normalize.py does not treat as free text: Kafka 4.4 sends null for every one of these).

``api_versions_v5_sasl`` (run by test_acl_matrix.py, whose brokers have a SASL_PLAINTEXT listener): the same
questions before and after a SASL PLAIN authentication."""

from __future__ import annotations

import socket
import struct
from typing import Any

from differential.framework import Ctx, err, jsonable, scenario
from differential.scenarios import _raw, subscription
from samsa.broker.wire import build
from samsa.kproto.messages import decode_response, encode_request, request_class

SOFTWARE = {"client_software_name": "samsa-differential", "client_software_version": "1"}
OTHER_CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"


def _summary(r: Any) -> dict[str, Any]:
    """What a client reads from an answer: the error, and (when answered) ApiVersions' and DeleteGroups' ranges
    and whether features are listed. Other ranges differ by design (README's compatibility table)."""
    ranges = {k.api_key: [k.min_version, k.max_version] for k in r.api_keys}
    return {"error": err(r), "api_keys": len(ranges) if not ranges else "listed",
            "api_versions": ranges.get(18), "delete_groups": ranges.get(42),
            "supported_features": bool(r.supported_features) if hasattr(r, "supported_features") else None,
            "finalized_features_epoch_known": getattr(r, "finalized_features_epoch", -1) >= 0}


@scenario
def api_versions_v5(ctx: Ctx) -> Any:
    c = ctx.connect()
    metadata = c.request(3, {"topics": [], "allow_auto_topic_creation": False}, version=12)
    cluster_id, node_id = metadata.cluster_id, metadata.controller_id
    out: dict[str, Any] = {"node_id": node_id}
    cases: dict[str, tuple[int, dict[str, Any]]] = {
        "v5_neither": (5, {**SOFTWARE, "cluster_id": None, "node_id": -1}),
        "v5_this_cluster_this_node": (5, {**SOFTWARE, "cluster_id": cluster_id, "node_id": node_id}),
        "v5_other_cluster": (5, {**SOFTWARE, "cluster_id": OTHER_CLUSTER, "node_id": node_id}),
        "v5_other_node": (5, {**SOFTWARE, "cluster_id": cluster_id, "node_id": node_id + 1}),
        "v5_other_both": (5, {**SOFTWARE, "cluster_id": OTHER_CLUSTER, "node_id": 99}),
        "v5_empty_cluster_id": (5, {**SOFTWARE, "cluster_id": "", "node_id": node_id}),
        "v5_cluster_without_node": (5, {**SOFTWARE, "cluster_id": cluster_id, "node_id": -1}),
        "v5_node_without_cluster": (5, {**SOFTWARE, "cluster_id": None, "node_id": node_id}),
        "v5_other_node_bad_name": (5, {"client_software_name": "bad name", "client_software_version": "1",
                                       "cluster_id": OTHER_CLUSTER, "node_id": node_id}),
        "v4_empty_name": (4, {"client_software_name": "", "client_software_version": "1"}),
        "v3_bad_version": (3, {"client_software_name": "ok", "client_software_version": "1.0 beta"}),
        "v3_dot_inside": (3, {"client_software_name": "a.b-c", "client_software_version": "4.4.0-rc1"}),
        "v3_trailing_dash": (3, {"client_software_name": "abc-", "client_software_version": "1"}),
        "v2": (2, {}),
    }
    for name, (version, values) in cases.items():
        r = c.request(18, values, version=version)
        out[name] = _summary(r)
        if r.error_code.value != 0:  # the refusal's bytes, on a fresh connection
            frame = encode_request(build(request_class(18, version), values), correlation_id=5, client_id="diff")
            answer = _raw(ctx, frame)
            out[f"{name}_bytes"] = answer if isinstance(answer, str) else answer.hex()
    after = c.request(3, {"topics": [], "allow_auto_topic_creation": False}, version=12)
    out["after_refusals"] = [b.node_id for b in after.brokers]
    # An ApiVersions version newer than Kafka 4.4's: the v0 answer names ApiVersions' own range (KIP-511).
    payload = struct.pack(">hhi", 18, 6, 9) + struct.pack(">h", 4) + b"diff" + b"\x00\x00\x00"
    answer = _raw(ctx, struct.pack(">i", len(payload)) + payload)
    out["v6_bytes"] = answer if isinstance(answer, str) else answer.hex()
    return out


def _delete(c: Any, names: list[str], version: int) -> list[Any]:
    r = c.request(42, {"groups_names": names}, version=version)
    return sorted([x.group_id, err(x), getattr(x, "error_message", "(no field)")] for x in r.results)


@scenario
def delete_groups_v3(ctx: Ctx) -> Any:
    c = ctx.connect(client_id="diff-member")
    t = ctx.topic()
    idle, busy, gone = ctx.topic("idle"), ctx.topic("busy"), ctx.topic("nogroup")
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    for group in (idle, busy):
        out[f"coordinator_{group}"] = ctx.find_coordinator(c, group, 0)["error"]
    r = c.request(8, {"group_id": idle, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                      "retention_time_ms": -1, "topics": [{"name": t, "partitions": [
                          {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                           "committed_metadata": ""}]}]}, version=8)
    out["commit_idle"] = err(r.topics[0].partitions[0])
    join = {"group_id": busy, "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(t)}], "reason": None}
    first = c.request(11, join, version=7)
    second = c.request(11, {**join, "member_id": first.member_id}, version=7)
    out["join_busy"] = [err(first), err(second)]
    out["v3"] = [[g, e, {"message": m}] for g, e, m in _delete(c, [idle, busy, gone, "", idle], 3)]
    out["v3_again"] = [[g, e, {"message": m}] for g, e, m in _delete(c, [idle], 3)]
    out["v3_none"] = _delete(c, [], 3)
    out["v2"] = _delete(c, [busy, gone], 2)
    out["answer_fields_v3"] = sorted(jsonable(c.request(42, {"groups_names": [gone]}, version=3).results[0]))
    return out


def _exchange(sock: socket.socket, api_key: int, version: int, values: dict[str, Any], correlation_id: int) -> Any:
    sock.sendall(encode_request(build(request_class(api_key, version), values), correlation_id=correlation_id,
                                client_id="diff"))
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return "closed"
    (size,) = struct.unpack(">i", head)
    return decode_response(api_key, version, sock.recv(size, socket.MSG_WAITALL))[1]


def api_versions_v5_sasl(bootstrap: str, user: str, password: str) -> dict[str, Any]:
    """ApiVersions v5 on a SASL_PLAINTEXT listener: naming another cluster before authentication (Kafka's
    SaslServerAuthenticator does not check it), one id without the other (refused), then asking again, then
    after a PLAIN authentication another cluster, another node and this broker's own ids."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    out: dict[str, Any] = {}
    with socket.create_connection((host, int(port)), timeout=30) as s:
        def ask(version: int, cluster_id: str | None, node_id: int, n: int) -> Any:
            r = _exchange(s, 18, version, {**SOFTWARE, "cluster_id": cluster_id, "node_id": node_id}, n)
            return r if isinstance(r, str) else _summary(r)

        out["before_auth_invalid"] = ask(5, None, 1, 1)
        out["before_auth_other_cluster"] = ask(5, OTHER_CLUSTER, 1, 2)
        handshake = _exchange(s, 17, 1, {"mechanism": "PLAIN"}, 3)
        out["handshake"] = handshake if isinstance(handshake, str) else err(handshake)
        token = b"\0" + user.encode() + b"\0" + password.encode()
        authenticated = _exchange(s, 36, 2, {"auth_bytes": token}, 4)
        out["authenticate"] = authenticated if isinstance(authenticated, str) else err(authenticated)
        metadata = _exchange(s, 3, 12, {"topics": [], "allow_auto_topic_creation": False}, 5)
        cluster_id, node_id = metadata.cluster_id, metadata.controller_id
        out["after_auth_other_cluster"] = ask(5, OTHER_CLUSTER, node_id, 6)
        out["after_auth_other_node"] = ask(5, cluster_id, node_id + 1, 7)
        out["after_auth_own"] = ask(5, cluster_id, node_id, 8)
        out["after_auth_invalid"] = ask(5, cluster_id, -1, 9)
    return out
