"""The `samsa-skip:{...}` commit metadata that makes the broker audit a poison-record skip."""

from __future__ import annotations

from samsa.broker.group.records import decode_skip_metadata, encode_skip_metadata


def test_skip_metadata_round_trips_and_other_metadata_is_not_a_skip() -> None:
    skip = {"count": 2, "first": 4, "last": 5, "quarantine": "t.quarantine", "reason": "bad", "operator": "al"}
    text = encode_skip_metadata(skip)
    assert text.startswith("samsa-skip:{") and decode_skip_metadata(text) == skip
    # confluent-kafka sends a TopicPartition's metadata with the C string's NUL
    assert decode_skip_metadata(text + "\x00") == skip
    for other in (None, "", "replay after bug #12", "samsa-skip:", "samsa-skip:[1]", "samsa-skip:{broken"):
        assert decode_skip_metadata(other) is None
