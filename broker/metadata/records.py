"""Metadata records: the facts appended to `__cluster_metadata`, one JSON object per record.

They mirror Kafka's KRaft records (TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord,
PartitionChangeRecord, ProducerIdsRecord, AccessControlEntryRecord, ...) by name and field. Each record
value carries its type and version so that a later version of Samsa can still replay an older log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str  # UUID, canonical string


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    topic_id: str
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # An ongoing reassignment (Kafka's removingReplicas/addingReplicas; `replicas` is then the target
    # followed by the replicas being removed). Absent from records written before reassignments.
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    topic_id: str
    partition_id: int
    isr: tuple[int, ...] | None
    leader: int | None
    replicas: tuple[int, ...] | None
    removing_replicas: tuple[int, ...] | None = None  # None: unchanged; (): the reassignment ended
    adding_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: str


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource_type: int
    resource_name: str
    name: str
    value: str | None  # None deletes the override


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker (re)registered: a new incarnation gets a new broker_epoch and starts fenced."""

    broker_id: int
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None
    fenced: bool
    registered_at: int = -1  # a snapshot keeps the original registration's offset; -1: this record's


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """Kafka's BrokerRegistrationChangeRecord: fenced True/False, or None for unchanged."""

    broker_id: int
    broker_epoch: int
    fenced: bool | None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class RegisterControllerRecord:
    """Kafka's RegisterControllerRecord (KIP-919): a controller and its endpoints, "NAME://host:port,..."."""

    controller_id: int
    incarnation_id: str
    listeners: str


@dataclass(frozen=True, slots=True)
class UnregisterControllerRecord:
    """Kafka's UnregisterControllerRecord (UnregisterController, key 94): the registration is removed."""

    controller_id: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """Kafka's AccessControlEntryRecord: one ACL, by id; the codes are Kafka's (samsa.broker.security.acl)."""

    id: str  # UUID, canonical string
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    id: str


@dataclass(frozen=True, slots=True)
class BrokerEndpointsRecord:
    """Every listener a registered broker advertises, "NAME://host:port,..." (the endpoints of Kafka's
    RegisterBrokerRecord, which RegisterBrokerRecord's host/port, the inter-broker listener's, predate).
    Written with the registration; a new registration without one leaves the broker with its host/port only."""

    broker_id: int
    broker_epoch: int
    listeners: str


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """Kafka's UserScramCredentialRecord: one user's credential for one SCRAM mechanism (RFC 5802's salt,
    StoredKey, ServerKey and iteration count; never the password). Bytes are base64 text in the JSON."""

    name: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """Kafka's FeatureLevelRecord: `name` is finalized at `feature_level` (0 takes it out of the finalized set)."""

    name: str
    feature_level: int


MetadataRecord = (
    TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord | ConfigRecord | ProducerIdsRecord
    | RegisterBrokerRecord | BrokerRegistrationChangeRecord | UnregisterBrokerRecord
    | AccessControlEntryRecord | RemoveAccessControlEntryRecord | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord | BrokerEndpointsRecord | FeatureLevelRecord
    | RegisterControllerRecord | UnregisterControllerRecord
)

_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord, ConfigRecord,
                ProducerIdsRecord, RegisterBrokerRecord, BrokerRegistrationChangeRecord, UnregisterBrokerRecord,
                AccessControlEntryRecord, RemoveAccessControlEntryRecord,
                UserScramCredentialRecord, RemoveUserScramCredentialRecord, BrokerEndpointsRecord, FeatureLevelRecord,
                RegisterControllerRecord, UnregisterControllerRecord)
}
_TUPLE_FIELDS = {"replicas", "isr", "removing_replicas", "adding_replicas"}
# Fields added later, left out of the JSON at their default (PartitionRecord's (), PartitionChangeRecord's
# None; a change's () is kept) so that records which do not use them encode exactly as before.
_OMITTED_AT_DEFAULT = {
    (cls, f.name): f.default for cls in (PartitionRecord, PartitionChangeRecord) for f in fields(cls)
    if f.name in ("removing_replicas", "adding_replicas")
}
RECORD_VERSION = 0


# Each record type's field names: reading them directly is several times faster than asdict, whose
# deep copy of every tuple made a 10,000-partition CreateTopics spend half a second encoding.
_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {cls: tuple(f.name for f in fields(cls)) for cls in _TYPES.values()}


def encode_record(record: MetadataRecord) -> bytes:
    body = {"type": type(record).__name__, "version": RECORD_VERSION,
            **{name: getattr(record, name) for name in _FIELD_NAMES[type(record)]}}
    for (cls, key), default in _OMITTED_AT_DEFAULT.items():
        if type(record) is cls and body[key] == default:
            del body[key]
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def decode_record(data: bytes) -> MetadataRecord:
    return _from_json(json.loads(data))


def encode_records(records: Sequence[MetadataRecord]) -> bytes:
    """One Raft entry: the records of one controller operation, applied together or not at all."""
    return b"[" + b",".join(encode_record(r) for r in records) + b"]"


def decode_records(data: bytes) -> list[MetadataRecord]:
    """An entry's records; a single object is one record (what the pre-Raft single-node log wrote)."""
    body = json.loads(data)
    if isinstance(body, list):
        return [_from_json(item) for item in body]
    return [_from_json(body)]


def _from_json(body: dict[str, Any]) -> MetadataRecord:
    cls = _TYPES[body.pop("type")]
    body.pop("version", None)
    for key in _TUPLE_FIELDS & body.keys():
        if body[key] is not None:
            body[key] = tuple(body[key])
    record: MetadataRecord = cls(**body)
    return record
