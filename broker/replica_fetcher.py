"""Followers replicate by fetching from their leaders (Kafka: ReplicaFetcherManager / ReplicaFetcherThread).

One fetcher task per leader broker fetches every partition this broker follows from it, in one Fetch
request (v17, replica_state.replica_id = this broker, topics by id, last_fetched_epoch per partition,
long-polling max_wait like replica.fetch.wait.max.ms). For each partition in the answer:

- records are appended as a follower (the leader's offsets and epochs kept; producer state follows,
  so a producer's retry after a failover is still recognised by whoever leads next), and the high
  watermark becomes min(leader's high watermark, our log end);
- a diverging_epoch (our last fetched epoch ends earlier on the leader) truncates our log to where the
  two histories agree, never our stale high watermark;
- OFFSET_OUT_OF_RANGE below the leader's log start truncates fully to it (we fell behind retention);
- a fenced/unknown leader epoch or NOT_LEADER_OR_FOLLOWER waits for the next metadata image.

The set of partitions and their leaders comes from the metadata image (ReplicaManager tells us).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.broker.replica_manager import Partition, ReplicaManager
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class
from samsa.storage.errors import StorageError
from samsa.storage.log import Log

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.lifecycle import BrokerLifecycle
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.security.client import ClientSecurity

logger = logging.getLogger(__name__)

FETCH_VERSION = 17
# Kafka's replica.fetch.* defaults; the byte limits come from the broker's config
# (replica.fetch.response.max.bytes for the whole response, replica.fetch.max.bytes per partition;
# the leader caps the response at its fetch.max.bytes, and sends at least one batch either way).
FETCH_MAX_WAIT_MS = 500
FETCH_MIN_BYTES = 1
BACKOFF_S = 0.2  # replica.fetch.backoff.ms after an error
REQUEST_TIMEOUT_S = 10.0


class FetcherBroker(Protocol):
    """What the replica fetchers use of their broker (samsa.broker.broker.Broker is one)."""

    @property
    def node_id(self) -> int: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def lifecycle(self) -> BrokerLifecycle: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def inter_broker_security(self) -> ClientSecurity | None: ...


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaFetcherManager:
    def __init__(self, broker: FetcherBroker) -> None:
        self._broker = broker
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        self._clients: dict[int, NodeClient] = {}
        self._changed: dict[int, asyncio.Event] = {}
        self._running = False

    def followed_by_leader(self) -> dict[int, list[Partition]]:
        out: dict[int, list[Partition]] = {}
        for p in self._broker.replica_manager.follower_partitions():
            out.setdefault(p.leader_id, []).append(p)
        return out

    def update(self) -> None:
        """Start fetchers for new leaders, stop those with nothing left to fetch (on each new image)."""
        if not self._running:
            return
        wanted = self.followed_by_leader()
        for leader, task in list(self._fetchers.items()):
            if leader not in wanted:
                task.cancel()
                del self._fetchers[leader]
        for leader in wanted:
            if leader not in self._fetchers:
                self._changed[leader] = asyncio.Event()
                self._fetchers[leader] = asyncio.get_running_loop().create_task(self._run(leader))
            else:
                self._changed[leader].set()  # a partition moved: the next request is rebuilt anyway

    async def run(self) -> None:
        self._running = True
        self.update()
        try:
            await asyncio.Event().wait()  # the fetchers are tasks of their own; this only owns them
        finally:
            self._running = False
            for task in self._fetchers.values():
                task.cancel()
            for client in self._clients.values():
                await client.close()

    def _client(self, leader: int) -> NodeClient | None:
        b = self._broker.image.brokers.get(leader)
        if b is None:
            return None
        client = self._clients.get(leader)
        if client is None or (client.host, client.port) != (b.host, b.port):
            client = self._clients[leader] = NodeClient(b.host, b.port,
                                                        client_id=f"replica-fetcher-{self._broker.node_id}",
                                                        security=self._broker.inter_broker_security)
        return client

    async def _run(self, leader: int) -> None:
        while True:
            partitions = [p for p in self._broker.replica_manager.follower_partitions() if p.leader_id == leader]
            if not partitions:
                return
            client = self._client(leader)
            try:
                if client is None:
                    raise NodeUnavailableError(f"broker {leader} is not registered")
                response = await client.request(self._request(partitions), timeout_s=REQUEST_TIMEOUT_S)
            except (TimeoutError, NodeUnavailableError) as e:
                logger.debug("fetch from leader %d failed: %s", leader, e)
                await self._backoff(leader)
                continue
            if response.error_code != ErrorCode.none:
                logger.debug("fetch from leader %d: %s", leader, ErrorCode(response.error_code).name)
                await self._backoff(leader)
                continue
            backoff = False
            by_id = {(p.topic_id, p.partition_id): p for p in partitions}
            for t in response.responses:
                for r in t.partitions:
                    p = by_id.get((str(t.topic_id), int(r.partition_index)))
                    if p is not None and p.leader_id == leader:
                        backoff |= not self._handle(p, r)
            if backoff:
                await self._backoff(leader)

    async def _backoff(self, leader: int) -> None:
        event = self._changed.get(leader)
        if event is None:
            await asyncio.sleep(BACKOFF_S)
            return
        event.clear()
        try:
            await asyncio.wait_for(event.wait(), BACKOFF_S)
        except TimeoutError:
            pass  # backoff over without a metadata change: fetch again

    def _request(self, partitions: list[Partition]) -> object:
        config = self._broker.config
        partition_max_bytes = config.get_int("replica.fetch.max.bytes")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for p in partitions:
            log = p.log
            epoch = log.latest_epoch()
            by_topic.setdefault(p.topic_id, []).append({
                "partition": p.partition_id,
                "current_leader_epoch": p.leader_epoch,
                "fetch_offset": log.log_end_offset,
                "last_fetched_epoch": -1 if epoch is None else epoch,
                "log_start_offset": log.log_start_offset,
                "partition_max_bytes": partition_max_bytes,
            })
        broker = self._broker
        return build(request_class(1, FETCH_VERSION), {
            "cluster_id": None,
            "replica_state": {"replica_id": broker.node_id, "replica_epoch": broker.lifecycle.broker_epoch},
            "max_wait": FETCH_MAX_WAIT_MS,
            "min_bytes": FETCH_MIN_BYTES,
            "max_bytes": config.get_int("replica.fetch.response.max.bytes"),
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic_id": uuid.UUID(tid), "partitions": parts} for tid, parts in by_topic.items()],
            "forgotten_topics_data": (),
            "rack_id": "",
        })

    def _handle(self, p: Partition, r: Any) -> bool:
        """Apply one partition's answer; False when the fetcher should back off."""
        log = p.log
        error = ErrorCode(r.error_code)
        try:
            diverging = r.diverging_epoch
            if diverging is not None and _is_set(diverging):
                target = truncate_to_divergence(log, int(diverging.epoch), int(diverging.end_offset),
                                                int(r.log_start_offset))
                logger.info("%s-%d: log diverges from leader %d after epoch %d; truncated to %d",
                            p.topic, p.partition_id, p.leader_id, int(diverging.epoch), target)
                return True
            if error == ErrorCode.offset_out_of_range:
                leader_start = int(r.log_start_offset)
                if leader_start > log.log_end_offset:
                    logger.info("%s-%d: behind the leader's log start %d; starting the log there",
                                p.topic, p.partition_id, leader_start)
                    log.truncate_fully_and_start_at(leader_start)
                elif int(r.high_watermark) >= 0 and log.log_end_offset > int(r.high_watermark):
                    log.truncate_to(max(log.high_watermark, int(r.high_watermark)))
                return True
            if error != ErrorCode.none:
                return False
            records = r.records
            if records:
                log.append_as_follower(bytes(records), now_ms=_now_ms())
            leader_hw = int(r.high_watermark)
            hw = min(leader_hw, log.log_end_offset)
            if hw > log.high_watermark:
                log.advance_high_watermark(hw)
            leader_start = int(r.log_start_offset)
            if log.log_start_offset < leader_start <= log.high_watermark:
                log.maybe_increment_log_start_offset(leader_start)
            if records:
                log.maybe_flush(_now_ms())
                p.wake_waiters()
            return True
        except StorageError as e:
            logger.warning("%s-%d: follower append failed: %s", p.topic, p.partition_id, e)
            return False


def truncate_to_divergence(log: Log, epoch: int, end_offset: int, leader_start: int) -> int:
    """Kafka's follower truncation: to the end of the last epoch both logs share (the smaller of the
    leader's and our own end of `epoch`), or to the leader's log start when nothing is shared."""
    if epoch < 0 or end_offset < 0:
        target = max(leader_start, 0)
    else:
        # our end of the largest epoch <= `epoch` (it may differ: the next fetch then narrows it down)
        own_epoch, own_end = log.end_offset_for_epoch(epoch)
        target = min(end_offset, own_end if own_epoch >= 0 else log.log_end_offset)
    target = min(target, log.log_end_offset)
    if target < log.log_start_offset:
        log.truncate_fully_and_start_at(max(target, leader_start))
    else:
        log.truncate_to(target)
    return target


def _is_set(diverging: Any) -> bool:
    """kio gives the default EpochEndOffset (-1/-1) when the leader did not send one."""
    return not (int(diverging.epoch) == -1 and int(diverging.end_offset) == -1)
