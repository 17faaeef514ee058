"""librdkafka (confluent-kafka) as an oracle: a tiny kproto-only fake broker captures its batches.

The fake answers ApiVersions and Metadata, and the producer uses acks=0 so no Produce response is
needed.  What it checks: librdkafka's request headers and bodies parse with kproto, librdkafka
accepts kproto's responses (ApiVersions v3 with header v0, Metadata v12 with header v1), and the
record batches it writes with each codec decode with kproto.  Seen on librdkafka 2.16: its snappy is
raw snappy (not xerial); its lz4 frames start 04224d18604082 like Kafka's and ours.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import sys
import threading
import time
from typing import Any

import pytest

from samsa.kproto.errors import ErrorCode
from samsa.kproto.framing import FrameReader
from samsa.kproto.messages import decode_request, encode_response, parse_request_header, response_class
from samsa.kproto.records import Header, decode_batches

confluent_kafka = pytest.importorskip("confluent_kafka")

_TOPIC = "t"
# librdkafka derives features from these ranges: v2 batches need Produce >= 3 and Fetch >= 4 (MsgVer2),
# lz4 needs FindCoordinator (its LZ4 feature); without them it writes magic 0 or sends lz4 uncompressed.
_ADVERTISED = {18: (0, 3), 3: (0, 12), 0: (3, 9), 1: (4, 12), 10: (0, 4)}


def _build(cls: type[Any], **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _nested(cls: type[Any], name: str) -> type[Any]:
    return getattr(sys.modules[cls.__module__], name)  # type: ignore[no-any-return]


class FakeBroker:
    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.batches: list[bytes] = []
        self.requests: list[tuple[int, int, str | None]] = []
        self.errors: list[BaseException] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self.listener.close()

    def _serve(self, conn: socket.socket) -> None:
        reader = FrameReader(10 * 1024 * 1024)
        try:
            with conn:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        return
                    reader.feed(data)
                    while (payload := reader.next_frame()) is not None:
                        response = self._handle(payload)
                        if response is not None:
                            conn.sendall(response)
        except OSError:
            return
        except BaseException as e:  # surfaced by the test
            self.errors.append(e)

    def _handle(self, payload: bytes) -> bytes | None:
        header = parse_request_header(payload)
        self.requests.append((header.api_key, header.api_version, header.client_id))
        request = decode_request(header, payload)
        cls = response_class(header.api_key, header.api_version)
        if header.api_key == 18:
            version_cls = _nested(cls, "ApiVersion")
            keys = tuple(
                _build(version_cls, api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in _ADVERTISED.items()
            )
            return encode_response(
                header, _build(cls, error_code=ErrorCode.none, api_keys=keys, throttle_time=datetime.timedelta(0))
            )
        if header.api_key == 3:
            partition = _build(
                _nested(cls, "MetadataResponsePartition"),
                error_code=ErrorCode.none, partition_index=0, leader_id=0, leader_epoch=0, replica_nodes=(0,),
                isr_nodes=(0,), offline_replicas=(),
            )  # fmt: skip
            topic = _build(
                _nested(cls, "MetadataResponseTopic"),
                error_code=ErrorCode.none, name=_TOPIC, topic_id=None, is_internal=False, partitions=(partition,),
            )  # fmt: skip
            broker = _build(
                _nested(cls, "MetadataResponseBroker"), node_id=0, host="127.0.0.1", port=self.port, rack=None
            )
            response = _build(
                cls, throttle_time=datetime.timedelta(0), brokers=(broker,), cluster_id="kproto-test", controller_id=0,
                topics=(topic,),
            )  # fmt: skip
            return encode_response(header, response)
        if header.api_key == 0:
            assert request.acks == 0
            for topic_data in request.topic_data:
                for partition_data in topic_data.partition_data:
                    self.batches.append(bytes(partition_data.records))
            return None
        raise AssertionError(f"unexpected request {header}")


def _count(batches: list[bytes]) -> int:
    return sum(
        header.records_count
        for data in list(batches)
        for header, _ in decode_batches(data, max_decompressed_bytes=1 << 26)
    )


@pytest.fixture
def broker() -> Any:
    fake = FakeBroker()
    yield fake
    fake.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_batches_decode(broker: FakeBroker, codec: str) -> None:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "acks": 0,
            "compression.type": codec,
            "linger.ms": 50,
            "enable.idempotence": False,
            "client.id": "kproto-oracle",
        }
    )
    values = [b"value-%d-" % i + b"x" * (i * 500) for i in range(40)]
    for i, value in enumerate(values):
        producer.produce(
            _TOPIC, key=b"key-%d" % i if i % 3 else None, value=value, partition=0, timestamp=1_700_000_000_000 + i,
            headers=[("h", b"v"), ("n", None)] if i % 2 else None,
        )  # fmt: skip
    assert producer.flush(10) == 0
    # acks=0: flush returns once the bytes are written, maybe before the fake has read them
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _count(broker.batches) < len(values) and not broker.errors:
        time.sleep(0.02)
    assert not broker.errors, broker.errors
    assert {(k, c) for k, _, c in broker.requests} >= {
        (18, "kproto-oracle"),
        (3, "kproto-oracle"),
        (0, "kproto-oracle"),
    }
    decoded = []
    expected_codec = ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
    codecs_seen = set()
    for data in broker.batches:
        for header, records in decode_batches(data, max_decompressed_bytes=64 * 1024 * 1024):
            codecs_seen.add(header.compression)
            decoded.extend(records)
    assert codecs_seen == {expected_codec}
    assert [r.value for r in decoded] == values
    assert [r.key for r in decoded] == [b"key-%d" % i if i % 3 else None for i in range(40)]
    assert [r.timestamp_ms for r in decoded] == [1_700_000_000_000 + i for i in range(40)]
    assert [r.headers for r in decoded] == [(Header("h", b"v"), Header("n", None)) if i % 2 else () for i in range(40)]
