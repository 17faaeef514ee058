"""Issue 15 part 1 against a running broker, with raw requests: every malformed-record probe is refused with
Kafka's code and writes nothing, and afterwards another client still produces and consumes; a huge valid
batch is validated off the event loop (other clients are answered meanwhile); compression.type recompresses.
After each hostile input the broker's RSS has grown by less than MAX_RSS_GROWTH_MIB since it started."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import record_corpus

from samsa.broker.client import Connection
from samsa.kproto.batch import iter_batches
from samsa.kproto.records import decode_batches, encode_batch


def now_ms() -> int:
    return int(time.time() * 1000)


def create_topic(conn: Connection, name: str, configs: dict[str, str] | None = None) -> None:
    response = conn.request(19, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout": 10000, "validate_only": False,
    })
    assert response.topics[0].error_code.value == 0, response


def produce(conn: Connection, topic: str, batch: bytes, acks: int = -1) -> Any:
    response = conn.request(0, {"transactional_id": None, "acks": acks, "timeout": 10000,
                                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
                            version=9)
    return response.responses[0].partition_responses[0]


def fetch(conn: Connection, topic: str, offset: int = 0) -> Any:
    response = conn.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20,
                                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                "topics": [{"topic": topic, "partitions": [
                                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 50 << 20}]}],
                                "forgotten_topics_data": (), "rack_id": ""}, version=12)
    return response.responses[0].partitions[0]


def values(records: bytes) -> list[bytes | None]:
    return [r.value for _, recs in decode_batches(records, max_decompressed_bytes=1 << 28) for r in recs]


# Generous on purpose (a shared machine, allocator arenas, page-cache-backed reads): the point is that
# hostile input cannot make memory grow without bound, not a tight figure.
MAX_RSS_GROWTH_MIB = 200
_rss_before_mib: dict[int, float] = {}  # broker pid -> VmRSS before any hostile input


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def note_rss_before(server: Any) -> None:
    """The broker's RSS before the hostile inputs, what `assert_still_serves` compares with."""
    _rss_before_mib[server.proc.pid] = rss_mib(server.proc.pid)


@pytest.fixture(autouse=True)
def _rss_before_hostile_input(request: pytest.FixtureRequest) -> Iterator[None]:
    if "samsa" in request.fixturenames:
        note_rss_before(request.getfixturevalue("samsa"))
    yield
    _rss_before_mib.clear()


def assert_still_serves(samsa: Any, topic: str, marker: bytes) -> None:
    """Another client (a new connection) produces and reads back what it produced, and the broker's
    RSS is bounded."""
    with samsa.connect() as other:
        before = fetch(other, topic).high_watermark
        answer = produce(other, topic, encode_batch([(b"k", marker, ())], timestamp_ms=now_ms()))
        assert answer.error_code.value == 0 and answer.base_offset == before
        assert values(fetch(other, topic, before).records) == [marker]
    pid = samsa.proc.pid
    assert pid in _rss_before_mib, "note_rss_before(server) was not called before the hostile input"
    growth_mib = rss_mib(pid) - _rss_before_mib[pid]
    assert growth_mib < MAX_RSS_GROWTH_MIB, f"broker RSS grew by {growth_mib:.0f} MiB ({marker!r})"


def test_every_malformed_probe_is_refused_and_the_broker_keeps_serving(samsa: Any) -> None:
    with samsa.connect() as conn:
        create_topic(conn, "plain", {"message.timestamp.before.max.ms": str(7 * 24 * 3600 * 1000)})
        create_topic(conn, "compacted", {"cleanup.policy": "compact"})
        for probe in record_corpus.PROBES:
            topic = "compacted" if probe.compacted else "plain"
            hw = fetch(conn, topic).high_watermark
            answer = produce(conn, topic, probe.build(now_ms()))
            assert answer.error_code.value == probe.expected, (probe.name, answer)
            assert tuple(e.batch_index for e in answer.record_errors) == probe.record_error_indexes, probe.name
            assert fetch(conn, topic).high_watermark == hw, probe.name  # nothing was written
            assert_still_serves(samsa, topic, probe.name.encode())
        # What the consumers of both partitions read: only the good records, every one decodable.
        for topic in ("plain", "compacted"):
            assert values(fetch(conn, topic).records) == [p.name.encode() for p in record_corpus.PROBES
                                                         if p.compacted == (topic == "compacted")]


def _million_empty_records_zstd() -> bytes:
    data = encode_batch([(None, b"", ())] * 1_000_000, timestamp_ms=now_ms(), compression=4)
    assert len(data) < 1_000_000
    return data


@pytest.mark.parametrize("pure_python", [False, True], ids=["native", "pure-python"])
def test_huge_batches_do_not_stop_other_clients(samsa_factory: Any, monkeypatch: pytest.MonkeyPatch,
                                                pure_python: bool) -> None:
    if pure_python:
        monkeypatch.setenv("SAMSA_PURE_PYTHON", "1")
    server = samsa_factory()
    server.start()
    note_rss_before(server)
    huge = _million_empty_records_zstd()
    sends = 3
    with server.connect() as producer, server.connect() as other:
        create_topic(producer, "huge")
        answers: list[Any] = []

        def send_all() -> None:
            for _ in range(sends):
                answers.append(produce(producer, "huge", huge, acks=1))

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        answered_meanwhile = 0
        version = other.pick_version(3)
        while sender.is_alive():
            response = other.request(3, {"topics": [{"name": "huge"}], "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False}, version=version)
            assert response.topics[0].error_code.value == 0
            if sender.is_alive():
                answered_meanwhile += 1
        sender.join(120)
        assert [a.error_code.value for a in answers] == [0] * sends
        assert [a.base_offset for a in answers] == [i * 1_000_000 for i in range(sends)]
        assert answered_meanwhile >= 1
        assert fetch(other, "huge", 0).high_watermark == sends * 1_000_000
        assert_still_serves(server, "huge", b"after")


@pytest.mark.parametrize(("topic_codec", "codec_id", "producer_codec"), [("zstd", 4, 0), ("lz4", 3, 1),
                                                                         ("uncompressed", 0, 4)])
def test_topic_compression_type_is_what_the_log_stores(samsa: Any, topic_codec: str, codec_id: int,
                                                       producer_codec: int) -> None:
    with samsa.connect() as conn:
        create_topic(conn, "codec", {"compression.type": topic_codec})
        sent = [b"value-%d" % i * 20 for i in range(30)]
        first = produce(conn, "codec", encode_batch([(b"k", v, ()) for v in sent[:10]], timestamp_ms=now_ms(),
                                                    compression=producer_codec))
        second = produce(conn, "codec", encode_batch([(b"k", v, ()) for v in sent[10:]], timestamp_ms=now_ms(),
                                                     compression=producer_codec))
        assert (first.error_code.value, first.base_offset) == (0, 0)
        assert (second.error_code.value, second.base_offset) == (0, 10)
        stored = fetch(conn, "codec").records
        headers = [h for _, h in iter_batches(stored)]  # CRCs verified
        assert [(h.base_offset, h.compression, h.records_count) for h in headers] == [(0, codec_id, 10),
                                                                                      (10, codec_id, 20)]
        assert values(stored) == sent
