"""Transactional produce to a partition whose transaction another broker coordinates (Kafka's
AddPartitionsToTxnManager, KIP-890).

With transactions V2 (Produce v12+) the client no longer adds partitions: the partition leader asks the
coordinator to (AddPartitionsToTxn v5, verify_only=false) before it appends. As Kafka's produce path waits
for that answer, the produce handler awaits `wait_added` (at most REQUEST_TIMEOUT_S) before it appends, so
the first batch for a (transaction, epoch, partition) is appended on its first attempt; `verify` then finds
the coordinator's answer (NONE: appended; an error: that error). Without an answer yet (the coordinator is
unreachable or slow; or a caller that did not wait) the batch is answered NOT_ENOUGH_REPLICAS, which every
producer retries. The answers are kept in a bounded table; a V2 transaction's next epoch (every V2
transaction ends with a bump) needs a new add. Produce v3-v11 to a remote coordinator is not verified
(Kafka with transaction.partition.verification.enable=false).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class

if TYPE_CHECKING:
    from samsa.broker.txn.marker_channel import MarkerBroker

logger = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN_KEY = 24
ADD_PARTITIONS_TO_TXN_VERSION = 5  # the broker-to-coordinator form (v4+), as Kafka 4.1's brokers send it
REQUEST_TIMEOUT_S = 10.0
MAX_REMEMBERED_ANSWERS_COUNT = 10_000  # the oldest answer is dropped first: a retry then asks again
TRANSACTION_STATE_TOPIC = "__transaction_state"

# (transactional id, producer id, producer epoch, topic, partition)
AddKey = tuple[str, int, int, str, int]

_RETRIABLE_FOR_PRODUCE = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress, ErrorCode.network_exception, ErrorCode.request_timed_out,
})


def produce_error(error: ErrorCode) -> ErrorCode:
    """The coordinator's answer to an add, as Produce says it (every Produce version knows these)."""
    if error in _RETRIABLE_FOR_PRODUCE:
        return ErrorCode.not_enough_replicas
    if error == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return error


class RemoteVerifier:
    def __init__(self, broker: MarkerBroker, partition_for: Callable[[str], int]) -> None:
        self._broker = broker
        self._partition_for = partition_for
        self._answers: OrderedDict[AddKey, ErrorCode] = OrderedDict()
        self._in_flight: dict[AddKey, asyncio.Task[None]] = {}
        self._clients: dict[int, NodeClient] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int,
               implicit_add: bool) -> ErrorCode:
        if not implicit_add:
            return ErrorCode.none
        answer = self.add(transactional_id, producer_id, producer_epoch, topic, partition)
        return ErrorCode.not_enough_replicas if answer is None else produce_error(answer)

    def add(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
            partition: int) -> ErrorCode | None:
        """The coordinator's answer to adding the partition, or None while it is asked (the caller answers
        with a retriable error)."""
        key = (transactional_id, producer_id, producer_epoch, topic, partition)
        answer = self._answers.get(key)
        if answer == ErrorCode.none:
            return ErrorCode.none
        if answer is not None:
            del self._answers[key]  # a refusal is said once; the next attempt asks again
            return answer
        if key not in self._in_flight:
            self._start(key)
        return None

    async def wait_added(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> None:
        """Start adding the partition unless the coordinator's answer is known, and wait for that answer (at
        most REQUEST_TIMEOUT_S): the append that follows then finds it in `verify`."""
        key = (transactional_id, producer_id, producer_epoch, topic, partition)
        if key in self._answers:
            return
        if key not in self._in_flight:
            self._start(key)
        task = self._in_flight.get(key)
        if task is not None:
            with contextlib.suppress(TimeoutError):
                # shielded: a produce that gives up (its connection closed) leaves the add to finish
                await asyncio.wait_for(asyncio.shield(task), REQUEST_TIMEOUT_S)

    def _remember(self, key: AddKey, error: ErrorCode) -> None:
        self._answers[key] = error
        self._answers.move_to_end(key)
        while len(self._answers) > MAX_REMEMBERED_ANSWERS_COUNT:
            self._answers.popitem(last=False)

    def _start(self, key: AddKey) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a direct call in a test): nothing is added
        task = loop.create_task(self._add(key))
        self._in_flight[key] = task
        self._tasks.add(task)  # held until done: the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)

    def _coordinator(self, transactional_id: str) -> tuple[int, str, int] | None:
        image = self._broker.image
        topic = image.topics_by_name.get(TRANSACTION_STATE_TOPIC)
        found = topic.partitions.get(self._partition_for(transactional_id)) if topic is not None else None
        leader = image.brokers.get(found.leader) if found is not None else None
        if leader is None or leader.fenced:
            return None
        return leader.broker_id, leader.host, leader.port

    async def _add(self, key: AddKey) -> None:
        transactional_id, producer_id, producer_epoch, topic, partition = key
        try:
            coordinator = self._coordinator(transactional_id)
            if coordinator is None:
                return
            node, host, port = coordinator
            client = self._clients.get(node)
            if client is None or (client.host, client.port) != (host, port):
                client = self._clients[node] = NodeClient(
                    host, port, client_id=f"broker-{self._broker.node_id}-txn-verification",
                    security=self._broker.inter_broker_security)
            request = build(request_class(ADD_PARTITIONS_TO_TXN_KEY, ADD_PARTITIONS_TO_TXN_VERSION), {
                "transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": False,
                                  "topics": [{"name": topic, "partitions": [partition]}]}]})
            try:
                response = await client.request(request, timeout_s=REQUEST_TIMEOUT_S)
            except (TimeoutError, NodeUnavailableError) as e:
                logger.info("adding %s-%d to transaction %s at broker %d: %s", topic, partition, transactional_id,
                            node, e)
                return
            error = ErrorCode(response.error_code)
            for txn in response.results_by_transaction:
                for t in txn.topic_results:
                    for r in t.results_by_partition:
                        error = ErrorCode(r.partition_error_code)
            self._remember(key, error)
        finally:
            self._in_flight.pop(key, None)
