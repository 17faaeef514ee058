"""ConsumerGroupCurrentMemberAssignmentValue (record type 8), a member's current assignment, in Kafka 4.3+'s
format (KIP-1251):

    version int16 (0), member_epoch int32, previous_member_epoch int32, state int8,
    assigned [TopicPartitions], pending_revocation [TopicPartitions], tagged fields (none)

    TopicPartitions: topic_id uuid, [partition int32],
                     tagged fields: tag 0 AssignmentEpochs, [int32] (nullable, default null), one per partition:
                     the epoch at which the member was assigned it

Kafka writes the tag for every topic. A record without it (Kafka before 4.3, or Samsa before this) or
with a list of the wrong length reads as every partition assigned at the member epoch (at least 0), as
Kafka's Utils.assignmentFromTopicPartitions does.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.broker.group.records import (
    _I16,
    _I32,
    TopicPartitions,
    _flexible,
    _Reader,
    _uvarint,
)

ASSIGNMENT_EPOCHS_TAG = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions
    partitions_pending_revocation: TopicPartitions
    # (topic id, partition) -> assignment epoch, for the partitions of both lists.
    assignment_epochs: Mapping[tuple[str, int], int] = field(default_factory=dict)


def _topics(topics: TopicPartitions, epochs: Mapping[tuple[str, int], int], default_epoch: int) -> bytes:
    out = [_uvarint(len(topics) + 1)]
    for topic_id in sorted(topics):
        parts = sorted(topics[topic_id])
        tag = _uvarint(len(parts) + 1) + b"".join(_I32.pack(epochs.get((topic_id, p), default_epoch))
                                                  for p in parts)
        out += [uuid.UUID(topic_id).bytes, _uvarint(len(parts) + 1), b"".join(_I32.pack(p) for p in parts),
                b"\x01", _uvarint(ASSIGNMENT_EPOCHS_TAG), _uvarint(len(tag)), tag]
    return b"".join(out)


def encode_current_member_assignment_value(value: ConsumerGroupCurrentMemberAssignmentValue) -> bytes:
    default_epoch = max(value.member_epoch, 0)
    return (_I16.pack(0) + _I32.pack(value.member_epoch) + _I32.pack(value.previous_member_epoch)
            + struct.pack(">b", value.state)
            + _topics(value.assigned_partitions, value.assignment_epochs, default_epoch)
            + _topics(value.partitions_pending_revocation, value.assignment_epochs, default_epoch) + b"\x00")


def _read_topics(r: _Reader, default_epoch: int, epochs: dict[tuple[str, int], int]) -> TopicPartitions:
    topics: TopicPartitions = {}
    for _ in range(r.array_len()):
        topic_id = str(uuid.UUID(bytes=r._take(16)))
        partitions = [r.i32() for _ in range(r.array_len())]
        topics[topic_id] = frozenset(partitions)
        assigned_at: list[int] | None = None
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            body = _Reader(r._take(size), flexible=True)
            if tag == ASSIGNMENT_EPOCHS_TAG:
                n = body.array_len()
                assigned_at = None if n < 0 else [body.i32() for _ in range(n)]
        if assigned_at is None or len(assigned_at) != len(partitions):
            assigned_at = [default_epoch] * len(partitions)
        epochs.update(((topic_id, p), e) for p, e in zip(partitions, assigned_at, strict=True))
    return topics


def decode_current_member_assignment_value(data: bytes) -> ConsumerGroupCurrentMemberAssignmentValue:
    r = _flexible(data)
    epoch, previous = r.i32(), r.i32()
    state = struct.unpack(">b", r._take(1))[0]
    epochs: dict[tuple[str, int], int] = {}
    assigned = _read_topics(r, max(epoch, 0), epochs)
    pending = _read_topics(r, max(epoch, 0), epochs)
    r.skip_tags()
    return ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, int(state), assigned, pending, epochs)
