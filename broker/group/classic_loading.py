"""Replaying a classic group's `__consumer_offsets` records into the classic coordinator (Kafka's
GroupMetadataManager.replay and OffsetMetadataManager.replay for GroupMetadata and OffsetCommit), and the
two group changes the KIP-848 online migration makes to it (a group handed to the consumer protocol, a
downgraded group taken back)."""

from __future__ import annotations

from samsa.broker.group import offsets as offset_manager
from samsa.broker.group.classic_group import Group, GroupRecord, JoinResult, SyncResult
from samsa.broker.group.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitValue, encode_key
from samsa.broker.group.state import GroupState
from samsa.kproto.errors import ErrorCode


class ClassicLoading:
    """GroupCoordinator's loading half (coordinator.py holds the rest)."""

    groups: dict[str, Group]
    _records: list[GroupRecord]

    def _get_or_create(self, group_id: str, now_ms: int) -> Group:
        raise NotImplementedError

    def load_offset(self, group_id: str, topic: str, partition: int, value: OffsetCommitValue | None,
                    now_ms: int) -> None:
        """Replay one offset commit record (None: tombstone) from `__consumer_offsets`."""
        if value is not None:
            offset_manager.replay_offset(self._get_or_create(group_id, now_ms), (topic, partition), value)
        elif group_id in self.groups:
            self.groups[group_id].offsets.pop((topic, partition), None)

    def load_group(self, group_id: str, value: GroupMetadataValue | None, now_ms: int) -> None:
        """Replay one group metadata record (None: tombstone: the group was deleted, or handed to the consumer
        protocol, whose offsets stay -- Kafka keeps offsets apart from groups)."""
        if value is None:
            group = self.groups.pop(group_id, None)
            if group is not None and group.offsets:
                self._get_or_create(group_id, now_ms).offsets = group.offsets
            return
        self._get_or_create(group_id, now_ms).replay(value, now_ms)

    def finish_loading(self, now_ms: int) -> None:
        """After replay: groups that hold nothing any more are dropped, like Kafka's loader does."""
        for group in list(self.groups.values()):
            if group.state is GroupState.EMPTY and not group.offsets and group.generation_id == 0:
                del self.groups[group.group_id]

    # --- KIP-848 online migration ---------------------------------------------------------------

    def emit(self, record: GroupRecord) -> None:
        """Queue a record of the consumer group coordinator: both write to `__consumer_offsets` in one order."""
        self._records.append(record)

    def hand_over(self, group_id: str, now_ms: int) -> Group:
        """The group's members leave the classic coordinator for a consumer group (Kafka's convertToConsumerGroup):
        a member waiting in JoinGroup or SyncGroup is told REBALANCE_IN_PROGRESS and rejoins, the group's record is
        tombstoned, and what stays here holds only the group's offsets. Returns the group as it was."""
        old = self.groups[group_id]
        for member in old.members.values():
            if member.join_waiter is not None:
                waiter, member.join_waiter = member.join_waiter, None
                waiter.complete(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
            if member.sync_waiter is not None:
                sync, member.sync_waiter = member.sync_waiter, None
                sync.complete(SyncResult(ErrorCode.rebalance_in_progress))
        self._records.append(GroupRecord(group_id, encode_key(GroupMetadataKey(group_id)), None))
        holder = Group(group_id, state_timestamp_ms=now_ms)
        holder.offsets = old.offsets
        self.groups[group_id] = holder
        return old

    def take_back(self, group: Group) -> None:
        """A downgraded consumer group becomes this classic group (Kafka's convertToClassicGroup); it keeps the
        offsets the id held and its GroupMetadata record is written."""
        holder = self.groups.get(group.group_id)
        if holder is not None:
            group.offsets = holder.offsets
        self.groups[group.group_id] = group
        self._records.append(group.metadata_record())
