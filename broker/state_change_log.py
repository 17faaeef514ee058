"""The cluster state changes an operator cares about, read off two metadata images and logged once.

Kafka writes these to its state-change logger (`state.change.logger`) from the controller: topics created
and deleted (ReplicationControlManager), partition leader and ISR changes (PartitionChangeBuilder), brokers
registered, fenced and unfenced, controllers registered and unregistered (ClusterControlManager). Samsa diffs
the image before and after each metadata update the active controller applies, so every change is logged by
one node of the cluster, with the old and the new value side by side. Unchanged topics and partitions are the
same objects in both images (MetadataImage.apply shares them), so the diff skips them by identity.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from samsa.broker.metadata.image import BrokerImage, MetadataImage, PartitionImage, TopicImage

logger = logging.getLogger("samsa.state.change")


def state_changes(old: MetadataImage, new: MetadataImage) -> Iterator[str]:
    """One sentence per change from `old` to `new`: topics, then partitions, then brokers, then controllers."""
    if old.topics_by_id is not new.topics_by_id:
        for topic_id, topic in old.topics_by_id.items():
            if topic_id not in new.topics_by_id:
                yield f"Deleted topic {topic.name} with topic ID {topic_id} and {len(topic.partitions)} partition(s)"
        for topic_id, topic in new.topics_by_id.items():
            before = old.topics_by_id.get(topic_id)
            if before is None:
                yield _created(topic)
            elif before is not topic:
                yield from _partition_changes(topic, before)
    if old.brokers is not new.brokers:
        yield from _broker_changes(old, new)
    if old.controllers is not new.controllers:
        for controller_id, c in new.controllers.items():
            if old.controllers.get(controller_id) != c:
                yield f"Registered controller {controller_id} at {c.listeners} (incarnation {c.incarnation_id})"
        for controller_id in old.controllers:
            if controller_id not in new.controllers:
                yield f"Unregistered controller {controller_id}"


def log_state_changes(old: MetadataImage, new: MetadataImage) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    for line in state_changes(old, new):
        logger.info("%s", line)


def _created(topic: TopicImage) -> str:
    replication = {len(p.replicas) for p in topic.partitions.values()}
    factor = replication.pop() if len(replication) == 1 else sorted(replication)
    return (f"Created topic {topic.name} with topic ID {topic.topic_id}, {len(topic.partitions)} partition(s) "
            f"and replication factor {factor}")


def _partition_changes(topic: TopicImage, before: TopicImage) -> Iterator[str]:
    for pid, p in topic.partitions.items():
        old = before.partitions.get(pid)
        if old is p:
            continue
        name = f"{topic.name}-{pid}"
        if old is None:
            yield (f"Created partition {name} with replicas {list(p.replicas)}, leader {p.leader} "
                   f"at leader epoch {p.leader_epoch}")
            continue
        yield from _partition_change(name, old, p)


def _partition_change(name: str, old: PartitionImage, new: PartitionImage) -> Iterator[str]:
    if new.leader != old.leader:
        what = "went offline (no leader)" if new.leader < 0 else f"leader moved from {old.leader} to {new.leader}"
        yield f"Partition {name}: {what} at leader epoch {new.leader_epoch} (was {old.leader_epoch})"
    elif new.leader_epoch != old.leader_epoch:
        yield f"Partition {name}: leader {new.leader} starts leader epoch {new.leader_epoch} (was {old.leader_epoch})"
    if new.isr != old.isr:
        added, removed = sorted(set(new.isr) - set(old.isr)), sorted(set(old.isr) - set(new.isr))
        kind = "expanded" if added and not removed else "shrunk" if removed and not added else "changed"
        yield (f"Partition {name}: ISR {kind} from {list(old.isr)} to {list(new.isr)} at leader epoch "
               f"{new.leader_epoch}, partition epoch {new.partition_epoch}")
    if new.replicas != old.replicas:
        yield f"Partition {name}: replicas changed from {list(old.replicas)} to {list(new.replicas)}"


def _broker_changes(old: MetadataImage, new: MetadataImage) -> Iterator[str]:
    for broker_id, b in new.brokers.items():
        before = old.brokers.get(broker_id)
        if before is b:
            continue
        if before is None or before.broker_epoch != b.broker_epoch:
            yield f"Registered broker {broker_id} at {b.host}:{b.port} with broker epoch {b.broker_epoch}" + (
                " (fenced)" if b.fenced else "")
        elif before.fenced != b.fenced:
            yield f"Broker {broker_id} {_fencing(b)} (broker epoch {b.broker_epoch})"
        if b.in_controlled_shutdown and (before is None or not before.in_controlled_shutdown):
            yield f"Broker {broker_id} is in controlled shutdown"
    for broker_id, b in old.brokers.items():
        if broker_id not in new.brokers:
            yield f"Unregistered broker {broker_id} (broker epoch {b.broker_epoch})"


def _fencing(b: BrokerImage) -> str:
    return "fenced" if b.fenced else "unfenced"
