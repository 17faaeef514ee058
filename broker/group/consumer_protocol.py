"""Reading the consumer protocol's subscription and assignment bytes (ConsumerProtocolSubscription /
ConsumerProtocolAssignment v0-v3), which the coordinator otherwise passes through untouched.

OffsetDelete (is the topic subscribed?), offset expiry and the `samsa groups` tools look inside, and KIP-848's
online migration, which turns a classic member's subscription into a consumer group member's and its target
assignment back into assignment bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _read_str(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return "", pos
    return buf[pos:pos + n].decode(), pos + n


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer subscription, or None when the bytes are not one."""
    try:
        pos = 2  # version
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        topics = set()
        for _ in range(max(count, 0)):
            topic, pos = _read_str(metadata, pos)
            topics.add(topic)
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> list[tuple[str, list[int]]] | None:
    """The (topic, partitions) of a consumer assignment, or None when the bytes are not one."""
    if not assignment:
        return []
    try:
        pos = 2
        (count,) = _I32.unpack_from(assignment, pos)
        pos += 4
        out = []
        for _ in range(max(count, 0)):
            topic, pos = _read_str(assignment, pos)
            (n,) = _I32.unpack_from(assignment, pos)
            pos += 4
            parts = [int(_I32.unpack_from(assignment, pos + 4 * i)[0]) for i in range(max(n, 0))]
            pos += 4 * max(n, 0)
            out.append((topic, parts))
        return out
    except (struct.error, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class Subscription:
    """ConsumerProtocolSubscription v0-v3: topics; v1 adds owned partitions, v2 the generation, v3 the rack."""

    version: int
    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    rack_id: str | None = None


def parse_subscription(metadata: bytes) -> Subscription | None:
    """The subscription a classic consumer joined with, or None when the bytes are not one (Kafka's
    ConsumerProtocol.deserializeConsumerProtocolSubscription; a newer version is read as the newest known)."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        pos = 2
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        topics = []
        for _ in range(max(count, 0)):
            topic, pos = _read_str(metadata, pos)
            topics.append(topic)
        (user_data,) = _I32.unpack_from(metadata, pos)
        pos += 4 + max(user_data, 0)
        owned: list[tuple[str, tuple[int, ...]]] = []
        rack_id = None
        if version >= 1:
            (count,) = _I32.unpack_from(metadata, pos)
            pos += 4
            for _ in range(max(count, 0)):
                topic, pos = _read_str(metadata, pos)
                (n,) = _I32.unpack_from(metadata, pos)
                pos += 4
                owned.append((topic, tuple(int(_I32.unpack_from(metadata, pos + 4 * i)[0]) for i in range(max(n, 0)))))
                pos += 4 * max(n, 0)
        if version >= 2:
            pos += 4  # generation id
        if version >= 3:
            (n,) = _I16.unpack_from(metadata, pos)
            rack_id = None if n < 0 else metadata[pos + 2:pos + 2 + n].decode()
        return Subscription(version, tuple(topics), tuple(owned), rack_id)
    except (struct.error, UnicodeDecodeError):
        return None


def encode_assignment(version: int, partitions: list[tuple[str, list[int]]]) -> bytes:
    """A ConsumerProtocolAssignment (the same fields in v0-v3; Kafka writes the member's subscription version,
    at most 3) with no user data."""
    out = [_I16.pack(min(max(version, 0), 3)), _I32.pack(len(partitions))]
    for topic, parts in partitions:
        name = topic.encode()
        out += [_I16.pack(len(name)), name, _I32.pack(len(parts)), b"".join(_I32.pack(p) for p in parts)]
    out.append(_I32.pack(-1))
    return b"".join(out)
