"""Broker registrations, heartbeats and fencing, as the active controller decides them.

Mirrors Kafka's ClusterControlManager and the broker half of ReplicationControlManager: a broker
(re)registers with a new epoch, stays in its session by heartbeating, and is fenced when the session
ends; leadership and ISR membership then move off it (handleBrokerFenced / handleBrokerShutdown),
and come back to it when it has caught up (handleBrokerUnfenced).
"""

from __future__ import annotations

import logging

from samsa.broker.controller_types import ControllerCore, HeartbeatResult, Pending
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import (
    BROKER_RESOURCE,
    BrokerEndpointsRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from samsa.kproto.errors import ErrorCode

logger = logging.getLogger(__name__)


class ClusterControl:
    """Broker sessions (kept by the active controller only) and the records that follow from them."""

    def __init__(self, core: ControllerCore, node_id: int) -> None:
        self._core = core
        self.node_id = node_id
        # broker id -> when its session ends (monotonic ms), kept by the active controller only
        self._sessions: dict[int, float] = {}
        self.unclean_elections = 0

    def register_broker(self, broker_id: int, incarnation_id: str, host: str, port: int,
                        rack: str | None, now_ms: float, listeners: str = "") -> Pending[int]:
        """A broker (re)starts: a new registration with a new epoch, fenced until it catches up. `listeners`
        ("NAME://host:port,...") are all its listeners, host:port its inter-broker one."""
        self._core.require_active()
        image = self._core.image
        old = image.brokers.get(broker_id)
        if old is not None and old.incarnation_id == incarnation_id:
            self._sessions[broker_id] = now_ms + self._session_timeout_ms()
            return Pending(old.broker_epoch, None)
        epoch = max([b.broker_epoch for b in image.brokers.values()] + [image.offset]) + 1
        records: list[MetadataRecord] = [RegisterBrokerRecord(broker_id, epoch, incarnation_id, host, port, rack, True)]
        if listeners:
            records.append(BrokerEndpointsRecord(broker_id, epoch, listeners))
        if image.offset < 0 and not image.brokers and not image.configs:
            # A brand-new cluster (Kafka writes this at `storage format`, KIP-966): the cluster-wide dynamic
            # min.insync.replicas, from this node's static config, so topics report it as Kafka 4.1's do.
            records.insert(0, ConfigRecord(BROKER_RESOURCE, "", "min.insync.replicas",
                                           self._core.config.get("min.insync.replicas")))
        if old is not None:
            # A new incarnation may have lost what the old one had not flushed: it leaves the ISRs
            # (leadership moves to another in-sync replica) and rejoins once its leaders see it caught up.
            records += self._move_leaders_away(image, broker_id, only_to_successor=True)
        self._sessions[broker_id] = now_ms + self._session_timeout_ms()
        return self._core.commit(epoch, records)

    def _session_timeout_ms(self) -> int:
        return self._core.config.get_int("broker.session.timeout.ms")

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, now_ms: float) -> tuple[ErrorCode, Pending[HeartbeatResult] | None]:
        self._core.require_active()
        image = self._core.image
        registration = image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch, None
        self._sessions[broker_id] = now_ms + self._session_timeout_ms()
        caught_up = metadata_offset >= registration.registration_offset
        records: list[MetadataRecord] = []
        fenced = registration.fenced
        if want_shut_down:
            # Controlled shutdown (Kafka): leadership moves to another in-sync replica first, then the
            # broker may stop. A partition with no other in-sync replica keeps its leader until the
            # session expires (a quick restart then finds it unchanged).
            records += self._move_leaders_away(image, broker_id, only_to_successor=True)
            if not registration.in_controlled_shutdown:
                records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, None, True))
        elif want_fence and not fenced:
            records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, True))
            records += self._move_leaders_away(image, broker_id)
            fenced = True
        elif fenced and caught_up and not want_fence:
            records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, False))
            fenced = False
            records += self._elect_offline_leaders(image, broker_id)
        should_shut_down = want_shut_down and not any(
            p.leader == broker_id for t in image.topics_by_id.values() for p in t.partitions.values()
            if len(p.isr) > 1)
        if should_shut_down and not fenced:
            # It stops now: fenced at once rather than after its session, so acks=all waits on
            # partitions it followed end with this ISR change instead of a timeout.
            records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, True))
            fenced = True
        return ErrorCode.none, self._core.commit(HeartbeatResult(caught_up, fenced, should_shut_down), records)

    def fence_expired_brokers(self, now_ms: float) -> Pending[list[int]] | None:
        """Fence every broker whose session ended (called periodically on the active controller)."""
        if not self._core.active:
            self._sessions.clear()
            return None
        image = self._core.image
        records: list[MetadataRecord] = []
        fenced: list[int] = []
        for broker in image.brokers.values():
            if broker.fenced or broker.broker_id == self.node_id:
                continue  # this node's own broker lives exactly as long as this controller
            deadline = self._sessions.get(broker.broker_id)
            if deadline is None:
                # A new active controller gives every broker a full session to find it.
                self._sessions[broker.broker_id] = now_ms + self._session_timeout_ms()
                continue
            if now_ms >= deadline:
                logger.warning("fencing broker %d: no heartbeat for %d ms", broker.broker_id,
                               self._session_timeout_ms())
                records.append(BrokerRegistrationChangeRecord(broker.broker_id, broker.broker_epoch, True))
                records += self._move_leaders_away(image, broker.broker_id)
                fenced.append(broker.broker_id)
                # Until the commit shows it fenced, do not propose the same again every pass; if the
                # write is lost (leadership changed) the next session timeout proposes it again.
                self._sessions[broker.broker_id] = now_ms + self._session_timeout_ms()
        if not records:
            return None
        return self._core.commit(fenced, records)

    def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, Pending[None] | None]:
        """UnregisterBroker (kafka-cluster unregister): the registration is removed, fenced or not, after its
        leadership and ISR membership move off it as when it is fenced (Kafka's
        ReplicationControlManager.unregisterBroker). A broker still running finds its epoch stale at its next
        heartbeat and, as Kafka's, stays unregistered until it restarts."""
        self._core.require_active()
        image = self._core.image
        registration = image.brokers.get(broker_id)
        if registration is None:
            return ErrorCode.broker_id_not_registered, None
        records = self._move_leaders_away(image, broker_id)
        records.append(UnregisterBrokerRecord(broker_id, registration.broker_epoch))
        self._sessions.pop(broker_id, None)
        return ErrorCode.none, self._core.commit(None, records)

    def _move_leaders_away(self, image: MetadataImage, broker_id: int, *,
                           only_to_successor: bool = False) -> list[MetadataRecord]:
        """Leadership and ISR membership leave `broker_id`: a new leader from the rest of the ISR, else
        none (offline) — or, with unclean.leader.election.enable, any other live replica."""
        live = set(image.live_brokers()) - {broker_id}
        records: list[MetadataRecord] = []
        for topic in image.topics_by_id.values():
            for p in topic.partitions.values():
                if broker_id not in p.isr and p.leader != broker_id:
                    continue
                isr = tuple(r for r in p.isr if r != broker_id)
                candidates = [r for r in isr if r in live]
                if only_to_successor and not candidates:
                    continue
                leader = p.leader
                if p.leader == broker_id or p.leader not in live:
                    if candidates:
                        leader = candidates[0]
                    elif self._core.unclean_allowed(image, topic.name):
                        others = [r for r in p.replicas if r in live]
                        leader = others[0] if others else -1
                        if others:
                            self.unclean_elections += 1
                            logger.warning("unclean leader election for %s-%d: %d leads from outside the ISR",
                                           topic.name, p.partition_id, leader)
                            isr = (leader,)
                    else:
                        leader = -1
                if not isr:
                    # Kafka keeps the last ISR member when no one else is in sync (it may come back).
                    isr = (broker_id,) if leader == -1 else (leader,)
                if leader != p.leader or isr != p.isr:
                    records.append(PartitionChangeRecord(topic.topic_id, p.partition_id, isr,
                                                         leader if leader != p.leader else None, None))
        return records

    def _elect_offline_leaders(self, image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
        """A broker came back: partitions without a leader whose ISR holds it get it as leader."""
        records: list[MetadataRecord] = []
        for topic in image.topics_by_id.values():
            for p in topic.partitions.values():
                if p.leader == -1 and broker_id in p.isr:
                    records.append(PartitionChangeRecord(topic.topic_id, p.partition_id, None, broker_id, None))
        return records
