"""
Generated from ``group-coordinator/src/main/resources/common/message/StreamsGroupMetadataValue.json``.
"""

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class LastAssignmentConfig:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    key: str = field(metadata={"kafka_type": "string"})
    """Key of the config."""
    value: str = field(metadata={"kafka_type": "string"})
    """Value of the config."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The group epoch."""
    metadata_hash: i64 = field(metadata={"kafka_type": "int64"})
    """The hash of all topics in the group."""
    validated_topology_epoch: i32 = field(
        metadata={"kafka_type": "int32", "tag": 0}, default=i32(-1)
    )
    """The topology epoch whose topics are validated to be present in a valid configuration in the metadata."""
    last_assignment_configs: tuple[LastAssignmentConfig, ...] | None = field(
        metadata={"tag": 1}, default=()
    )
    """The last used configuration parameters as key-value pairs."""
    stored_description_topology_epoch: i32 = field(
        metadata={"kafka_type": "int32", "tag": 2}, default=i32(-1)
    )
    """The topology epoch the plugin holds, or -1 if none. -2 (uncertain) marks an interrupted plugin operation: it solicits a push like -1 and is delete-eligible like a stored epoch."""
    failed_description_topology_epoch: i32 = field(
        metadata={"kafka_type": "int32", "tag": 3}, default=i32(-1)
    )
    """The topology epoch whose description push the plugin permanently rejected (signalled by StreamsTopologyDescriptionPermanentFailureException), or -1 if none. Heartbeat-path solicitation is suppressed while this equals the current topology epoch, to avoid hot-looping."""
