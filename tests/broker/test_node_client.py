"""NodeClient (node-to-node requests): answers matched by correlation id, and a request that times out
takes its connection down so that the next one connects afresh, as Kafka's NetworkClient does."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.broker.wire import build
from samsa.kproto.messages import encode_response, parse_request_header, request_class, response_class

API_VERSIONS = 18
VERSION = 3


def api_versions_request() -> Any:
    return build(request_class(API_VERSIONS, VERSION), {"client_software_name": "t", "client_software_version": "1"})


class Server:
    """Answers ApiVersions with finalized_features_epoch = the connection's index (0, 1, ...), except that on the
    connections listed in `silent` it reads requests and never answers (a peer cut off by a partition)."""

    def __init__(self, silent: set[int]) -> None:
        self.silent = silent
        self.connections = 0
        self.requests_per_connection: list[int] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        self.requests_per_connection.append(0)
        self.writers.append(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                payload = await reader.readexactly(size)
                self.requests_per_connection[index] += 1
                if index in self.silent:
                    continue
                header = parse_request_header(payload)
                response = build(response_class(API_VERSIONS, VERSION),
                                 {"error_code": 0, "api_keys": (), "finalized_features_epoch": index})
                writer.write(encode_response(header, response))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up (it drops a connection whose request timed out)
        finally:
            writer.close()


async def _with_server(silent: set[int], body: Any) -> Server:
    server = Server(silent)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = NodeClient("127.0.0.1", port, client_id="node-client-test")
    try:
        await asyncio.wait_for(body(client), 20)
    finally:
        await client.close()
        for w in server.writers:
            w.close()
        listener.close()
        await listener.wait_closed()
    return server


def test_pipelined_requests_are_matched_to_their_answers() -> None:
    async def body(client: NodeClient) -> None:
        answers = await asyncio.gather(*(client.request(api_versions_request(), timeout_s=5) for _ in range(10)))
        assert [a.finalized_features_epoch for a in answers] == [0] * 10

    server = asyncio.run(_with_server(set(), body))
    assert server.connections == 1  # one connection carried all ten
    assert server.requests_per_connection == [10]


def test_a_timed_out_request_takes_its_connection_down_and_the_next_one_reconnects() -> None:
    async def body(client: NodeClient) -> None:
        with pytest.raises(TimeoutError):
            await client.request(api_versions_request(), timeout_s=0.3)
        answer = await client.request(api_versions_request(), timeout_s=5)
        assert answer.finalized_features_epoch == 1  # answered on the second connection

    server = asyncio.run(_with_server({0}, body))
    assert server.connections == 2
    assert server.requests_per_connection == [1, 1]


def test_requests_waiting_on_a_dropped_connection_fail_and_others_are_untouched() -> None:
    """A request still waiting when another one's timeout drops the connection fails at once (it may be
    retried); a request already on the new connection is not failed by the old one's end."""

    async def body(client: NodeClient) -> None:
        first = asyncio.ensure_future(client.request(api_versions_request(), timeout_s=0.3))
        waiting = asyncio.ensure_future(client.request(api_versions_request(), timeout_s=10))
        with pytest.raises(TimeoutError):
            await first
        with pytest.raises(NodeUnavailableError):
            await waiting
        answer = await client.request(api_versions_request(), timeout_s=5)
        assert answer.finalized_features_epoch == 1

    server = asyncio.run(_with_server({0}, body))
    assert server.connections == 2
