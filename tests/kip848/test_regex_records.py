"""Kafka 4's ConsumerGroupRegularExpression records (type 16): written when a regex subscription resolves to
other topics, tombstoned when no member uses it, and replayed so a reload does not write them again."""

from __future__ import annotations

import uuid

from samsa.broker.group import consumer_group_records as cg_records
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.consumer_coordinator import HeartbeatRequest
from samsa.broker.group.records import (
    ConsumerGroupKey,
    decode_key,
    decode_regular_expression_value,
    encode_regular_expression_value,
)
from samsa.kproto.errors import ErrorCode

from .test_consumer_coordinator import Catalog, coordinator


def regex_records(records: list[GroupRecord]) -> list[tuple[str, tuple[str, ...] | None]]:
    out = []
    for record in records:
        key = decode_key(record.key)
        if isinstance(key, ConsumerGroupKey) and key.record_type == cg_records.REGULAR_EXPRESSION:
            out.append((key.member_id, None if record.value is None
                        else decode_regular_expression_value(record.value)[0]))
    return out


def test_value_round_trips() -> None:
    data = encode_regular_expression_value(("b", "a"), 42, 1700)
    assert decode_regular_expression_value(data) == (("a", "b"), 42, 1700)


def test_regex_records_follow_the_resolution() -> None:
    c, records = coordinator()
    catalog = Catalog()
    catalog.add("rx-a", str(uuid.UUID(int=1)), 1)
    catalog.add("other", str(uuid.UUID(int=2)), 1)
    joined = c.heartbeat(HeartbeatRequest("g", "m", 0, None, None, 5000, None, "rx-.*", None, {}), catalog, 0)
    assert joined.error == ErrorCode.none
    assert regex_records(records) == [("rx-.*", ("rx-a",))]
    records.clear()
    # Same topics: nothing written again.
    c.heartbeat(HeartbeatRequest("g", "m", joined.member_epoch, None, None, -1, None, None, None, None), catalog, 10)
    assert regex_records(records) == []
    # A new matching topic: the new resolution is written.
    catalog.topics_by_name = dict(catalog.topics_by_name)
    catalog.add("rx-b", str(uuid.UUID(int=3)), 1)
    c.heartbeat(HeartbeatRequest("g", "m", joined.member_epoch, None, None, -1, None, None, None, None), catalog, 20)
    assert regex_records(records) == [("rx-.*", ("rx-a", "rx-b"))]
    replayed = list(records)
    records.clear()
    # The member leaves: the regex is no longer used, its record is tombstoned.
    c.heartbeat(HeartbeatRequest("g", "m", -1, None, None, -1, None, None, None, None), catalog, 30)
    assert regex_records(records) == [("rx-.*", None)]
    # Replay keeps the resolution, so a reloaded group does not write it again.
    fresh, _ = coordinator()
    for record in replayed:
        key = decode_key(record.key)
        assert isinstance(key, ConsumerGroupKey)
        fresh.replay(key.record_type, key.group_id, key.member_id, record.value)
    assert fresh.groups["g"].resolved_regexes == {"rx-.*": frozenset({"rx-a", "rx-b"})}
