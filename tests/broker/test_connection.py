"""KafkaConnection against a fake transport: ordering, muting, backpressure, frame limits, closing."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from samsa.broker.connection import UNAUTHENTICATED_MAX_FRAME_BYTES, WRITE_BATCH_BYTES, KafkaConnection, Response
from samsa.kproto.errors import ProtocolError


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True
        self.closed = False
        self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.7", 5555) if name == "peername" else default

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.written.append(bytes(data))

    def writelines(self, parts: list[bytes]) -> None:
        assert not self.closed
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
        self.closed = self.aborted = True

    def responses(self) -> list[bytes]:
        """The written bytes split back into frame payloads."""
        data = b"".join(self.written)
        out = []
        while data:
            (size,) = struct.unpack_from(">i", data)
            out.append(data[4:4 + size])
            data = data[4 + size:]
        return out


def echo(seen: list[bytes]) -> Callable[[bytes, str], Response | Awaitable[Response]]:
    """Answers b"x..." with frame(b"re:x..."), b"quiet" with no response, b"bad" with a protocol error."""
    def dispatch(payload: bytes, client_host: str) -> Response | Awaitable[Response]:
        assert client_host == "10.0.0.7"
        seen.append(payload)
        if payload == b"quiet":
            return None
        if payload == b"bad":
            raise ProtocolError("undecodable")
        return frame(b"re:" + payload)
    return dispatch


def connect(dispatch: Callable[[bytes, str], Response | Awaitable[Response]], max_frame_bytes: int = 10 << 20
            ) -> tuple[KafkaConnection, FakeTransport, set[KafkaConnection]]:
    registry: set[KafkaConnection] = set()
    conn = KafkaConnection(dispatch, max_frame_bytes=max_frame_bytes, registry=registry)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    assert registry == {conn}
    return conn, transport, registry


def test_pipelined_requests_in_any_split_are_answered_in_order() -> None:
    seen: list[bytes] = []
    conn, transport, _ = connect(echo(seen))
    stream = frame(b"a") + frame(b"quiet") + frame(b"bb") + frame(b"ccc")
    for i in range(0, len(stream), 3):  # chunks that cut frames and size prefixes
        conn.data_received(stream[i:i + 3])
    assert seen == [b"a", b"quiet", b"bb", b"ccc"]
    assert transport.responses() == [b"re:a", b"re:bb", b"re:ccc"]  # nothing for the request without a response
    assert transport.reading and not transport.closed


def test_responses_from_one_receive_buffer_are_written_together() -> None:
    conn, transport, _ = connect(echo([]))
    conn.data_received(b"".join(frame(b"%d" % i) for i in range(10)))
    assert len(transport.written) == 1
    assert transport.responses() == [b"re:%d" % i for i in range(10)]


def test_a_waiting_request_mutes_the_connection_until_it_is_answered() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        slow: asyncio.Future[Response] = loop.create_future()
        seen: list[bytes] = []
        fast = echo(seen)

        def dispatch(payload: bytes, client_host: str) -> Response | Awaitable[Response]:
            if payload == b"slow":
                seen.append(payload)
                return slow
            return fast(payload, client_host)

        conn, transport, _ = connect(dispatch)
        conn.data_received(frame(b"first") + frame(b"slow") + frame(b"after"))
        await asyncio.sleep(0)
        # The one before it is answered, the one after it is not even looked at, and reading stops.
        assert seen == [b"first", b"slow"]
        assert transport.responses() == [b"re:first"]
        assert not transport.reading
        conn.data_received(frame(b"later"))  # a receive buffer already in flight still arrives
        assert seen == [b"first", b"slow"]
        slow.set_result(frame(b"slow done"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert seen == [b"first", b"slow", b"after", b"later"]
        assert transport.responses() == [b"re:first", b"slow done", b"re:after", b"re:later"]
        assert transport.reading

    asyncio.run(main())


def test_a_coroutine_that_suspends_runs_as_a_task_and_keeps_order() -> None:
    async def main() -> None:
        seen: list[bytes] = []
        fast = echo(seen)

        async def answer_later(payload: bytes) -> Response:
            await asyncio.sleep(0.01)
            return frame(b"late:" + payload)

        def dispatch(payload: bytes, client_host: str) -> Response | Awaitable[Response]:
            if payload.startswith(b"wait"):
                seen.append(payload)
                return answer_later(payload)
            return fast(payload, client_host)

        conn, transport, _ = connect(dispatch)
        conn.data_received(frame(b"wait1") + frame(b"x") + frame(b"wait2") + frame(b"quiet") + frame(b"y"))
        await asyncio.sleep(0.1)
        assert seen == [b"wait1", b"x", b"wait2", b"quiet", b"y"]
        assert transport.responses() == [b"late:wait1", b"re:x", b"late:wait2", b"re:y"]
        assert transport.reading

    asyncio.run(main())


def test_connection_lost_cancels_the_waiting_request() -> None:
    async def main() -> None:
        started = asyncio.Event()
        cancelled = asyncio.Event()

        async def forever() -> Response:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return None

        conn, transport, registry = connect(lambda payload, host: forever())
        conn.data_received(frame(b"wait"))
        await asyncio.wait_for(started.wait(), 5)
        conn.connection_lost(None)
        await asyncio.wait_for(cancelled.wait(), 5)
        assert registry == set()
        assert transport.written == []

    asyncio.run(main())


def test_write_backpressure_stops_processing_until_the_buffer_drains() -> None:
    seen: list[bytes] = []
    conn, transport, _ = connect(echo(seen))
    conn.data_received(frame(b"a"))
    conn.pause_writing()
    assert not transport.reading
    conn.data_received(frame(b"b") + frame(b"c"))
    assert seen == [b"a"]
    conn.resume_writing()
    assert seen == [b"a", b"b", b"c"]
    assert transport.responses() == [b"re:a", b"re:b", b"re:c"]
    assert transport.reading


def test_a_broken_frame_closes_the_connection_after_the_earlier_answers() -> None:
    seen: list[bytes] = []
    conn, transport, registry = connect(echo(seen))
    conn.data_received(frame(b"a") + frame(b"b") + struct.pack(">i", -1) + frame(b"never"))
    assert transport.responses() == [b"re:a", b"re:b"]
    assert transport.closed and not transport.aborted
    assert seen == [b"a", b"b"]
    assert registry == set()


def test_an_undecodable_request_closes_the_connection() -> None:
    seen: list[bytes] = []
    conn, transport, _ = connect(echo(seen))
    conn.data_received(frame(b"a") + frame(b"bad") + frame(b"never"))
    assert seen == [b"a", b"bad"]
    assert transport.responses() == [b"re:a"]
    assert transport.closed


def test_an_internal_error_closes_the_connection() -> None:
    def dispatch(payload: bytes, client_host: str) -> Response:
        raise RuntimeError("a bug")

    conn, transport, _ = connect(dispatch)
    conn.data_received(frame(b"a"))
    assert transport.closed


def test_frames_are_capped_small_until_the_first_valid_request() -> None:
    big = b"z" * (UNAUTHENTICATED_MAX_FRAME_BYTES + 1)
    conn, transport, _ = connect(echo([]))
    conn.data_received(struct.pack(">i", len(big)))  # the size prefix alone is enough to refuse it
    assert transport.closed

    seen: list[bytes] = []
    conn, transport, _ = connect(echo(seen), max_frame_bytes=2 * len(big))
    conn.data_received(frame(b"hello") + frame(big))
    assert seen == [b"hello", big]
    assert not transport.closed
    conn.data_received(struct.pack(">i", 2 * len(big) + 1))  # past socket.request.max.bytes
    assert transport.closed


def test_end_of_stream_closes_once_the_waiting_request_is_answered() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        slow: asyncio.Future[Response] = loop.create_future()
        conn, transport, _ = connect(lambda payload, host: slow if payload == b"slow" else frame(b"re:" + payload))
        conn.data_received(frame(b"slow") + frame(b"next"))
        assert conn.eof_received() is True
        assert not transport.closed
        slow.set_result(frame(b"done"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert transport.responses() == [b"done", b"re:next"]
        assert transport.closed

    asyncio.run(main())


def test_abort_drops_the_connection_and_cancels_its_request() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        slow: asyncio.Future[Response] = loop.create_future()
        conn, transport, registry = connect(lambda payload, host: slow)
        conn.data_received(frame(b"slow"))
        conn.abort()
        assert transport.aborted and slow.cancelled()
        assert registry == set()

    asyncio.run(main())


def test_responses_as_parts_are_written_in_order_and_large_ones_are_not_held_back() -> None:
    records = bytes(range(256)) * (WRITE_BATCH_BYTES // 256)  # one response past the batch bound

    def dispatch(payload: bytes, client_host: str) -> Response:
        body = [bytearray(b"head:" + payload), memoryview(records) if payload == b"big" else b":tail"]
        return [bytearray(struct.pack(">i", sum(len(p) for p in body))), *body]

    conn, transport, _ = connect(dispatch)
    conn.data_received(frame(b"a") + frame(b"big") + frame(b"b"))
    assert transport.responses() == [b"head:a:tail", b"head:big" + records, b"head:b:tail"]
    assert len(transport.written) == 2  # flushed once the big one was in, then the rest at the end
