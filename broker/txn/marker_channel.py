"""WriteTxnMarkers to the leaders of partitions another broker leads, and their answers (Kafka's
TransactionMarkerChannelManager).

The coordinator asks for a marker with `send`; the leader's answer per partition is kept under its
MarkerKey until the transaction completes (`forget`), and every answer calls `on_answer` so the shell
finishes what it completes without waiting for its timer. A request that fails or times out leaves its
partitions unanswered: the shell's timer asks again.

Each marker carries its transaction's version (WriteTxnMarkers v2, KIP-1228). As Kafka's NetworkClient, the
request takes the newest version both brokers speak: the leader's ApiVersions is asked once per connection
(again after a failure: the leader may have restarted as another release); a v1 leader reads every marker
as version 0, as before v2.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class

if TYPE_CHECKING:
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.security.client import ClientSecurity

logger = logging.getLogger(__name__)

MARKER_REQUEST_TIMEOUT_S = 10.0  # one WriteTxnMarkers to another broker; the timer retries after it
WRITE_TXN_MARKERS_KEY = 27
WRITE_TXN_MARKERS_VERSIONS = (1, 2)  # the versions this broker sends: the newest the leader speaks
API_VERSIONS_KEY = 18
API_VERSIONS_VERSION = 3

# (producer id, producer epoch, committed, topic, partition) of one marker
MarkerKey = tuple[int, int, bool, str, int]


class MarkerBroker(Protocol):
    """What the marker channel uses of its broker (samsa.broker.broker.Broker is one)."""

    @property
    def node_id(self) -> int: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def inter_broker_security(self) -> ClientSecurity | None: ...


class TransactionMarkerChannelManager:
    def __init__(self, broker: MarkerBroker, on_answer: Callable[[], None]) -> None:
        self._broker = broker
        self._on_answer = on_answer
        self._results: dict[MarkerKey, ErrorCode] = {}  # the leader's answer
        self._in_flight: set[MarkerKey] = set()  # sent, not answered yet
        self._clients: dict[int, NodeClient] = {}
        self._deliveries: set[asyncio.Task[None]] = set()
        self._versions: dict[int, int] = {}  # leader id -> the WriteTxnMarkers version to send it

    def answer(self, key: MarkerKey) -> ErrorCode | None:
        return self._results.get(key)

    def in_flight(self, key: MarkerKey) -> bool:
        return key in self._in_flight

    def forget(self, producer_id: int) -> None:
        """The transaction is complete: its answers are not needed any more."""
        for key in [k for k in self._results if k[0] == producer_id]:
            del self._results[key]

    def send(self, leader_id: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
             committed: bool, partitions: list[tuple[str, int]], transaction_version: int = 0) -> None:
        """WriteTxnMarkers for `partitions` to their leader `leader_id`, answered in the background."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a direct call in a test): the partitions stay pending
        keys = [(producer_id, producer_epoch, committed, t, p) for t, p in partitions]
        self._in_flight.update(keys)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for t, p in partitions:
            by_topic[t].append(p)
        values = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                               "transaction_result": committed, "coordinator_epoch": coordinator_epoch,
                               "transaction_version": transaction_version,
                               "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        task = loop.create_task(self._deliver(leader_id, keys, values))
        self._deliveries.add(task)  # held until done: the loop keeps only weak references to tasks
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, leader_id: int, keys: list[MarkerKey], values: dict[str, Any]) -> None:
        try:
            broker = self._broker.image.brokers.get(leader_id)
            if broker is None:
                return
            client = self._clients.get(leader_id)
            if client is None or (client.host, client.port) != (broker.host, broker.port):
                self._versions.pop(leader_id, None)
                client = self._clients[leader_id] = NodeClient(
                    broker.host, broker.port, client_id=f"broker-{self._broker.node_id}-txn-markers",
                    security=self._broker.inter_broker_security)
            try:
                version = await self._version(leader_id, client)
                request = build(request_class(WRITE_TXN_MARKERS_KEY, version), values)
                response = await client.request(request, timeout_s=MARKER_REQUEST_TIMEOUT_S)
            except (TimeoutError, NodeUnavailableError) as e:
                self._versions.pop(leader_id, None)
                logger.info("transaction markers to broker %d: %s; retrying", leader_id, e)
                return
            for marker in response.markers:
                for t in marker.topics:
                    for r in t.partitions:
                        key = (int(marker.producer_id), keys[0][1], keys[0][2], t.name, int(r.partition_index))
                        if key in self._in_flight:
                            self._results[key] = ErrorCode(r.error_code)
        finally:
            self._in_flight.difference_update(keys)
        self._on_answer()

    async def _version(self, leader_id: int, client: NodeClient) -> int:
        """The newest WriteTxnMarkers version `leader_id` and this broker both speak (its ApiVersions)."""
        version = self._versions.get(leader_id)
        if version is None:
            request = build(request_class(API_VERSIONS_KEY, API_VERSIONS_VERSION),
                            {"client_software_name": "samsa", "client_software_version": "txn-markers"})
            response = await client.request(request, timeout_s=MARKER_REQUEST_TIMEOUT_S)
            spoken = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
            low, high = spoken.get(WRITE_TXN_MARKERS_KEY, (WRITE_TXN_MARKERS_VERSIONS[0],) * 2)
            usable = [v for v in WRITE_TXN_MARKERS_VERSIONS if low <= v <= high]
            version = self._versions[leader_id] = max(usable, default=WRITE_TXN_MARKERS_VERSIONS[0])
        return version
