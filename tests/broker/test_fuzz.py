"""Mutated and truncated requests never crash the broker or hurt other clients."""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any

from samsa.broker.client import Connection
from samsa.broker.wire import build
from samsa.kproto.messages import encode_request, request_class
from samsa.kproto.records import decode_batches, encode_batch

SEED = 20261129


def _valid_frames() -> list[bytes]:
    batch = encode_batch([(b"k", b"v" * 100, [("h", b"x")])], timestamp_ms=int(time.time() * 1000))
    requests: list[tuple[int, int, dict[str, Any]]] = [
        (0, 9, {"transactional_id": None, "acks": 1, "timeout": 1000,
                "topic_data": [{"name": "fuzz", "partition_data": [{"index": 0, "records": batch}]}]}),
        (0, 3, {"transactional_id": None, "acks": 1, "timeout": 1000,
                "topic_data": [{"name": "fuzz", "partition_data": [{"index": 0, "records": batch}]}]}),
        (1, 12, {"max_wait": 10, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                 "session_epoch": -1, "replica_id": -1,
                 "topics": [{"topic": "fuzz", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                              "partition_max_bytes": 1 << 16}]}],
                 "forgotten_topics_data": (), "rack_id": ""}),
        (3, 12, {"topics": [{"name": "fuzz"}], "allow_auto_topic_creation": False,
                 "include_topic_authorized_operations": False}),
        (2, 7, {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": "fuzz", "partitions": [{"partition_index": 0, "timestamp": -2}]}]}),
        (19, 7, {"topics": [{"name": "fz", "num_partitions": 1, "replication_factor": 1, "assignments": (),
                             "configs": ()}], "timeout": 1000, "validate_only": True}),
        (32, 4, {"resources": [{"resource_type": 2, "resource_name": "fuzz", "configuration_keys": None}],
                 "include_synonyms": True, "include_documentation": False}),
        (18, 3, {"client_software_name": "fuzz", "client_software_version": "1"}),
    ]
    return [encode_request(build(request_class(k, v), values), correlation_id=7, client_id="fuzz")
            for k, v, values in requests]


def _send_and_drain(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(frame)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


def test_mutated_requests_do_not_hurt_the_broker(samsa: Any) -> None:
    rng = random.Random(SEED)
    with samsa.connect() as conn:
        r = conn.request(19, {"topics": [{"name": "fuzz", "num_partitions": 1, "replication_factor": 1,
                                          "assignments": (), "configs": ()}], "timeout": 1000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0
        frames = _valid_frames()
        for i in range(300):
            frame = bytearray(rng.choice(frames))
            kind = i % 3
            if kind == 0:  # flip bytes after the size prefix
                for _ in range(rng.randint(1, 6)):
                    frame[rng.randrange(4, len(frame))] = rng.randrange(256)
            elif kind == 1:  # truncate the body but keep the prefix honest
                cut = rng.randrange(6, len(frame))
                frame = frame[:cut]
                struct.pack_into(">i", frame, 0, len(frame) - 4)
            else:  # overwrite a length field with something huge or negative
                pos = rng.randrange(4, len(frame) - 4)
                struct.pack_into(">i", frame, pos, rng.choice([-2, -1, 0x7FFFFFFF, 1 << 24]))
            _send_and_drain(samsa.port, bytes(frame))
        # The broker is alive, the log is intact and readable by a normal client.
        assert samsa.proc.poll() is None, samsa.log_tail()
        # Every bad request was a protocol error or a Kafka error code, never a handler crash.
        assert "internal error" not in samsa.log_tail(100_000), samsa.log_tail(200)
    with Connection("127.0.0.1", samsa.port) as conn:
        batch = encode_batch([(None, b"after-fuzz", ())], timestamp_ms=int(time.time() * 1000))
        r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 1000,
                             "topic_data": [{"name": "fuzz", "partition_data": [{"index": 0, "records": batch}]}]})
        assert r.responses[0].partition_responses[0].error_code.value == 0
        f = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
                             "session_id": 0, "session_epoch": -1, "replica_id": -1,
                             "topics": [{"topic": "fuzz", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                          "partition_max_bytes": 50 << 20}]}],
                             "forgotten_topics_data": (), "rack_id": ""}, version=12)
        part = f.responses[0].partitions[0]
        values = [r.value for _, recs in decode_batches(part.records, max_decompressed_bytes=1 << 26) for r in recs]
        assert values[-1] == b"after-fuzz"
        assert len(values) == part.high_watermark
