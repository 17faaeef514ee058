"""A data directory of a Samsa that wrote a streams group as its own 32002 record: a new Samsa loads the group,
writes it in Kafka 4.4's records at its next change with a tombstone for the old record, and a restart after
that loads the same group from Kafka's records alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from samsa.broker.group.batches import encode_batch, iter_records
from samsa.broker.group.records import StreamsGroupSnapshotKey, decode_key, encode_key, partition_for_group
from samsa.broker.group.streams_keys import StreamsGroupKey
from samsa.storage import Log, LogConfig
from tests.kip848.conftest import Broker
from tests.kip1071.test_streams_records import _legacy_record

GROUP = "app"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data", launcher.free_port(), extra_overrides=("group.streams.session.timeout.ms=60000",))
    b.start()
    yield b
    b.stop()


def _describe(conn: Connection) -> Any:
    return conn.request(89, {"group_ids": [GROUP], "include_authorized_operations": False}, version=0).groups[0]


def _offsets_log(broker: Broker) -> Path:
    return broker.data_dir / f"__consumer_offsets-{partition_for_group(GROUP, 50)}"


def _records(broker: Broker) -> list[tuple[object, bytes | None]]:
    out = []
    for segment in sorted(_offsets_log(broker).glob("*.log")):
        for _offset, key, value in iter_records(segment.read_bytes()):
            assert key is not None
            out.append((decode_key(key), value))
    return out


def test_a_32002_record_is_loaded_and_replaced_by_kafkas_records(broker: Broker) -> None:
    broker.create_topic("in", 2)
    broker.stop()
    # The record an older Samsa wrote: member m1 holds the tasks of subtopology 0, partitions 0 and 1.
    log = Log.open(_offsets_log(broker), LogConfig(), now_ms=0)
    log.append_as_leader(encode_batch([(encode_key(StreamsGroupSnapshotKey(GROUP)), _legacy_record(GROUP))], 0),
                         leader_epoch=log.latest_epoch() or 0, now_ms=0)
    log.close()
    broker.start()
    with broker.connect() as conn:
        g = _describe(conn)
        assert g.error_code.value == 0 and g.group_epoch == 3 and [m.member_id for m in g.members] == ["m1"]
        assert [(t.subtopology_id, list(t.partitions)) for t in g.members[0].assignment.active_tasks] == [("0", [0, 1])]
        # The member goes on where it was; its heartbeat is the group's first change since the load.
        r = conn.request(88, {
            "group_id": GROUP, "member_id": "m1", "member_epoch": 3, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": -1, "topology": None,
            "active_tasks": [{"subtopology_id": "0", "partitions": [0, 1]}], "standby_tasks": [], "warmup_tasks": [],
            "process_id": None, "user_endpoint": None, "client_tags": None, "task_offsets": None,
            "task_end_offsets": None, "shutdown_application": False}, version=0)
        assert r.error_code.value == 0, r.error_message
    broker.stop()
    records = _records(broker)
    legacy = [i for i, (k, _v) in enumerate(records) if isinstance(k, StreamsGroupSnapshotKey)]
    assert len(legacy) == 2 and records[legacy[1]][1] is None  # the old record, then its tombstone
    kafka = {k.record_type for k, v in records[legacy[1]:] if isinstance(k, StreamsGroupKey) and v is not None}
    assert kafka == {17, 19, 20, 21, 22, 23}
    broker.start()
    with broker.connect() as conn:  # loaded from Kafka's records alone now
        g = _describe(conn)
        assert g.error_code.value == 0 and [m.member_id for m in g.members] == ["m1"]
        assert g.topology.epoch == 0 and [s.subtopology_id for s in g.topology.subtopologies] == ["0"]
        assert [(t.subtopology_id, list(t.partitions)) for t in g.members[0].assignment.active_tasks] == [("0", [0, 1])]
