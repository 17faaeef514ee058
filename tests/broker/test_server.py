"""The network shell against a real `samsa serve` process: muting, ordering, frame limits, closing."""

from __future__ import annotations

import signal
import socket
import struct
import time
from typing import Any

from samsa.broker.client import Connection
from samsa.broker.connection import UNAUTHENTICATED_MAX_FRAME_BYTES
from samsa.broker.wire import build
from samsa.kproto.messages import decode_response, encode_request, request_class
from samsa.kproto.records import encode_batch

FETCH_WAIT_MS = 1500


def request_frame(api_key: int, version: int, values: dict[str, Any], correlation_id: int) -> bytes:
    return encode_request(build(request_class(api_key, version), values), correlation_id=correlation_id,
                          client_id="test-server")


def metadata_frame(conn: Connection, topic: str, correlation_id: int) -> bytes:
    return request_frame(3, conn.pick_version(3), {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}, correlation_id)


def produce_frame(conn: Connection, topic: str, records: bytes, acks: int, correlation_id: int) -> bytes:
    return request_frame(0, conn.pick_version(0), {
        "transactional_id": None, "acks": acks, "timeout": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, correlation_id)


def create_topic(conn: Connection, name: str) -> None:
    response = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                             "assignments": (), "configs": ()}],
                                 "timeout": 10000, "validate_only": False})
    assert response.topics[0].error_code.value == 0


def batch(value: bytes) -> bytes:
    return encode_batch([(None, value, ())], timestamp_ms=int(time.time() * 1000))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed by the broker"
        data += chunk
    return data


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_waiting_request_mutes_the_connection(conn: Connection) -> None:
    """A long-poll Fetch on an empty partition, then a Produce to it, pipelined on one connection: the
    Produce is not read until the Fetch has answered, so the Fetch waits its whole max_wait and finds
    nothing (had the Produce been handled first, the Fetch would have returned its record at once)."""
    create_topic(conn, "muted")
    fetch_version = 12  # names topics (v13 names them by id)
    fetch = request_frame(1, fetch_version, {
        "replica_id": -1, "max_wait": FETCH_WAIT_MS, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
        "topics": [{"topic": "muted", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                       "partition_max_bytes": 1 << 20}]}]}, 501)
    produce = produce_frame(conn, "muted", batch(b"after the fetch"), acks=1, correlation_id=502)
    started = time.monotonic()
    conn.send_raw(fetch + produce)
    correlation_id, fetched = decode_response(1, fetch_version, conn.recv_frame())
    waited_s = time.monotonic() - started
    assert correlation_id == 501
    assert fetched.responses[0].partitions[0].error_code.value == 0, fetched
    assert fetched.responses[0].partitions[0].records in (None, b"")
    assert waited_s >= FETCH_WAIT_MS / 1000 * 0.9
    correlation_id, produced = decode_response(0, conn.pick_version(0), conn.recv_frame())
    assert correlation_id == 502
    assert produced.responses[0].partition_responses[0].base_offset == 0


def test_pipelined_answers_keep_request_order_and_acks_zero_gets_none(conn: Connection) -> None:
    create_topic(conn, "order")
    frames = [metadata_frame(conn, "order", 1),
              produce_frame(conn, "order", batch(b"silent"), acks=0, correlation_id=2),
              produce_frame(conn, "order", batch(b"loud"), acks=1, correlation_id=3),
              metadata_frame(conn, "order", 4)]
    conn.send_raw(b"".join(frames))
    ids = [decode_response(key, conn.pick_version(key), conn.recv_frame())[0] for key in (3, 0, 3)]
    assert ids == [1, 3, 4]  # nothing for correlation id 2


def test_a_broken_frame_after_pipelined_requests_closes_after_their_answers(samsa: Any) -> None:
    with samsa.connect() as conn:
        create_topic(conn, "broken")
    with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as sock:
        with Connection("127.0.0.1", samsa.port) as helper:
            frames = [metadata_frame(helper, "broken", 7), metadata_frame(helper, "broken", 8)]
        sock.sendall(b"".join(frames) + struct.pack(">i", -3) + b"junk")
        assert [struct.unpack_from(">i", recv_frame(sock))[0] for _ in range(2)] == [7, 8]
        assert closed_by_broker(sock)
    with samsa.connect() as conn:  # the broker serves everyone else
        assert conn.request(3, {"topics": [{"name": "broken"}], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False}).topics[0].error_code.value == 0


def test_a_large_frame_is_refused_first_and_accepted_after_a_valid_request(samsa: Any) -> None:
    with samsa.connect() as conn:
        create_topic(conn, "large")
        big = produce_frame(conn, "large", batch(b"x" * (2 * UNAUTHENTICATED_MAX_FRAME_BYTES)), acks=1,
                            correlation_id=9)
        # After ApiVersions (sent when the connection opened), a 2 MiB request is read and answered
        # (it is past message.max.bytes: MESSAGE_TOO_LARGE, not a closed connection).
        conn.send_raw(big)
        correlation_id, response = decode_response(0, conn.pick_version(0), conn.recv_frame())
        assert correlation_id == 9
        assert response.responses[0].partition_responses[0].error_code.value == 10
    with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as sock:
        sock.sendall(big[:4096])  # as the first request, its size alone closes the connection
        assert closed_by_broker(sock)


def test_half_closed_connection_still_gets_its_answer(samsa: Any) -> None:
    with Connection("127.0.0.1", samsa.port) as helper:
        create_topic(helper, "half")
        request = metadata_frame(helper, "half", 11)
    with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        assert struct.unpack_from(">i", recv_frame(sock))[0] == 11
        assert closed_by_broker(sock)


def test_shutdown_closes_open_connections(samsa: Any) -> None:
    idle = socket.create_connection(("127.0.0.1", samsa.port), timeout=20)
    with Connection("127.0.0.1", samsa.port) as conn:
        create_topic(conn, "parked")
        # A long poll in progress when the broker stops.
        conn.send_raw(request_frame(1, 12, {
            "replica_id": -1, "max_wait": 30000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": "parked", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                            "partition_max_bytes": 1 << 20}]}]}, 21))
        time.sleep(0.2)
        assert samsa.proc is not None
        started = time.monotonic()
        samsa.proc.send_signal(signal.SIGTERM)
        assert samsa.proc.wait(20) == 0
        assert time.monotonic() - started < 15
        samsa.proc = None
        with idle:
            assert closed_by_broker(idle)
        # The parked Fetch may be answered as the broker stops; then the connection closes.
        with conn._sock as sock:
            sock.settimeout(5)
            while sock.recv(1 << 16):
                pass  # drain whatever answer comes until the broker closes the connection
