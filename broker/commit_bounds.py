"""Commits past the log end are refused: where each partition's log ends, as the group coordinator sees it.

Stricter than Kafka, from the seeds ("clients cannot commit arbitrary future positions without an explicitly
privileged reset operation"): an OffsetCommit or TxnOffsetCommit whose offset is greater than the partition's
log end offset gets OFFSET_OUT_OF_RANGE, unless it is an administrative reset (generation -1 and no member id
on an empty or unknown group: what `kafka-consumer-groups.sh --reset-offsets` and `samsa groups
reset-offsets` send; the handler audits those). `samsa.offset.commit.past.log.end.enable=true` gives Kafka's
behaviour back.

A consumer commits the offset after a record it read, and it read below the high watermark, so a commit is
at most the high watermark: a refusal needs proof the offset lies past the end. The coordinator is often not
the partition's leader, so where it ends is found, cheapest first:

1. this broker's replica of the partition (leader or follower): its log end offset;
2. the highest end this coordinator has learned for the partition (ends only grow, truncation aside, and a
   truncated tail was never below a consumer's high watermark);
3. the leader's answer to ListOffsets(latest), the high watermark, asked once per leader for all the
   partitions of one commit.

If the leader cannot be asked (unreachable, timed out, no leader), the commit is let through: a refusal must
never be a guess (a false refusal fails a healthy consumer's commit), and the next commit checks again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.replica_manager import ReplicaManager
    from samsa.broker.security.client import ClientSecurity

logger = logging.getLogger(__name__)

ENABLE_KEY = "samsa.offset.commit.past.log.end.enable"
LIST_OFFSETS_KEY = 2
LIST_OFFSETS_VERSION = 1  # v1: one timestamp per partition, answered with one offset (enough for LATEST)
LATEST_TIMESTAMP = -1
ASK_LEADER_TIMEOUT_S = 5.0
# Partitions whose learned end is kept; past it the oldest half is forgotten (it is a cache: a forgotten end is
# asked again).
MAX_KNOWN_ENDS = 100_000

TopicPartition = tuple[str, int]


class CommitBoundsBroker(Protocol):
    """What the bounds use of their broker (samsa.broker.broker.Broker is one)."""

    @property
    def node_id(self) -> int: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def inter_broker_security(self) -> ClientSecurity | None: ...


def is_administrative_reset(generation: int, member_id: str, group_is_empty: bool) -> bool:
    """Generation -1 and no member on a group without members: an admin tool's reset, which may move a group
    anywhere (Kafka's `kafka-consumer-groups.sh --reset-offsets` and `samsa groups reset-offsets`)."""
    return generation < 0 and not member_id and group_is_empty


class CommitBounds:
    def __init__(self, broker: CommitBoundsBroker) -> None:
        self._broker = broker
        self._known_end: dict[TopicPartition, int] = {}
        self._clients: dict[int, NodeClient] = {}

    @property
    def enabled(self) -> bool:
        return not self._broker.config.get_bool(ENABLE_KEY)

    async def past_log_end(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The partitions of `offsets` whose offset is past their log end, each with the end found."""
        if not self.enabled:
            return {}
        unsure: dict[TopicPartition, int] = {}
        past: dict[TopicPartition, int] = {}
        for tp, offset in offsets.items():
            local = self._broker.replica_manager.get_partition(*tp)
            end = max(self._known_end.get(tp, -1), local.log.log_end_offset if local is not None else -1)
            if offset <= end:
                continue
            if local is not None and local.is_leader:
                past[tp] = end  # the leader's own log: where it ends is known for sure
            else:
                unsure[tp] = offset
        if unsure:
            ends = await self._ask_leaders(unsure)
            for tp, offset in unsure.items():
                leader_end = ends.get(tp)
                if leader_end is not None and offset > leader_end:
                    past[tp] = leader_end
        return past

    def _learn(self, tp: TopicPartition, end: int) -> None:
        if len(self._known_end) >= MAX_KNOWN_ENDS and tp not in self._known_end:
            for old in list(self._known_end)[: MAX_KNOWN_ENDS // 2]:
                del self._known_end[old]
        if end > self._known_end.get(tp, -1):
            self._known_end[tp] = end

    async def _ask_leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        image = self._broker.image
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            topic = image.topics_by_name.get(tp[0])
            part = topic.partitions.get(tp[1]) if topic is not None else None
            if part is not None and part.leader >= 0 and part.leader != self._broker.node_id:
                by_leader.setdefault(part.leader, []).append(tp)
        answers = await asyncio.gather(*(self._ask(leader, tps) for leader, tps in by_leader.items()))
        ends: dict[TopicPartition, int] = {}
        for answer in answers:
            ends.update(answer)
        return ends

    async def _ask(self, leader_id: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        broker = self._broker.image.brokers.get(leader_id)
        if broker is None:
            return {}
        client = self._clients.get(leader_id)
        if client is None or (client.host, client.port) != (broker.host, broker.port):
            client = self._clients[leader_id] = NodeClient(
                broker.host, broker.port, client_id=f"broker-{self._broker.node_id}-commit-bounds",
                security=self._broker.inter_broker_security)
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append({"partition_index": partition, "timestamp": LATEST_TIMESTAMP})
        request = build(request_class(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION), {
            "replica_id": -1, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        try:
            response = await client.request(request, timeout_s=ASK_LEADER_TIMEOUT_S)
        except (TimeoutError, NodeUnavailableError) as e:
            logger.info("cannot ask broker %d where %d partition(s) end (%s): their commits are not checked",
                        leader_id, len(partitions), e)
            return {}
        ends: dict[TopicPartition, int] = {}
        for t in response.topics:
            for p in t.partitions:
                if ErrorCode(p.error_code) == ErrorCode.none and int(p.offset) >= 0:
                    tp = (t.name, int(p.partition_index))
                    ends[tp] = int(p.offset)
                    self._learn(tp, int(p.offset))
        return ends
