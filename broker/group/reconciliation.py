"""Moving a member from its current assignment towards the target (Kafka's CurrentAssignmentBuilder).

The rule that keeps a partition from having two owners: a member is first asked to revoke what the
target takes from it (UNREVOKED_PARTITIONS, its epoch unchanged); only once its heartbeat no longer
reports those partitions does it move to the target epoch and get the partitions the target adds,
and of those only the ones no other member still holds (the rest wait: UNRELEASED_PARTITIONS).

KIP-1251: a partition the member keeps (or is revoking) keeps the epoch it was assigned at; one it gets is
assigned at the target epoch.

Kafka 4.4: the member's subscription bounds what it may keep. A topic it no longer subscribes to (by name, or
through its regex's resolved topics) counts as absent from the target, even while the target was computed
before the change; and when the subscription changes while the member is reconciled (or still revoking), the
partitions of such topics are taken from it at once, revoked if it still reports them (`subscription_changed`).
A partition the target gives back while the member itself is still revoking it is not waited for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Protocol

from samsa.broker.group.consumer_group import ConsumerGroupMember, MemberState, epochs_for, without_empty
from samsa.broker.group.records import TopicPartitions

# The partitions a heartbeat says the member owns (topic id -> partitions); None: not sent this time.
Owned = Mapping[str, frozenset[int]] | None


class _Topic(Protocol):
    @property
    def topic_id(self) -> str: ...


def subscribed_topic_ids(member: ConsumerGroupMember, resolved_regexes: Mapping[str, frozenset[str]],
                         topics_by_name: Mapping[str, _Topic]) -> set[str]:
    """Kafka's CurrentAssignmentBuilder.subscribedTopicIds: the member's topic names, and its regex's resolved
    topics, that the metadata image has."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= resolved_regexes.get(member.subscribed_topic_regex, frozenset())
    return {topics_by_name[n].topic_id for n in names if n in topics_by_name}


class FencedMemberError(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def owns_any(owned: Owned, partitions: TopicPartitions) -> bool:
    """Whether the member (as its heartbeat reports) still holds any of `partitions`; not knowing
    (no owned partitions in the request) counts as holding them."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned.items() for p in ps)


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: TopicPartitions,
              current_partition_epoch: Callable[[str, int], int], owned: Owned,
              subscribed_topic_ids: Collection[str], subscription_changed: bool = False) -> ConsumerGroupMember:
    """The member's next state towards `target` (computed at `target_epoch`); `subscribed_topic_ids`: the topics
    of its subscription as the metadata image has them; `subscription_changed`: this heartbeat changed its topic
    names or regex."""
    target = {t: ps for t, ps in target.items() if t in subscribed_topic_ids}
    match member.state:
        case MemberState.STABLE:
            if member.member_epoch != target_epoch:
                return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
            if subscription_changed:
                return _drop_unsubscribed(member, subscribed_topic_ids, owned)
            return member
        case MemberState.UNREVOKED_PARTITIONS:
            if owns_any(owned, member.partitions_pending_revocation):
                if subscription_changed:
                    return _drop_unsubscribed(member, subscribed_topic_ids, owned)
                return member
            # Revoked: on to the target; a further revocation it asks for keeps the member's epoch (4.4's
            # computeNextAssignment(memberEpoch, ...)), it does not invent the epoch after it.
            return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
        case MemberState.UNRELEASED_PARTITIONS:
            return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
        case _:
            if owned is None or owned:
                raise FencedMemberError("The consumer group member is in a unknown state. "
                                        "The member must abandon all its partitions and rejoin.")
            return _next(member, target_epoch, target_epoch, target, current_partition_epoch, owned)


def _drop_unsubscribed(member: ConsumerGroupMember, subscribed_topic_ids: Collection[str],
                       owned: Owned) -> ConsumerGroupMember:
    """Kafka 4.4's CurrentAssignmentBuilder.updateCurrentAssignment: the partitions of topics the member no longer
    subscribes to leave its assignment at once, without waiting for a new target; they join its pending
    revocations if it still reports any of those, else they are simply gone. The epoch does not move."""
    dropped = {t: ps for t, ps in member.assigned_partitions.items() if t not in subscribed_topic_ids}
    if not dropped:
        return member
    kept = {t: ps for t, ps in member.assigned_partitions.items() if t in subscribed_topic_ids}
    pending = dict(member.partitions_pending_revocation)
    for topic_id, ps in dropped.items():
        pending[topic_id] = pending.get(topic_id, frozenset()) | ps
    # Kafka's Builder.updateMemberEpoch with the same epoch: the previous epoch becomes the current one.
    if owns_any(owned, pending):
        return replace(_with_epoch(member, member.member_epoch), state=MemberState.UNREVOKED_PARTITIONS,
                       assigned_partitions=kept, partitions_pending_revocation=pending,
                       assignment_epochs=epochs_for(member, kept, pending, member.member_epoch))
    return replace(_with_epoch(member, member.member_epoch), assigned_partitions=kept,
                   assignment_epochs=epochs_for(member, kept, member.partitions_pending_revocation,
                                                member.member_epoch))


def _with_epoch(member: ConsumerGroupMember, epoch: int) -> ConsumerGroupMember:
    """Kafka's Builder.updateMemberEpoch: the previous epoch is remembered when the epoch moves."""
    return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch)


def _next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: TopicPartitions,
          current_partition_epoch: Callable[[str, int], int], owned: Owned) -> ConsumerGroupMember:
    assigned: dict[str, set[int]] = {}
    revoking: dict[str, set[int]] = {}
    pending: dict[str, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned_partitions):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned_partitions.get(topic_id, frozenset())
        keep = set(current & wanted)
        assigned[topic_id] = keep
        revoking[topic_id] = set(current - keep)
        new = set(wanted - keep)
        # Held by another member; one this member is still revoking itself is not waited for.
        revoking_here = member.partitions_pending_revocation.get(topic_id, frozenset())
        held = {p for p in new if current_partition_epoch(topic_id, p) != -1 and p not in revoking_here}
        unreleased = unreleased or bool(held)
        pending[topic_id] = new - held
    to_revoke = without_empty(revoking)
    to_assign = without_empty(pending)
    if to_revoke and owns_any(owned, to_revoke):
        # Revoke first; the member stays at its epoch until its heartbeat shows the partitions gone.
        kept = without_empty(assigned)
        return replace(_with_epoch(member, epoch), state=MemberState.UNREVOKED_PARTITIONS,
                       assigned_partitions=kept, partitions_pending_revocation=to_revoke,
                       assignment_epochs=epochs_for(member, kept, to_revoke, target_epoch))
    for topic_id, ps in to_assign.items():
        assigned.setdefault(topic_id, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    now_assigned = without_empty(assigned)
    return replace(_with_epoch(member, target_epoch), state=state, assigned_partitions=now_assigned,
                   partitions_pending_revocation={},
                   assignment_epochs=epochs_for(member, now_assigned, {}, target_epoch))
