"""The compiled response writers (kproto/_writer.py) write exactly the bytes kio's own writer does.

Every response class of every API and version kio 0.6.5 knows (302 of them) and of the newer ones
kio's generator made (samsa.kproto.schema, 7 more), with generated values;
a sweep of 20 examples each passed when this was written; the suite draws 3 of each.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import Records

from samsa.kproto._writer import compiled_writer
from samsa.kproto.messages import (
    API_NAMES,
    LARGE_WRITE_BYTES,
    RequestHeader,
    encode_response_parts,
    kio_version_range,
    response_class,
)

st.register_type_strategy(Records, st.binary(max_size=30).map(Records))


def _all_response_classes() -> list[type[Any]]:
    out = []
    for key in sorted(API_NAMES):
        versions = kio_version_range(key)
        if versions is not None:
            out.extend(response_class(key, v) for v in range(versions[0], versions[1] + 1))
    return out


RESPONSES = _all_response_classes()


def _kio_bytes(cls: type[Any], value: object) -> bytes:
    out = io.BytesIO()
    entity_writer(cls)(out, value)
    return out.getvalue()


def test_every_response_class_is_covered() -> None:
    assert len(RESPONSES) >= 309  # kio 0.6.5: 302, samsa.kproto.schema: 7; fewer means the sweep lost APIs


@pytest.mark.parametrize("cls", RESPONSES, ids=lambda c: f"{c.__name__}-v{c.__version__}")
def test_compiled_writer_matches_kio(cls: type[Any]) -> None:
    # Generation only: a failure is reported as generated (shrinking a nested response takes minutes).
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              phases=[Phase.generate])
    @given(st.from_type(cls))
    def check(value: object) -> None:
        out = io.BytesIO()
        compiled_writer(cls)(out, value)
        assert out.getvalue() == _kio_bytes(cls, value)

    check()


def test_large_records_go_by_reference_and_bytes_match_kio() -> None:
    cls = response_class(1, 12)  # Fetch v12: flexible, topic names
    records = Records(bytes(range(256)) * (LARGE_WRITE_BYTES // 256 + 3))

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.from_type(cls))
    def check(value: Any) -> None:
        topics = [t for t in value.responses if t.partitions]
        if not topics:
            return
        big = dataclasses.replace(topics[0].partitions[0], records=records)
        value = dataclasses.replace(value, responses=(dataclasses.replace(topics[0], partitions=(big,)),))
        parts = encode_response_parts(RequestHeader(1, 12, 99, "c", 0, 2), value)
        assert any(part is records for part in parts)  # not copied into the frame
        frame = b"".join(parts)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert frame[4:8] == (99).to_bytes(4, "big") and frame[8] == 0  # correlation id, no header tags (v1)
        assert frame[9:] == _kio_bytes(cls, value)

    check()
