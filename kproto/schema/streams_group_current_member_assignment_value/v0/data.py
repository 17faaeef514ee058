"""
Generated from ``group-coordinator/src/main/resources/common/message/StreamsGroupCurrentMemberAssignmentValue.json``.
"""

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskIds:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology ID."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of the input topics processed by this member."""
    assignment_epochs: tuple[i32, ...] | None = field(
        metadata={"kafka_type": "int32", "tag": 0}, default=()
    )
    """The epoch at which the partition was assigned to the member. Used to fence zombie commits requests. Of the same length as Partitions. Only defined for active tasks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupCurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The current member epoch that is expected from the member in the heartbeat request."""
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """If the last epoch bump is lost before reaching the member, the member will retry with the previous epoch."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """The member state. See StreamsGroupMember.MemberState for the possible values."""
    active_tasks: tuple[TaskIds, ...]
    """Currently assigned active tasks for this streams client."""
    standby_tasks: tuple[TaskIds, ...]
    """Currently assigned standby tasks for this streams client."""
    warmup_tasks: tuple[TaskIds, ...]
    """Currently assigned warm-up tasks for this streams client."""
    active_tasks_pending_revocation: tuple[TaskIds, ...]
    """The active tasks that must be revoked by this member."""
    standby_tasks_pending_revocation: tuple[TaskIds, ...]
    """The standby tasks that must be revoked by this member."""
    warmup_tasks_pending_revocation: tuple[TaskIds, ...]
    """The warmup tasks that must be revoked by this member."""
