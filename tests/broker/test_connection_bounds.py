"""ConnectionQuotas and RequestQueue bookkeeping, and KafkaConnection sending FileRecords and honouring the queue."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.connection import SEND_CHUNK_BYTES, KafkaConnection, Response
from samsa.broker.connection_quotas import ConnectionQuotas, RequestQueue, parse_per_ip_overrides
from samsa.storage.file_records import FileRecords

MIB = 1024 * 1024


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# --- ConnectionQuotas -------------------------------------------------------------------------------


def test_per_ip_limit_and_overrides() -> None:
    quotas = ConnectionQuotas(max_connections_per_ip=2, max_connections_per_ip_overrides={"10.0.0.9": 0,
                                                                                          "10.0.0.8": 3})
    assert quotas.try_accept("10.0.0.1", 0) and quotas.try_accept("10.0.0.1", 0)
    assert not quotas.try_accept("10.0.0.1", 0)
    assert quotas.try_accept("10.0.0.2", 0)  # another address has its own count
    assert not quotas.try_accept("10.0.0.9", 0)
    assert all(quotas.try_accept("10.0.0.8", 0) for _ in range(3)) and not quotas.try_accept("10.0.0.8", 0)
    quotas.release("10.0.0.1")
    assert quotas.try_accept("10.0.0.1", 0)
    assert quotas.total_count == 2 + 1 + 3


def test_total_limit_counts_every_address() -> None:
    quotas = ConnectionQuotas(max_connections=3)
    assert [quotas.try_accept(f"10.0.0.{i}", 0) for i in range(5)] == [True, True, True, False, False]
    quotas.release("10.0.0.0")
    assert quotas.try_accept("10.0.0.4", 0)
    with pytest.raises(AssertionError):
        quotas.release("10.0.0.7")  # never counted


def test_creation_rate_is_counted_over_a_one_second_window() -> None:
    quotas = ConnectionQuotas(max_connection_creation_rate=2)
    assert [quotas.try_accept("10.0.0.1", t) for t in (0, 10, 20, 999)] == [True, True, False, False]
    assert quotas.try_accept("10.0.0.1", 1000)  # the first one left the window
    assert not quotas.try_accept("10.0.0.1", 1005)
    assert quotas.try_accept("10.0.0.1", 1010)


def test_per_ip_overrides_parse_like_kafka() -> None:
    assert parse_per_ip_overrides("") == {}
    assert parse_per_ip_overrides(" 127.0.0.2:5 , ::1:7 ,[::2]:0") == {"127.0.0.2": 5, "::1": 7, "::2": 0}
    parsed = parse_per_ip_overrides("10.1.1.1:5,[::1]:7,localhost:3")
    assert parsed["10.1.1.1"] == 5 and parsed["::1"] == 7 and parsed[socket.gethostbyname("localhost")] == 3
    for bad in ("10.1.1.1", "10.1.1.1:x", ":3", "10.1.1.1:-1"):
        with pytest.raises(ValueError):
            parse_per_ip_overrides(bad)


# --- RequestQueue ---------------------------------------------------------------------------------


def test_request_pool_reserves_non_strictly_and_wakes_waiters() -> None:
    woken: list[str] = []
    queue = RequestQueue(max_requests=500, max_bytes=100, call_soon=lambda w: w())
    assert queue.try_reserve_bytes(1000)  # something was left: granted, the pool goes negative
    assert queue.available_bytes == -900
    assert not queue.try_reserve_bytes(1)
    queue.wait(lambda: woken.append("a"))
    queue.release_bytes(1000)
    assert woken == ["a"] and queue.available_bytes == 100
    unbounded = RequestQueue(max_requests=500, max_bytes=-1, call_soon=lambda w: w())
    assert unbounded.try_reserve_bytes(1 << 40) and not unbounded.bytes_bounded


def test_request_slots() -> None:
    woken: list[str] = []
    queue = RequestQueue(max_requests=2, max_bytes=-1, call_soon=lambda w: w())
    queue.acquire_request()
    assert not queue.full
    queue.acquire_request()
    assert queue.full
    queue.wait(lambda: woken.append("b"))
    queue.release_request()
    assert not queue.full and woken == ["b"]


# --- KafkaConnection with the queue (fake transport) ------------------------------------------------


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.7", 5555) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, parts: list[bytes]) -> None:
        self.written.append(b"".join(bytes(p) for p in parts))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


Dispatch = Callable[[bytes, str], Response | Awaitable[Response]]


def _connect(dispatch: Dispatch, queue: RequestQueue | None = None, quotas: ConnectionQuotas | None = None
             ) -> tuple[KafkaConnection, FakeTransport]:
    conn = KafkaConnection(dispatch, max_frame_bytes=10 * MIB, registry=set(), request_queue=queue, quotas=quotas)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


async def _spin(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_queued_max_requests_stops_other_connections_reading_until_a_slot_frees() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = RequestQueue(max_requests=1, max_bytes=-1, call_soon=loop.call_soon)
        slow: asyncio.Future[Response] = loop.create_future()
        seen: list[bytes] = []

        def dispatch(payload: bytes, host: str) -> Response | Awaitable[Response]:
            seen.append(payload)
            return slow if payload == b"slow" else frame(b"re:" + payload)

        first, _ = _connect(dispatch, queue)
        second, t2 = _connect(dispatch, queue)
        first.data_received(frame(b"slow"))
        await _spin()
        second.data_received(frame(b"b"))
        assert seen == [b"slow"] and not t2.reading  # the one slot is held by the waiting request
        slow.set_result(frame(b"done"))
        await _spin()
        assert seen == [b"slow", b"b"] and t2.reading and t2.written == [frame(b"re:b")]
        assert queue.in_flight_count == 0

    asyncio.run(main())


def test_queued_max_request_bytes_holds_back_frames_while_a_big_one_is_read() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = RequestQueue(max_requests=500, max_bytes=100, call_soon=loop.call_soon)
        seen: list[bytes] = []

        def dispatch(payload: bytes, host: str) -> Response | Awaitable[Response]:
            seen.append(payload)
            return frame(b"ok")

        big, t1 = _connect(dispatch, queue)
        small, t2 = _connect(dispatch, queue)
        payload = b"x" * 1000
        big.data_received(frame(payload)[:500])  # announced 1000: reserved (non-strict), not yet whole
        assert queue.available_bytes == -900 and t1.reading
        small.data_received(frame(b"tiny"))
        assert seen == [] and not t2.reading  # nothing left in the pool
        big.data_received(frame(payload)[500:])
        await _spin()
        assert seen == [payload, b"tiny"] and t2.reading and queue.available_bytes == 100

    asyncio.run(main())


def test_a_connection_over_a_quota_is_closed_at_once() -> None:
    quotas = ConnectionQuotas(max_connections_per_ip=1)
    first, t1 = _connect(lambda p, h: frame(b"re:" + p), quotas=quotas)
    second, t2 = _connect(lambda p, h: frame(b"re:" + p), quotas=quotas)
    assert t2.closed and not t1.closed
    second.connection_lost(None)
    assert quotas.count("10.0.0.7") == 1
    first.close()
    assert quotas.count("10.0.0.7") == 0


# --- KafkaConnection sending FileRecords over a real socket ------------------------------------------


def _segment(tmp_path: Path, size: int) -> tuple[int, bytes]:
    data = os.urandom(size)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY), data


async def _serve_one(dispatch: Dispatch) -> tuple[socket.socket, KafkaConnection, Any]:
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    accepted, _ = listener.accept()
    listener.close()
    accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
    conn = KafkaConnection(dispatch, max_frame_bytes=10 * MIB, registry=set())
    transport, _ = await loop.connect_accepted_socket(lambda: conn, accepted)
    client.setblocking(False)
    return client, conn, transport


async def _recv(sock: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    chunks = []
    while n:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, min(n, 256 * 1024)), 30)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _loop_factories() -> list[Any]:
    factories: list[Any] = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
    except ImportError:
        return factories
    return [*factories, pytest.param(uvloop.new_event_loop, id="uvloop")]


@pytest.mark.parametrize("loop_factory", _loop_factories())
def test_file_records_go_out_whole_in_order_without_being_buffered(tmp_path: Path, loop_factory: Any) -> None:
    size = 8 * MIB
    fd, content = _segment(tmp_path, size)

    def dispatch(payload: bytes, host: str) -> Response:
        if payload == b"file":
            head = bytearray(struct.pack(">i", 4 + size) + b"hdr:")
            return [head, FileRecords.slice_of(fd, 0, size)]  # type: ignore[list-item]
        return frame(b"re:" + payload)

    async def main() -> None:
        client, conn, transport = await _serve_one(dispatch)
        try:
            loop = asyncio.get_running_loop()
            await loop.sock_sendall(client, frame(b"file") + frame(b"after"))
            for _ in range(20):  # the socket fills; the transport holds at most one chunk meanwhile
                await asyncio.sleep(0.005)
                assert transport.get_write_buffer_size() <= SEND_CHUNK_BYTES
            first = await _recv(client, 4 + 4 + size)
            assert first[:8] == struct.pack(">i", 4 + size) + b"hdr:" and first[8:] == content
            assert await _recv(client, len(frame(b"re:after"))) == frame(b"re:after")  # answered after it
        finally:
            client.close()
            conn.close()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())
    os.close(fd)


def test_a_segment_cut_short_under_a_slice_closes_the_connection(tmp_path: Path) -> None:
    fd, content = _segment(tmp_path, MIB)

    def dispatch(payload: bytes, host: str) -> Response:
        head = bytearray(struct.pack(">i", 2 * MIB))
        return [head, FileRecords.slice_of(fd, 0, 2 * MIB)]  # type: ignore[list-item]  # past the file's end

    async def main() -> None:
        client, _conn, _ = await _serve_one(dispatch)
        try:
            await asyncio.get_running_loop().sock_sendall(client, frame(b"file"))
            got = await _recv(client, 4 + 2 * MIB)
            assert len(got) == 4 + MIB and got[4:] == content  # what the file had, then the connection ends
        finally:
            client.close()

    asyncio.run(main())
    os.close(fd)


def test_file_records_reads_and_owns_its_descriptor(tmp_path: Path) -> None:
    fd, content = _segment(tmp_path, 100_000)
    records = FileRecords.slice_of(fd, 10, 50_000)
    os.close(fd)  # the slice keeps its own descriptor
    assert len(records) == 50_000
    assert records.read_chunk(1000) == content[10:1010]
    assert records.read_all() == content[1010:50_010] and records.remaining_bytes == 0
    records.close()
    records.close()
