"""Reading the consumer protocol's subscription and assignment bytes (ConsumerProtocolSubscription /
ConsumerProtocolAssignment v0-v3), which the coordinator otherwise passes through untouched.

Only OffsetDelete (is the topic subscribed?), offset expiry and the `samsa groups` tools look inside.
"""

from __future__ import annotations

import struct

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
