"""The quorum's voters as KIP-853 stores them: VotersRecord and KRaftVersionRecord control records.

Kafka: VoterSet, ReplicaKey, Endpoints and KRaftControlRecordStateMachine. A voter is a replica key (node
id and directory id) with its listeners and the kraft.version range it supports. The log holds the set as
VotersRecord control records; the latest one in the log -- committed or not -- is the set in force, on the
leader and on every follower (KIP-853: a replica uses a voter set as soon as it is in its log, and goes
back to the previous one if the entry is truncated). A Samsa log without any VotersRecord uses the voters
the cluster was formed with (controller.quorum.voters), like Kafka's bootstrap checkpoint.

In the core's LogEntry, a VOTERS entry's payload is the VotersRecord (v0) bytes and a KRAFT_VERSION
entry's the KRaftVersionRecord (v0) bytes, exactly the control records' values on disk and on the wire.
A snapshot carries the voter set in force at its end offset (Snapshot.voters, the VotersRecord bytes).
"""

from __future__ import annotations

import base64
import io
import struct
import uuid
from dataclasses import dataclass

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0.data import Endpoint as RecordEndpoint
from kio.schema.voters_record.v0.data import KRaftVersionFeature, Voter, VotersRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, u16

from samsa.raft.invariants import InvariantViolation

__all__ = [
    "KRAFT_VERSION_MAX",
    "KRAFT_VERSION_MIN",
    "ZERO_DIRECTORY_ID",
    "VoterEndpoint",
    "VoterNode",
    "VoterSet",
    "decode_kraft_version",
    "encode_kraft_version",
    "frame_snapshot",
    "replica_key_text",
    "unframe_snapshot",
]

ZERO_DIRECTORY_ID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no directory id"
# The kraft.version range a Samsa node supports (features.py advertises the same).
KRAFT_VERSION_MIN = 0
KRAFT_VERSION_MAX = 1


@dataclass(frozen=True, slots=True, order=True)
class VoterEndpoint:
    name: str  # the listener name, e.g. CONTROLLER
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterNode:
    """Kafka: VoterSet.VoterNode -- a replica key, its listeners, its supported kraft.version range."""

    voter_id: int
    directory_id: uuid.UUID  # ZERO_DIRECTORY_ID: not known
    endpoints: tuple[VoterEndpoint, ...] = ()
    min_kraft_version: int = KRAFT_VERSION_MIN
    max_kraft_version: int = KRAFT_VERSION_MAX

    def endpoint(self, listener: str) -> VoterEndpoint | None:
        return next((e for e in self.endpoints if e.name == listener), None)

    def key_text(self) -> str:
        """Kafka's ReplicaKey.toString, used in its error messages."""
        directory = "<undefined>" if self.directory_id == ZERO_DIRECTORY_ID else _kafka_uuid(self.directory_id)
        return f"ReplicaKey(id={self.voter_id}, directoryId={directory})"


def replica_key_text(voter_id: int, directory_id: uuid.UUID) -> str:
    return VoterNode(voter_id, directory_id).key_text()


def _kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters, ordered by id (Kafka: VoterSet)."""

    voters: tuple[VoterNode, ...]

    def __post_init__(self) -> None:
        ids = [v.voter_id for v in self.voters]
        if not ids:
            raise InvariantViolation("a voter set needs at least one voter")
        if len(set(ids)) != len(ids):
            raise InvariantViolation(f"voter ids repeat in {ids}")
        if ids != sorted(ids):
            object.__setattr__(self, "voters", tuple(sorted(self.voters, key=lambda v: v.voter_id)))

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.voter_id for v in self.voters)

    def get(self, voter_id: int) -> VoterNode | None:
        return next((v for v in self.voters if v.voter_id == voter_id), None)

    def is_voter(self, voter_id: int, directory_id: uuid.UUID) -> bool:
        """Kafka 4.4: VoterSet.isVoter / VoterNode.isVoter -- the id matches and, where the voter's entry has a
        directory id, the replica's is the same one (a replica without one is then not that voter)."""
        v = self.get(voter_id)
        if v is None:
            return False
        return v.directory_id == ZERO_DIRECTORY_ID or v.directory_id == directory_id

    def add_voter(self, voter: VoterNode) -> VoterSet | None:
        """Kafka: VoterSet.addVoter -- None when the id is already a voter."""
        if voter.voter_id in self.ids:
            return None
        return VoterSet((*self.voters, voter))

    def update_voter(self, voter: VoterNode) -> VoterSet | None:
        """Kafka: VoterSet.updateVoter -- the voter with this id and a matching directory id (or none known yet)
        gets the new directory id, listeners and kraft.version range; None when there is no such voter."""
        old = self.get(voter.voter_id)
        if old is None or old.directory_id not in (ZERO_DIRECTORY_ID, voter.directory_id):
            return None
        return VoterSet(tuple(voter if v.voter_id == voter.voter_id else v for v in self.voters))

    def remove_voter(self, voter_id: int, directory_id: uuid.UUID) -> VoterSet | None:
        """Kafka: VoterSet.removeVoter -- None when no voter has exactly this replica key, or it is the last."""
        v = self.get(voter_id)
        if v is None or v.directory_id != directory_id or len(self.voters) == 1:
            return None
        return VoterSet(tuple(x for x in self.voters if x.voter_id != voter_id))

    def keys_text(self) -> str:
        """Kafka prints voterKeys() (a java.util.Set) in its messages."""
        return "[" + ", ".join(v.key_text() for v in self.voters) + "]"

    # -- VotersRecord ------------------------------------------------------------------------------

    def encode(self) -> bytes:
        record = VotersRecord(version=i16(0), voters=tuple(
            Voter(voter_id=BrokerId(v.voter_id), voter_directory_id=v.directory_id,
                  endpoints=tuple(RecordEndpoint(name=e.name, host=e.host, port=u16(e.port)) for e in v.endpoints),
                  k_raft_version_feature=KRaftVersionFeature(min_supported_version=i16(v.min_kraft_version),
                                                             max_supported_version=i16(v.max_kraft_version)))
            for v in self.voters))
        out = io.BytesIO()
        entity_writer(VotersRecord)(out, record)
        return out.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> VoterSet:
        """Raises ValueError for bytes that are not a VotersRecord v0 with at least one voter."""
        try:
            record, size = entity_reader(VotersRecord)(data, 0)
        except Exception as e:
            raise ValueError(f"unreadable VotersRecord: {e}") from e
        if size != len(data) or record.version != 0:
            raise ValueError(f"VotersRecord of version {record.version}, {len(data) - size} bytes left over")
        try:
            return cls(tuple(
                VoterNode(int(v.voter_id), v.voter_directory_id or ZERO_DIRECTORY_ID,
                          tuple(VoterEndpoint(e.name, e.host, int(e.port)) for e in v.endpoints),
                          int(v.k_raft_version_feature.min_supported_version),
                          int(v.k_raft_version_feature.max_supported_version))
                for v in record.voters))
        except InvariantViolation as e:
            raise ValueError(str(e)) from e


def encode_kraft_version(level: int) -> bytes:
    out = io.BytesIO()
    entity_writer(KRaftVersionRecord)(out, KRaftVersionRecord(version=i16(0), k_raft_version=i16(level)))
    return out.getvalue()


def decode_kraft_version(data: bytes) -> int:
    try:
        record, size = entity_reader(KRaftVersionRecord)(data, 0)
    except Exception as e:
        raise ValueError(f"unreadable KRaftVersionRecord: {e}") from e
    if size != len(data):
        raise ValueError("bytes after a KRaftVersionRecord")
    return int(record.k_raft_version)


# -- a snapshot's bytes, on disk and in FetchSnapshot ---------------------------------------------------
# Kafka puts the KRaftVersionRecord and VotersRecord at the start of the snapshot's records. A Samsa
# snapshot's payload is the state machine's bytes (JSON, starting with '[' or '{'); when the quorum has a
# voter set in its log, the payload is prefixed with this magic, the VotersRecord's length and bytes.
_SNAPSHOT_VOTERS_MAGIC = b"\x00SAMSA-VOTERS\x00"
_LENGTH = struct.Struct(">I")


def frame_snapshot(voters: bytes, data: bytes) -> bytes:
    if not voters:
        return data
    return _SNAPSHOT_VOTERS_MAGIC + _LENGTH.pack(len(voters)) + voters + data


def unframe_snapshot(raw: bytes) -> tuple[bytes, bytes]:
    """(voters, data) of a framed snapshot; raises ValueError if the frame is damaged."""
    if not raw.startswith(_SNAPSHOT_VOTERS_MAGIC):
        return b"", raw
    start = len(_SNAPSHOT_VOTERS_MAGIC)
    if len(raw) < start + _LENGTH.size:
        raise ValueError("snapshot voters frame cut short")
    (length,) = _LENGTH.unpack_from(raw, start)
    body = start + _LENGTH.size
    if len(raw) < body + length:
        raise ValueError("snapshot voters frame cut short")
    voters = raw[body : body + length]
    VoterSet.decode(voters)
    return voters, raw[body + length :]
