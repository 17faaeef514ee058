"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range` (Kafka's UniformAssignor and
RangeAssignor in org.apache.kafka.coordinator.group.assignor).

An assignor maps each member to the partitions it should own (the group's target assignment) from the
members' subscriptions (topic ids) and the partition count of each subscribed topic. It is pure and
deterministic: the same input gives the same target, whatever the order of the dicts.

- `uniform` (Kafka's default, the first of group.consumer.assignors): every partition of a subscribed
  topic goes to one member subscribed to it, the members' counts differ by at most one where their
  subscriptions allow it, and a member keeps what it already has in the previous target as far as that
  balance allows (sticky), so a rebalance moves as few partitions as it can.
- `range`: per topic, the partitions are split into contiguous ranges over the members subscribed to
  it, in member id order; the first `partitions % members` members get one more (co-partitioning: the
  same member gets partition k of every topic with the same count).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from samsa.broker.group.records import TopicPartitions

UNIFORM = "uniform"
RANGE = "range"
# How many single-partition moves the balancing pass makes at most (each makes the spread smaller, so
# this only bounds a bug).
MAX_BALANCING_MOVES = 1_000_000


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What an assignor knows of a member: its subscribed topic ids and its previous target."""

    subscribed_topic_ids: frozenset[str]
    previous: TopicPartitions


Assignor = Callable[[Mapping[str, MemberSubscription], Mapping[str, int]], dict[str, TopicPartitions]]


def _freeze(owned: dict[str, dict[str, set[int]]]) -> dict[str, TopicPartitions]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in owned.items()}


def uniform(members: Mapping[str, MemberSubscription],
            partition_counts: Mapping[str, int]) -> dict[str, TopicPartitions]:
    order = sorted(members)
    owned: dict[str, dict[str, set[int]]] = {m: {} for m in order}
    counts = dict.fromkeys(order, 0)
    taken: set[tuple[str, int]] = set()
    # Stickiness first: each member keeps the partitions of its previous target that are still valid.
    for m in order:
        sub = members[m]
        for topic_id in sorted(sub.previous):
            if topic_id not in sub.subscribed_topic_ids or topic_id not in partition_counts:
                continue
            for p in sorted(sub.previous[topic_id]):
                if p < partition_counts[topic_id] and (topic_id, p) not in taken:
                    taken.add((topic_id, p))
                    owned[m].setdefault(topic_id, set()).add(p)
                    counts[m] += 1
    eligible: dict[str, list[str]] = {}
    for topic_id in sorted(partition_counts):
        subscribers = [m for m in order if topic_id in members[m].subscribed_topic_ids]
        if subscribers:
            eligible[topic_id] = subscribers
    # Then the free partitions, each to the least loaded member subscribed to its topic.
    for topic_id, subscribers in eligible.items():
        for p in range(partition_counts[topic_id]):
            if (topic_id, p) in taken:
                continue
            m = min(subscribers, key=lambda x: (counts[x], x))
            owned[m].setdefault(topic_id, set()).add(p)
            counts[m] += 1
    # Then balance: move a partition from the most to a least loaded member that may own it, while
    # that narrows the spread (a kept partition moves only when balance needs it).
    for _ in range(MAX_BALANCING_MOVES):
        moved = False
        for giver in sorted(order, key=lambda x: (-counts[x], x)):
            for topic_id in sorted(owned[giver]):
                receivers = [m for m in eligible.get(topic_id, ()) if counts[giver] - counts[m] > 1]
                if not receivers or not owned[giver][topic_id]:
                    continue
                receiver = min(receivers, key=lambda x: (counts[x], x))
                p = max(owned[giver][topic_id])
                owned[giver][topic_id].discard(p)
                owned[receiver].setdefault(topic_id, set()).add(p)
                counts[giver] -= 1
                counts[receiver] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    return _freeze(owned)


def range_assignor(members: Mapping[str, MemberSubscription],
                   partition_counts: Mapping[str, int]) -> dict[str, TopicPartitions]:
    owned: dict[str, dict[str, set[int]]] = {m: {} for m in sorted(members)}
    for topic_id in sorted(partition_counts):
        subscribers = [m for m in sorted(members) if topic_id in members[m].subscribed_topic_ids]
        if not subscribers:
            continue
        quota, extra = divmod(partition_counts[topic_id], len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                owned[m][topic_id] = set(range(start, start + size))
            start += size
    return _freeze(owned)


ASSIGNORS: dict[str, Assignor] = {UNIFORM: uniform, RANGE: range_assignor}
