"""Memory and connection bounds against a real `samsa serve` process (issue 15, part 4).

Slow readers of a large partition, frames announced large, the connection quotas, idle connections
and the broker's fetch.max.bytes. The broker's RSS is read from /proc/<pid>/status. After each hostile
input another client still produces and consumes.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.broker.wire import build
from samsa.kproto.batch import parse_header
from samsa.kproto.messages import decode_response, encode_request, request_class
from samsa.kproto.records import decode_batches, encode_batch

MIB = 1024 * 1024
FETCH_VERSION = 12
SETTLE_TIMEOUT_S = 60.0


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc status")


def create_topic(conn: Connection, name: str, configs: dict[str, str] | None = None) -> None:
    response = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                             "assignments": (),
                                             "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                                 "timeout": 10000, "validate_only": False})
    assert response.topics[0].error_code.value == 0, response


def one_batch(value: bytes, count: int = 1) -> bytes:
    return encode_batch([(None, value, ())] * count, timestamp_ms=int(time.time() * 1000))


def produce(conn: Connection, topic: str, batch: bytes) -> Any:
    response = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000,
                                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    part = response.responses[0].partition_responses[0]
    assert part.error_code.value == 0, part
    return part


def fetch_frame(topic: str, offset: int, *, max_bytes: int, partition_max_bytes: int, correlation_id: int = 1,
                max_wait_ms: int = 0, min_bytes: int = 0) -> bytes:
    request = build(request_class(1, FETCH_VERSION), {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                     "partition_max_bytes": partition_max_bytes}]}],
        "forgotten_topics_data": (), "rack_id": ""})
    return encode_request(request, correlation_id=correlation_id, client_id="membounds")


def api_versions_frame(correlation_id: int = 1) -> bytes:
    return encode_request(build(request_class(18, 0), {}), correlation_id=correlation_id, client_id="membounds")


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 4 * MIB))
        assert chunk, "connection closed by the broker"
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def fetch_records(conn: Connection, topic: str, offset: int, *, max_bytes: int, partition_max_bytes: int) -> bytes:
    conn.send_raw(fetch_frame(topic, offset, max_bytes=max_bytes, partition_max_bytes=partition_max_bytes))
    _, response = decode_response(1, FETCH_VERSION, conn.recv_frame())
    part = response.responses[0].partitions[0]
    assert part.error_code.value == 0, part
    return bytes(part.records or b"")


def batch_sizes(records: bytes) -> list[int]:
    sizes, pos = [], 0
    while pos < len(records):
        header = parse_header(records, pos)
        sizes.append(header.batch_length + 12)
        pos += header.batch_length + 12
    return sizes


def still_serves(samsa: Any, topic: str) -> None:
    """Another client produces to `topic` and reads back what it wrote."""
    with samsa.connect() as other:
        value = b"still-here-%d" % time.monotonic_ns()
        offset = produce(other, topic, one_batch(value)).base_offset
        records = fetch_records(other, topic, offset, max_bytes=MIB, partition_max_bytes=MIB)
        values = [r.value for _, recs in decode_batches(records, max_decompressed_bytes=1 << 26) for r in recs]
        assert values[0] == value


def refused(sock: socket.socket) -> bool:
    """Whether the broker closed `sock` rather than answer an ApiVersions on it."""
    try:
        sock.sendall(api_versions_frame())
        return sock.recv(4) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def answers(sock: socket.socket) -> bool:
    sock.sendall(api_versions_frame(7))
    payload = recv_frame(sock)
    return bool(struct.unpack_from(">i", payload)[0] == 7)


def connect_from(port: int, source_ip: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.bind((source_ip, 0))
    sock.connect(("127.0.0.1", port))
    return sock


@pytest.fixture
def opened() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


# --- slow readers -----------------------------------------------------------------------------------

SLOW_READERS = 8
PARTITION_BYTES = 96 * MIB


def test_slow_readers_of_a_large_partition_keep_rss_bounded(samsa_factory: Any, opened: list[socket.socket]
                                                            ) -> None:
    """Eight readers ask for the whole 96 MiB partition and read nothing: the broker sends from the
    segment file as each socket drains, so its RSS stays near where it was (reading each response
    into memory, as before, held 8 x 55+ MiB)."""
    samsa = samsa_factory()
    samsa.start()
    with samsa.connect() as conn:
        create_topic(conn, "big")
        create_topic(conn, "other")
        batch = one_batch(b"v" * 1000, count=1000)  # ~1 MB
        written = 0
        while written < PARTITION_BYTES:
            produce(conn, "big", batch)
            written += len(batch)
        still_serves(samsa, "other")
        before = rss_bytes(samsa.proc.pid)
        for _ in range(SLOW_READERS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", samsa.port))
            opened.append(sock)
            sock.sendall(fetch_frame("big", 0, max_bytes=200 * MIB, partition_max_bytes=200 * MIB))
        # Every response has started to arrive: the broker has built and begun sending them all.
        sizes = []
        for sock in opened:
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            sizes.append(size)
        peak = rss_bytes(samsa.proc.pid)
        still_serves(samsa, "other")
        peak = max(peak, rss_bytes(samsa.proc.pid))
        assert peak - before < 300 * MIB, f"RSS grew from {before / MIB:.0f} to {peak / MIB:.0f} MiB with slow readers"
        # fetch.max.bytes (55 MiB) caps each response whatever the client asks.
        assert all(48 * MIB < size <= 57671680 + 4096 for size in sizes), sizes
        # A slow reader that reads on gets its whole response, with whole batches.
        sock = opened[0]
        payload = recv_exact(sock, sizes[0])
        _, response = decode_response(1, FETCH_VERSION, payload)
        records = bytes(response.responses[0].partitions[0].records)
        assert sum(batch_sizes(records)) == len(records) > 48 * MIB
        for s in opened:
            s.close()
        opened.clear()
        still_serves(samsa, "other")


# --- big announced frames ---------------------------------------------------------------------------


def _send_what_it_takes(socks: list[socket.socket], frames: list[bytes]) -> list[int]:
    """Send each frame without blocking until the broker stops taking bytes on every socket (or all is
    sent). Returns the bytes sent per socket."""
    sent = [0] * len(socks)
    for s in socks:
        s.setblocking(False)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 1.0:
        progressed = False
        for i, s in enumerate(socks):
            if sent[i] < len(frames[i]):
                try:
                    n = s.send(memoryview(frames[i])[sent[i]:sent[i] + MIB])
                except BlockingIOError:
                    continue
                sent[i] += n
                progressed = progressed or n > 0
        if progressed:
            quiet_since = time.monotonic()
        else:
            time.sleep(0.02)
    for s in socks:
        s.setblocking(True)
        s.settimeout(10)
    return sent


def test_announced_frames_do_not_reserve_memory(samsa_factory: Any, opened: list[socket.socket]) -> None:
    """Eight connections announce 100 MiB frames and send 1 MiB of each: the broker holds what arrived,
    not what was announced."""
    samsa = samsa_factory()
    samsa.start()
    with samsa.connect() as conn:
        create_topic(conn, "other")
        still_serves(samsa, "other")
    before = rss_bytes(samsa.proc.pid)
    for _ in range(8):
        sock = socket.create_connection(("127.0.0.1", samsa.port), timeout=10)
        opened.append(sock)
        assert answers(sock)  # a valid request first, so the frame limit is socket.request.max.bytes
        sock.sendall(struct.pack(">i", 100 * MIB - 1) + b"\x00" * MIB)
    still_serves(samsa, "other")
    grown = rss_bytes(samsa.proc.pid) - before
    assert grown < 64 * MIB, f"RSS grew by {grown / MIB:.0f} MiB for 8 MiB received"
    for s in opened:
        s.close()
    opened.clear()
    still_serves(samsa, "other")


def test_queued_max_request_bytes_bounds_what_frames_hold(samsa_factory: Any, opened: list[socket.socket]) -> None:
    """With queued.max.request.bytes=16 MiB, eight connections each sending a 40 MiB frame as fast as
    the broker takes it: one frame is granted (a reservation passes while anything is left, as in
    Kafka's pool), the others wait unread, so the broker holds about one frame, not eight."""
    samsa = samsa_factory(extra_args=("--override", f"queued.max.request.bytes={16 * MIB}"))
    samsa.start()
    with samsa.connect() as conn:
        create_topic(conn, "other")
        still_serves(samsa, "other")
    before = rss_bytes(samsa.proc.pid)
    frames = []
    for _ in range(8):
        sock = socket.create_connection(("127.0.0.1", samsa.port), timeout=10)
        opened.append(sock)
        assert answers(sock)
        frames.append(struct.pack(">i", 40 * MIB) + b"\x00" * (40 * MIB - 1))  # one byte short: never whole
    sent = _send_what_it_takes(opened, frames)
    grown = rss_bytes(samsa.proc.pid) - before
    assert sum(sent) < 3 * 40 * MIB, sent  # most frames were not taken in (kernel buffers aside)
    assert grown < 120 * MIB, f"RSS grew by {grown / MIB:.0f} MiB; sent {[n // MIB for n in sent]} MiB"
    for s in opened:
        s.close()
    opened.clear()
    still_serves(samsa, "other")


# --- connection quotas ------------------------------------------------------------------------------


def test_per_ip_and_total_connection_limits_close_the_extra_connection(samsa_factory: Any,
                                                                        opened: list[socket.socket]) -> None:
    samsa = samsa_factory(extra_args=(
        "--override", "max.connections=6", "--override", "max.connections.per.ip=2",
        "--override", "max.connections.per.ip.overrides=127.0.0.9:0,127.0.0.8:3"))
    samsa.start()
    with samsa.connect() as conn:  # one connection from 127.0.0.1 throughout
        create_topic(conn, "other")
        a = [connect_from(samsa.port, "127.0.0.2") for _ in range(2)]
        opened.extend(a)
        assert all(answers(s) for s in a)
        extra = connect_from(samsa.port, "127.0.0.2")
        opened.append(extra)
        assert refused(extra)  # a third from the same address: over max.connections.per.ip
        assert all(answers(s) for s in a)  # the others keep working
        banned = connect_from(samsa.port, "127.0.0.9")
        opened.append(banned)
        assert refused(banned)  # overridden to 0
        b = [connect_from(samsa.port, "127.0.0.8") for _ in range(3)]  # overridden to 3
        opened.extend(b)
        assert all(answers(s) for s in b)
        # 1 + 2 + 3 = 6 = max.connections: the next one, from anywhere, is closed.
        over = connect_from(samsa.port, "127.0.0.3")
        opened.append(over)
        assert refused(over)
        assert all(answers(s) for s in a + b)
        produce(conn, "other", one_batch(b"x"))
        # A connection closing frees its place.
        a[0].close()
        again = connect_from(samsa.port, "127.0.0.3")
        opened.append(again)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while refused(again):  # the broker may not have seen a[0] close yet
            assert time.monotonic() < deadline, "a freed connection slot was never reused"
            time.sleep(0.05)
            again = connect_from(samsa.port, "127.0.0.3")
            opened.append(again)
    for s in opened:
        s.close()
    opened.clear()
    still_serves(samsa, "other")
    assert "max.connections.per.ip" in samsa.log_tail(400)


def test_connection_creation_rate_closes_connections_over_it(samsa_factory: Any, opened: list[socket.socket]
                                                             ) -> None:
    samsa = samsa_factory(extra_args=("--override", "max.connection.creation.rate=3"))
    samsa.start()
    time.sleep(1.1)  # the start-up probe's connection leaves the one-second window
    socks = [connect_from(samsa.port, "127.0.0.4") for _ in range(8)]
    opened.extend(socks)
    outcomes = [refused(s) for s in socks]
    assert outcomes.count(False) <= 3 and outcomes.count(True) >= 5, outcomes
    for s in opened:
        s.close()
    opened.clear()
    time.sleep(1.1)
    with samsa.connect() as conn:
        create_topic(conn, "other")
    time.sleep(1.1)
    still_serves(samsa, "other")


# --- idle connections -------------------------------------------------------------------------------


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(samsa_factory: Any,
                                                                    opened: list[socket.socket]) -> None:
    samsa = samsa_factory(extra_args=("--override", "connections.max.idle.ms=400"))
    samsa.start()
    idle = socket.create_connection(("127.0.0.1", samsa.port), timeout=30)
    opened.append(idle)
    assert answers(idle)
    # A long-poll Fetch longer than the idle time is a request in progress: it is answered, not cut.
    busy = socket.create_connection(("127.0.0.1", samsa.port), timeout=30)
    opened.append(busy)
    with samsa.connect() as conn:
        create_topic(conn, "other")
    busy.sendall(fetch_frame("other", 0, max_bytes=MIB, partition_max_bytes=MIB, max_wait_ms=1500, min_bytes=1,
                             correlation_id=9))
    assert idle.recv(1) == b""  # closed by the broker (the socket's timeout is 30 s)
    payload = recv_frame(busy)
    assert struct.unpack_from(">i", payload)[0] == 9
    # Within the idle time after a request, a connection still works (and reconnecting always does).
    with socket.create_connection(("127.0.0.1", samsa.port), timeout=30) as fresh:
        assert answers(fresh)
        assert answers(fresh)
    # The client connection used here makes its requests back to back, well within 400 ms.
    with samsa.connect() as c:
        value = b"after-idle"
        offset = produce(c, "other", one_batch(value)).base_offset
        records = fetch_records(c, "other", offset, max_bytes=MIB, partition_max_bytes=MIB)
        assert value in records


# --- fetch.max.bytes ----------------------------------------------------------------------------------


def test_broker_fetch_max_bytes_caps_a_response_but_returns_at_least_one_batch(samsa_factory: Any) -> None:
    samsa = samsa_factory(extra_args=("--override", f"fetch.max.bytes={MIB}",
                                      "--override", f"message.max.bytes={4 * MIB}"))
    samsa.start()
    with samsa.connect() as conn:
        create_topic(conn, "capped")
        batch = one_batch(b"c" * 1000, count=300)  # ~300 KB
        for _ in range(8):
            produce(conn, "capped", batch)
        records = fetch_records(conn, "capped", 0, max_bytes=100 * MIB, partition_max_bytes=100 * MIB)
        assert len(records) <= MIB and batch_sizes(records) == [len(batch)] * (MIB // len(batch))
        create_topic(conn, "huge", {"max.message.bytes": str(4 * MIB)})
        big = one_batch(b"h" * 1000, count=2000)  # ~2 MB, over fetch.max.bytes
        produce(conn, "huge", big)
        produce(conn, "huge", big)
        records = fetch_records(conn, "huge", 0, max_bytes=100 * MIB, partition_max_bytes=100 * MIB)
        assert batch_sizes(records) == [len(big)]  # at least one batch, whole, and only that one
    still_serves(samsa, "capped")


# --- queued.max.requests ------------------------------------------------------------------------------


def test_queued_max_requests_holds_other_requests_until_a_waiting_one_is_answered(samsa_factory: Any) -> None:
    """With one slot, a long-poll Fetch holds it: another connection's request is not read until the
    Fetch is answered, then it is answered too."""
    samsa = samsa_factory(extra_args=("--override", "queued.max.requests=1"))
    samsa.start()
    with samsa.connect() as conn:
        create_topic(conn, "empty")
    with socket.create_connection(("127.0.0.1", samsa.port), timeout=30) as waiting, \
            socket.create_connection(("127.0.0.1", samsa.port), timeout=30) as other:
        assert answers(other)
        waiting.sendall(fetch_frame("empty", 0, max_bytes=MIB, partition_max_bytes=MIB, max_wait_ms=3000,
                                    min_bytes=1, correlation_id=5))
        time.sleep(1.0)  # the Fetch is read and waits (holding the one slot) before the next request is sent
        other.sendall(api_versions_frame(6))
        readable, _, _ = select.select([waiting, other], [], [], 30)
        # other's request waited for the slot: its answer does not come before the Fetch's (both may be
        # ready by the time select returns; other alone, as without the bound, would fail)
        assert waiting in readable
        payload = recv_frame(waiting)
        assert struct.unpack_from(">i", payload)[0] == 5
        assert struct.unpack_from(">i", recv_frame(other))[0] == 6
    still_serves(samsa, "empty")
