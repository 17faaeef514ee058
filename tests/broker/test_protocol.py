"""Raw-protocol tests against a real `samsa serve` process: each API's answers and error codes."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from samsa.broker.client import Connection
from samsa.broker.wire import build
from samsa.kproto.batch import parse_header
from samsa.kproto.messages import decode_response, encode_request, request_class
from samsa.kproto.records import decode_batches, encode_batch

ZERO = 0


def create_topic(conn: Connection, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                 rf: int = 1) -> Any:
    response = conn.request(19, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": (),
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout": 10000, "validate_only": False,
    })
    return response.topics[0]


def produce(conn: Connection, topic: str, partition: int, batch: bytes, acks: int = -1, version: int | None = None
            ) -> Any:
    response = conn.request(0, {"transactional_id": None, "acks": acks, "timeout": 10000,
                                "topic_data": [{"name": topic, "partition_data": [{"index": partition,
                                                                                   "records": batch}]}]},
                            version=version, expect_response=acks != 0)
    if acks == 0:
        return None
    return response.responses[0].partition_responses[0]


def fetch(conn: Connection, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 0,
          partition_max_bytes: int = 1 << 20, version: int = 12) -> Any:
    response = conn.request(1, {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes,
                                "max_bytes": 50 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                "topics": [{"topic": topic, "partitions": [
                                    {"partition": partition, "fetch_offset": offset,
                                     "partition_max_bytes": partition_max_bytes}]}],
                                "forgotten_topics_data": (), "rack_id": ""}, version=version)
    return response.responses[0].partitions[0]


def values_of(records: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for _, recs in decode_batches(records, max_decompressed_bytes=1 << 26) for r in recs]


def now_ms() -> int:
    return int(time.time() * 1000)


def test_api_versions_advertises_what_is_implemented(conn: Connection) -> None:
    assert conn.versions[0] == (3, 13)
    assert conn.versions[1] == (4, 18)
    assert conn.versions[3] == (0, 13)
    assert conn.versions[18] == (0, 5)
    assert conn.versions[22] == (0, 5)
    # Transactions V1 (issue 5) and V2 (KIP-890 part 2: EndTxn v5, TxnOffsetCommit v5; v6 names topics by id,
    # KIP-1319); UpdateFeatures
    assert (conn.versions[24], conn.versions[26], conn.versions[28]) == ((0, 5), (0, 5), (0, 6))
    assert conn.versions[57] == (0, 2)


def test_api_versions_unknown_version_falls_back_to_v0(samsa: Any) -> None:
    with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as s:
        # ApiVersions v99: header v2 guess is irrelevant; the broker answers with a v0 body.
        payload = struct.pack(">hhi", 18, 99, 7) + struct.pack(">h", 4) + b"test" + b"\x00\x00\x00"
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    correlation_id, response = decode_response(18, 0, data)
    assert correlation_id == 7
    assert response.error_code.value == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 5)]


def test_metadata_auto_creates_and_rejects_bad_names(conn: Connection) -> None:
    # The first answer for a topic being auto-created may be LEADER_NOT_AVAILABLE until its creation is
    # committed (Kafka answers the same); clients ask again, and so does this test, a bounded number of times.
    for _ in range(100):
        r = conn.request(3, {"topics": [{"name": "auto-made"}, {"name": "bad name!"}],
                             "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
        by_name = {t.name: t for t in r.topics}
        if by_name["auto-made"].error_code.value != 5:
            break
        time.sleep(0.05)
    assert by_name["auto-made"].error_code.value == 0
    assert len(by_name["auto-made"].partitions) == 1
    assert by_name["bad name!"].error_code.value == 17
    r = conn.request(3, {"topics": [{"name": "not-made"}], "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False})
    assert r.topics[0].error_code.value == 3
    # v0 with an empty list means all topics
    r0 = conn.request(3, {"topics": []}, version=0)
    assert "auto-made" in {t.name for t in r0.topics}


def test_produce_fetch_round_trip_and_offsets(conn: Connection) -> None:
    assert create_topic(conn, "rt", 2).error_code.value == 0
    first = produce(conn, "rt", 1, encode_batch([(b"k", b"v0", ()), (None, b"v1", ())], timestamp_ms=now_ms()))
    assert first.error_code.value == 0 and first.base_offset == 0
    second = produce(conn, "rt", 1, encode_batch([(b"k", b"v2", [("h", b"x")])], timestamp_ms=now_ms()))
    assert second.base_offset == 2
    part = fetch(conn, "rt", 1, 0)
    assert part.error_code.value == 0
    assert part.high_watermark == 3
    assert values_of(part.records) == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    # A fetch from inside a batch returns the whole batch that contains the offset.
    part = fetch(conn, "rt", 1, 1)
    assert parse_header(part.records).base_offset == 0
    # The other partition is empty.
    assert fetch(conn, "rt", 0, 0).high_watermark == 0
    # Fetch v13+ names topics by id.
    tid = conn.request(3, {"topics": [{"name": "rt"}], "allow_auto_topic_creation": False,
                           "include_topic_authorized_operations": False}).topics[0].topic_id
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                         "session_id": 0, "session_epoch": -1,
                         "topics": [{"topic_id": tid, "partitions": [{"partition": 1, "fetch_offset": 2,
                                                                      "partition_max_bytes": 1 << 20}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=17)
    assert values_of(r.responses[0].partitions[0].records) == [(2, b"v2")]


def test_fetch_out_of_range_and_unknown(conn: Connection) -> None:
    create_topic(conn, "oor")
    produce(conn, "oor", 0, encode_batch([(None, b"a", ())], timestamp_ms=now_ms()))
    assert fetch(conn, "oor", 0, 5).error_code.value == 1
    assert fetch(conn, "oor", 0, -1).error_code.value == 1
    assert fetch(conn, "oor", 0, 1).error_code.value == 0  # at the end: empty, not an error
    assert fetch(conn, "oor", 3, 0).error_code.value == 3
    assert fetch(conn, "nope", 0, 0).error_code.value == 3


def test_fetch_returns_at_least_one_batch_beyond_max_bytes(conn: Connection) -> None:
    create_topic(conn, "big")
    big = b"x" * 50_000
    produce(conn, "big", 0, encode_batch([(None, big, ())], timestamp_ms=now_ms()))
    produce(conn, "big", 0, encode_batch([(None, big, ())], timestamp_ms=now_ms()))
    part = fetch(conn, "big", 0, 0, partition_max_bytes=100)
    assert [o for o, _ in values_of(part.records)] == [0]


def test_long_poll_returns_when_data_arrives(samsa: Any) -> None:
    import threading

    with samsa.connect() as c:
        create_topic(c, "poll")
    result: dict[str, Any] = {}

    def poll() -> None:
        with samsa.connect() as c:
            result["part"] = fetch(c, "poll", 0, 0, max_wait_ms=20_000, min_bytes=1)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.3)
    with samsa.connect() as c:
        produce(c, "poll", 0, encode_batch([(None, b"wake", ())], timestamp_ms=now_ms()))
    t.join(30)
    assert not t.is_alive()
    assert values_of(result["part"].records) == [(0, b"wake")]


def test_produce_errors(conn: Connection) -> None:
    create_topic(conn, "errs", configs={"max.message.bytes": "2000"})
    good = bytearray(encode_batch([(None, b"v", ())], timestamp_ms=now_ms()))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert produce(conn, "errs", 0, bytes(corrupt)).error_code.value == 2  # CORRUPT_MESSAGE
    assert produce(conn, "errs", 0, encode_batch([(None, b"x" * 5000, ())], timestamp_ms=now_ms())
                   ).error_code.value == 10  # MESSAGE_TOO_LARGE
    assert produce(conn, "missing", 0, bytes(good)).error_code.value == 3
    assert produce(conn, "errs", 9, bytes(good)).error_code.value == 3
    assert produce(conn, "errs", 0, bytes(good), acks=2).error_code.value == 21  # INVALID_REQUIRED_ACKS
    two = bytes(good) + encode_batch([(None, b"w", ())], timestamp_ms=now_ms())
    assert produce(conn, "errs", 0, two).error_code.value == 87  # INVALID_RECORD: one batch per partition
    future = encode_batch([(None, b"f", ())], timestamp_ms=now_ms() + 24 * 3600 * 1000)
    assert produce(conn, "errs", 0, future).error_code.value == 32  # INVALID_TIMESTAMP
    # Nothing above was written.
    assert fetch(conn, "errs", 0, 0).high_watermark == 0
    assert produce(conn, "errs", 0, bytes(good)).base_offset == 0


def test_acks_zero_gets_no_response_and_pipelining_keeps_order(conn: Connection) -> None:
    create_topic(conn, "pipe")
    produce(conn, "pipe", 0, encode_batch([(None, b"silent", ())], timestamp_ms=now_ms()), acks=0)
    # Pipeline three metadata requests without reading, then read three responses in order.
    version = conn.pick_version(3)
    cls = request_class(3, version)
    frames = [encode_request(build(cls, {"topics": [{"name": "pipe"}], "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False}),
                             correlation_id=1000 + i, client_id="t") for i in range(3)]
    conn.send_raw(b"".join(frames))
    ids = [decode_response(3, version, conn.recv_frame())[0] for _ in range(3)]
    assert ids == [1000, 1001, 1002]
    assert fetch(conn, "pipe", 0, 0).high_watermark == 1


def test_list_offsets_by_time(conn: Connection) -> None:
    create_topic(conn, "lo")
    base = now_ms() - 100_000
    for i in range(5):
        produce(conn, "lo", 0, encode_batch([(None, b"%d" % i, ())], timestamp_ms=base + i * 1000))

    def lookup(ts: int, version: int | None = None) -> Any:
        r = conn.request(2, {"replica_id": -1, "isolation_level": 0, "timeout": 1000,
                             "topics": [{"name": "lo", "partitions": [{"partition_index": 0, "timestamp": ts}]}]},
                         version=version)
        return r.topics[0].partitions[0]

    assert lookup(-2).offset == 0
    assert lookup(-1).offset == 5
    assert lookup(base + 2500).offset == 3
    assert lookup(base + 2000).offset == 2
    assert lookup(base + 10_000).offset == -1
    assert lookup(-3).offset == 4
    assert lookup(-3).timestamp == base + 4000
    assert lookup(base, version=1).offset == 0
    # No remote tier: latest tiered (-5) and, from v11, earliest pending upload (-6) answer offset -1; -6 before
    # v11 and unknown negatives are UNSUPPORTED_VERSION (Kafka 4.4.0's answers)
    assert (lookup(-5, version=10).error_code.value, lookup(-5, version=10).offset) == (0, -1)
    assert (lookup(-6, version=11).error_code.value, lookup(-6, version=11).offset) == (0, -1)
    assert lookup(-6, version=10).error_code.value == 35
    assert lookup(-7, version=11).error_code.value == 35


def test_create_topics_errors(conn: Connection) -> None:
    assert create_topic(conn, "dup").error_code.value == 0
    assert create_topic(conn, "dup").error_code.value == 36
    assert create_topic(conn, "rf", rf=3).error_code.value == 38
    assert create_topic(conn, "badcfg", configs={"retention.ms": "soon"}).error_code.value == 40
    assert create_topic(conn, "unknowncfg", configs={"no.such.config": "1"}).error_code.value == 40
    assert create_topic(conn, "zero", partitions=0).error_code.value == 37
    assert create_topic(conn, "a.b").error_code.value == 0
    assert create_topic(conn, "a_b").error_code.value == 17  # collides with a.b


def test_describe_and_alter_configs(conn: Connection) -> None:
    create_topic(conn, "cfg", configs={"retention.ms": "1000"})

    def describe() -> dict[str, Any]:
        r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "cfg", "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": False})
        assert r.results[0].error_code.value == 0
        return {c.name: c for c in r.results[0].configs}

    configs = describe()
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == 1
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].config_source == 5
    assert configs["cleanup.policy"].value == "delete"
    r = conn.request(44, {"resources": [{"resource_type": 2, "resource_name": "cfg", "configs": [
        {"name": "retention.ms", "config_operation": 1, "value": None},
        {"name": "cleanup.policy", "config_operation": 0, "value": "compact"}]}], "validate_only": False})
    assert r.responses[0].error_code.value == 0
    configs = describe()
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].config_source == 5
    assert configs["cleanup.policy"].value == "compact"
    r = conn.request(44, {"resources": [{"resource_type": 2, "resource_name": "cfg", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "-7"}]}], "validate_only": False})
    assert r.responses[0].error_code.value == 40
    # Legacy AlterConfigs replaces the whole set.
    r = conn.request(33, {"resources": [{"resource_type": 2, "resource_name": "cfg", "configs": [
        {"name": "segment.ms", "value": "100000"}]}], "validate_only": False})
    assert r.responses[0].error_code.value == 0
    configs = describe()
    assert configs["cleanup.policy"].value == "delete"
    assert configs["segment.ms"].value == "100000"
    r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "nope", "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})
    assert r.results[0].error_code.value == 3
    r = conn.request(32, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})
    assert {c.name for c in r.results[0].configs} >= {"num.partitions", "message.max.bytes"}


def test_delete_records_and_create_partitions(conn: Connection) -> None:
    create_topic(conn, "dr")
    for i in range(4):
        produce(conn, "dr", 0, encode_batch([(None, b"%d" % i, ())], timestamp_ms=now_ms()))
    r = conn.request(21, {"topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": 2}]}],
                          "timeout": 1000})
    p = r.topics[0].partitions[0]
    assert p.error_code.value == 0 and p.low_watermark == 2
    assert fetch(conn, "dr", 0, 1).error_code.value == 1
    assert values_of(fetch(conn, "dr", 0, 2).records)[0] == (2, b"2")
    r = conn.request(21, {"topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": 99}]}],
                          "timeout": 1000})
    assert r.topics[0].partitions[0].error_code.value == 1
    r = conn.request(37, {"topics": [{"name": "dr", "count": 3, "assignments": None}], "timeout": 1000,
                          "validate_only": False})
    assert r.results[0].error_code.value == 0
    r = conn.request(37, {"topics": [{"name": "dr", "count": 2, "assignments": None}], "timeout": 1000,
                          "validate_only": False})
    assert r.results[0].error_code.value == 37
    assert produce(conn, "dr", 2, encode_batch([(None, b"new", ())], timestamp_ms=now_ms())).error_code.value == 0


def test_delete_topic_removes_data(conn: Connection, samsa: Any) -> None:
    create_topic(conn, "gone", 2)
    produce(conn, "gone", 0, encode_batch([(None, b"a", ())], timestamp_ms=now_ms()))
    version = conn.pick_version(20)
    r = conn.request(20, {"topics": [{"name": "gone"}], "topic_names": ["gone"], "timeout": 1000}, version=version)
    assert r.responses[0].error_code.value == 0
    assert fetch(conn, "gone", 0, 0).error_code.value == 3
    assert not (samsa.data_dir / "gone-0").exists()
    # Recreated under the same name it starts empty.
    create_topic(conn, "gone", 1)
    assert fetch(conn, "gone", 0, 0).high_watermark == 0


def test_broken_frame_closes_only_that_connection(samsa: Any) -> None:
    with samsa.connect() as good:
        create_topic(good, "survive")
        with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as bad:
            bad.sendall(struct.pack(">i", -5) + b"garbage")
            assert bad.recv(10) == b""  # closed by the broker
        with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as huge:
            huge.sendall(struct.pack(">i", 500 * 1024 * 1024))  # far past the pre-request limit
            assert huge.recv(10) == b""
        with socket.create_connection(("127.0.0.1", samsa.port), timeout=10) as junk:
            junk.sendall(struct.pack(">i", 11) + b"\x00\x03\x00\x05\xff\xff\xff\xff\x7f\xff\xff")
            assert junk.recv(10) == b""
        assert produce(good, "survive", 0, encode_batch([(None, b"ok", ())], timestamp_ms=now_ms())
                       ).error_code.value == 0


def test_restart_keeps_topics_configs_and_data(samsa_factory: Any) -> None:
    s = samsa_factory()
    s.start()
    with s.connect() as c:
        create_topic(c, "durable", 3, configs={"retention.ms": "123456"})
        for p in range(3):
            produce(c, "durable", p, encode_batch([(b"k", b"p%d" % p, ())], timestamp_ms=now_ms()))
    assert s.stop() == 0
    s.start()
    with s.connect() as c:
        for p in range(3):
            assert values_of(fetch(c, "durable", p, 0).records) == [(0, b"p%d" % p)]
        r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": "durable",
                                          "configuration_keys": ["retention.ms"]}],
                           "include_synonyms": False, "include_documentation": False})
        assert r.results[0].configs[0].value == "123456"
    # And after SIGKILL, acknowledged appends are still there.
    with s.connect() as c:
        produce(c, "durable", 0, encode_batch([(None, b"after", ())], timestamp_ms=now_ms()))
    s.stop(kill=True)
    s.start()
    with s.connect() as c:
        assert values_of(fetch(c, "durable", 0, 0).records) == [(0, b"p0"), (1, b"after")]


def test_describe_cluster_and_offset_for_leader_epoch(conn: Connection) -> None:
    r = conn.request(60, {"include_cluster_authorized_operations": False})
    assert r.error_code.value == 0 and r.brokers[0].port > 0 and r.cluster_id
    create_topic(conn, "ofle")
    produce(conn, "ofle", 0, encode_batch([(None, b"a", ()), (None, b"b", ())], timestamp_ms=now_ms()))
    r = conn.request(23, {"replica_id": -1, "topics": [{"topic": "ofle", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code.value == 0 and p.leader_epoch == 0 and p.end_offset == 2
    r = conn.request(23, {"replica_id": -1, "topics": [{"topic": "ofle", "partitions": [
        {"partition": 0, "current_leader_epoch": 5, "leader_epoch": 0}]}]})
    assert r.topics[0].partitions[0].error_code.value == 75  # UNKNOWN_LEADER_EPOCH


def test_compressed_batches_round_trip_and_bombs_are_refused(samsa_factory: Any) -> None:
    import struct as _struct

    import cramjam
    import crc32c

    s = samsa_factory(extra_args=("--override", "samsa.max.decompressed.batch.bytes=1000000"))
    s.start()
    with s.connect() as conn:
        create_topic(conn, "codecs")
        expected = []
        for codec in (1, 2, 3, 4):
            records = [(b"k%d" % i, b"value-%d-%d" % (codec, i) * 20, ()) for i in range(50)]
            r = produce(conn, "codecs", 0, encode_batch(records, timestamp_ms=now_ms(), compression=codec))
            assert r.error_code.value == 0, codec
            expected += [v for _, v, _ in records]
        assert [v for _, v in values_of(fetch(conn, "codecs", 0, 0).records)] == expected
        # A gzip bomb: 50 MB of zeros in a small batch. The CRC is right, the content is not acceptable.
        plain = encode_batch([(None, b"x", ())], timestamp_ms=now_ms())
        bomb = bytes(cramjam.gzip.compress(b"\0" * 50_000_000))
        header = bytearray(plain[:61])
        _struct.pack_into(">h", header, 21, 1)  # attributes: gzip
        batch = header + bomb
        _struct.pack_into(">i", batch, 8, len(batch) - 12)
        _struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
        assert produce(conn, "codecs", 0, bytes(batch)).error_code.value == 2
        garbage = header + b"not gzip at all"
        _struct.pack_into(">i", garbage, 8, len(garbage) - 12)
        _struct.pack_into(">I", garbage, 17, crc32c.crc32c(bytes(garbage[21:])))
        assert produce(conn, "codecs", 0, bytes(garbage)).error_code.value == 2
        assert fetch(conn, "codecs", 0, 0).high_watermark == 200


def test_dynamic_broker_configs(samsa_factory: Any) -> None:
    s = samsa_factory()
    s.start()

    def describe_topic(conn: Connection) -> dict[str, Any]:
        r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "dyn", "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": False})
        return {c.name: c for c in r.results[0].configs}

    def alter(conn: Connection, name: str, configs: list[dict[str, Any]]) -> Any:
        r = conn.request(44, {"resources": [{"resource_type": 4, "resource_name": name, "configs": configs}],
                              "validate_only": False})
        return r.responses[0]

    with s.connect() as conn:
        create_topic(conn, "dyn")
        # The cluster-wide default changes every topic without an override.
        assert alter(conn, "", [{"name": "log.retention.ms", "config_operation": 0, "value": "5000"}]
                     ).error_code.value == 0
        c = describe_topic(conn)["retention.ms"]
        assert c.value == "5000" and c.config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
        # A per-broker value wins over the cluster default.
        assert alter(conn, "1", [{"name": "log.retention.ms", "config_operation": 0, "value": "7000"}]
                     ).error_code.value == 0
        c = describe_topic(conn)["retention.ms"]
        assert c.value == "7000" and c.config_source == 2  # DYNAMIC_BROKER_CONFIG
        # Static-only configs and bad values are refused.
        assert alter(conn, "", [{"name": "socket.request.max.bytes", "config_operation": 0, "value": "1"}]
                     ).error_code.value == 42
        assert alter(conn, "", [{"name": "log.retention.ms", "config_operation": 0, "value": "x"}]
                     ).error_code.value == 42  # Kafka answers a broker config's bad value INVALID_REQUEST
        r = conn.request(32, {"resources": [{"resource_type": 4, "resource_name": "1",
                                             "configuration_keys": ["log.retention.ms", "num.partitions"]}],
                              "include_synonyms": False, "include_documentation": False})
        got = {c.name: c for c in r.results[0].configs}
        assert got["log.retention.ms"].value == "7000" and not got["log.retention.ms"].read_only
        assert got["num.partitions"].read_only
    assert s.stop() == 0
    s.start()
    with s.connect() as conn:  # dynamic configs are metadata records: they survive a restart
        assert describe_topic(conn)["retention.ms"].value == "7000"
        assert alter(conn, "1", [{"name": "log.retention.ms", "config_operation": 1, "value": None}]
                     ).error_code.value == 0
        assert describe_topic(conn)["retention.ms"].value == "5000"


def test_the_cli_client_stays_below_the_versions_that_name_topics_by_id() -> None:
    """Against Kafka 4.4 (OffsetCommit and OffsetFetch v10: topic_id only) the CLI must not pick a version whose
    topic ids it leaves empty, or Kafka answers UNKNOWN_TOPIC_ID (compat-tests/test_samsa_cli.py -m kafka)."""
    client = Connection.__new__(Connection)
    client.versions = {0: (3, 13), 8: (2, 10), 9: (1, 10), 2: (1, 11)}
    assert [client.pick_version(k) for k in (0, 8, 9, 2)] == [12, 9, 9, 11]
