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
    if len({m.subscribed_topic_ids for m in members.values()}) == 1:
        return _uniform_homogeneous(members, partition_counts)
    return _uniform_heterogeneous(members, partition_counts)


def _uniform_homogeneous(members: Mapping[str, MemberSubscription],
                         partition_counts: Mapping[str, int]) -> dict[str, TopicPartitions]:
    """Every member subscribes to the same topics (the common case, Kafka's OptimizedUniformAssignmentBuilder):
    each gets `partitions // members` or one more, keeping what it had up to that count; O(partitions)."""
    order = sorted(members)
    topics = sorted(t for t in next(iter(members.values())).subscribed_topic_ids if t in partition_counts)
    everything = [(t, p) for t in topics for p in range(partition_counts[t])]
    valid = set(everything)
    taken: set[tuple[str, int]] = set()
    previous: dict[str, list[tuple[str, int]]] = {}
    for m in order:
        mine = sorted((t, p) for t, ps in members[m].previous.items() for p in ps
                      if (t, p) in valid and (t, p) not in taken)
        taken.update(mine)
        previous[m] = mine
    quota, extra = divmod(len(everything), len(order))
    # The one-more slots go to the members that already hold the most, so fewer partitions move.
    by_holding = sorted(order, key=lambda m: (-len(previous[m]), m))
    target = {m: quota + (1 if rank < extra else 0) for rank, m in enumerate(by_holding)}
    owned = {m: previous[m][:target[m]] for m in order}
    kept = {tp for m in order for tp in owned[m]}
    free = iter(tp for tp in everything if tp not in kept)
    for m in order:
        while len(owned[m]) < target[m]:
            owned[m].append(next(free))
    out: dict[str, dict[str, set[int]]] = {m: {} for m in order}
    for m in order:
        for t, p in owned[m]:
            out[m].setdefault(t, set()).add(p)
    return _freeze(out)


def _uniform_heterogeneous(members: Mapping[str, MemberSubscription],
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
