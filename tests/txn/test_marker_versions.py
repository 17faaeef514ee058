"""The transaction coordinator sends WriteTxnMarkers at the newest version the partition leader speaks (its
ApiVersions, as Kafka's NetworkClient negotiates): v2 carries each marker's transaction version (KIP-1228); a
leader that speaks only v1 (an older release in a rolling upgrade) gets v1, which it reads as version 0."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.broker.txn.marker_channel import TransactionMarkerChannelManager
from samsa.broker.wire import build
from samsa.kproto.messages import response_class


class _Leader:
    """A NodeClient stand-in: answers ApiVersions with the given WriteTxnMarkers range, records what it is sent."""

    def __init__(self, markers_range: tuple[int, int] | None) -> None:
        self.markers_range = markers_range
        self.sent: list[tuple[int, int]] = []

    async def request(self, request: Any, *, timeout_s: float) -> Any:
        key, version = int(type(request).__api_key__), int(type(request).__version__)
        self.sent.append((key, version))
        keys = [{"api_key": 18, "min_version": 0, "max_version": 4}]
        if self.markers_range is not None:
            keys.append({"api_key": 27, "min_version": self.markers_range[0], "max_version": self.markers_range[1]})
        return build(response_class(18, 3), {"error_code": 0, "api_keys": keys})


@pytest.mark.parametrize(("spoken", "expected"), [((1, 2), 2), ((1, 1), 1), ((1, 5), 2), (None, 1)])
def test_the_newest_version_both_speak(spoken: tuple[int, int] | None, expected: int) -> None:
    channel = TransactionMarkerChannelManager(broker=None, on_answer=lambda: None)  # type: ignore[arg-type]
    leader = _Leader(spoken)
    assert asyncio.run(channel._version(7, leader)) == expected  # type: ignore[arg-type]
    assert asyncio.run(channel._version(7, leader)) == expected  # type: ignore[arg-type]
    assert leader.sent == [(18, 3)]  # asked once per connection
