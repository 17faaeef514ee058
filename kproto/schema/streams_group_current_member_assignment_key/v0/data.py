"""
Generated from ``group-coordinator/src/main/resources/common/message/StreamsGroupCurrentMemberAssignmentKey.json``.
"""

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupCurrentMemberAssignmentKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    """The group ID."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member ID."""
