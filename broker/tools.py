"""`samsa topics|produce|consume`: a quick look at any Kafka-protocol broker without another tool."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from samsa.broker.client import Connection, KafkaClientError


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (Utils.murmur2), so keys land where the Java client puts them."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail >= 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _connect(args: argparse.Namespace) -> Connection:
    host, _, port = args.bootstrap_server.rpartition(":")
    return Connection(host or "127.0.0.1", int(port))


def _metadata(conn: Connection, topics: list[str] | None, auto_create: bool = False) -> Any:
    values: dict[str, Any] = {"topics": None if topics is None else [{"name": t} for t in topics],
                              "allow_auto_topic_creation": auto_create,
                              "include_topic_authorized_operations": False}
    return conn.request(3, values)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def cmd_topics(args: argparse.Namespace) -> int:
    with _connect(args) as conn:
        if args.action == "list":
            for t in sorted(_metadata(conn, None).topics, key=lambda t: t.name or ""):
                if not t.name.startswith("__") or args.include_internal:
                    print(t.name)
            return 0
        if args.action == "create":
            if not args.topic:
                return _fail("topics create needs --topic")
            configs = [{"name": k, "value": v} for k, _, v in (c.partition("=") for c in args.config or ())]
            response = conn.request(19, {"topics": [{"name": args.topic, "num_partitions": args.partitions,
                                                     "replication_factor": args.replication_factor,
                                                     "assignments": (), "configs": configs}],
                                         "timeout": 30000, "validate_only": False})
            r = response.topics[0]
            if r.error_code.value != 0:
                return _fail(f"{r.error_code.name}: {r.error_message or ''}")
            print(f"Created topic {args.topic}.")
            return 0
        if args.action == "delete":
            if not args.topic:
                return _fail("topics delete needs --topic")
            version = conn.pick_version(20)
            values: dict[str, Any] = {"timeout": 30000}
            if version >= 6:
                values["topics"] = [{"name": args.topic}]
            else:
                values["topic_names"] = [args.topic]
            r = conn.request(20, values, version=version).responses[0]
            if r.error_code.value != 0:
                return _fail(r.error_code.name)
            print(f"Deleted topic {args.topic}.")
            return 0
        if args.action == "describe":
            response = _metadata(conn, [args.topic] if args.topic else None)
            for t in sorted(response.topics, key=lambda t: t.name or ""):
                if t.error_code.value != 0:
                    return _fail(f"{t.name}: {t.error_code.name}")
                print(f"Topic: {t.name}\tTopicId: {getattr(t, 'topic_id', '')}\tPartitionCount: {len(t.partitions)}")
                for p in sorted(t.partitions, key=lambda p: p.partition_index):
                    print(f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                          f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}")
            return 0
    return _fail(f"unknown action {args.action}")


def _partition_count(conn: Connection, topic: str) -> int:
    t = _metadata(conn, [topic], auto_create=True).topics[0]
    if t.error_code.value != 0:
        raise KafkaClientError(f"{topic}: {t.error_code.name}")
    return len(t.partitions)


def cmd_produce(args: argparse.Namespace) -> int:
    from samsa.kproto.records import encode_batch

    with _connect(args) as conn:
        try:
            count = _partition_count(conn, args.topic)
        except KafkaClientError as e:
            return _fail(str(e))
        by_partition: dict[int, list[tuple[bytes | None, bytes | None, tuple[()]]]] = {}
        next_partition = 0
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\n")
            key: bytes | None = None
            if args.key_separator:
                sep = args.key_separator.encode()
                if sep in line:
                    key, _, line = line.partition(sep)
            if args.partition is not None:
                p = args.partition
            elif key is not None:
                p = partition_for_key(key, count)
            else:
                p = next_partition
                next_partition = (next_partition + 1) % count
            by_partition.setdefault(p, []).append((key, line, ()))
        now = int(time.time() * 1000)
        for p, records in sorted(by_partition.items()):
            batch = encode_batch(records, timestamp_ms=now)
            response = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 30000,
                                        "topic_data": [{"name": args.topic,
                                                        "partition_data": [{"index": p, "records": batch}]}]})
            r = response.responses[0].partition_responses[0]
            if r.error_code.value != 0:
                return _fail(f"partition {p}: {r.error_code.name}")
            print(f"{len(records)} records to {args.topic}-{p} at offset {r.base_offset}", file=sys.stderr)
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    from samsa.kproto.records import decode_batches

    with _connect(args) as conn:
        try:
            count = _partition_count(conn, args.topic)
        except KafkaClientError as e:
            return _fail(str(e))
        partitions = [args.partition] if args.partition is not None else list(range(count))
        positions: dict[int, int] = {}
        for p in partitions:
            if args.offset in ("earliest", "latest"):
                ts = -2 if args.offset == "earliest" else -1
                r = conn.request(2, {"replica_id": -1, "isolation_level": 0, "timeout": 30000,
                                     "topics": [{"name": args.topic,
                                                 "partitions": [{"partition_index": p, "timestamp": ts}]}]})
                positions[p] = r.topics[0].partitions[0].offset
            else:
                positions[p] = int(args.offset)
        seen = 0
        deadline = time.monotonic() + args.timeout_ms / 1000
        version = conn.pick_version(1)
        while time.monotonic() < deadline and (args.max_messages is None or seen < args.max_messages):
            topics = [{"topic": args.topic, "partitions": [
                {"partition": p, "fetch_offset": positions[p], "partition_max_bytes": 1 << 20} for p in partitions]}]
            if version >= 13:
                tid = _metadata(conn, [args.topic]).topics[0].topic_id
                topics = [{"topic_id": tid, "partitions": topics[0]["partitions"]}]
            response = conn.request(1, {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 8 << 20,
                                        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                        "topics": topics, "forgotten_topics_data": (), "rack_id": ""},
                                    version=version)
            for t in response.responses:
                for pr in t.partitions:
                    if pr.error_code.value != 0:
                        return _fail(f"partition {pr.partition_index}: {pr.error_code.name}")
                    for header, records in decode_batches(pr.records or b"", max_decompressed_bytes=64 << 20):
                        for rec in records:
                            if rec.offset < positions[pr.partition_index]:
                                continue
                            positions[pr.partition_index] = rec.offset + 1
                            value = (rec.value or b"").decode(errors="replace")
                            if args.print_key:
                                print(f"{(rec.key or b'').decode(errors='replace')}\t{value}")
                            else:
                                print(value)
                            seen += 1
                            if args.max_messages is not None and seen >= args.max_messages:
                                return 0
                        positions[pr.partition_index] = max(positions[pr.partition_index], header.next_offset)
    return 0


def add_commands(sub: Any) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")

    topics = sub.add_parser("topics", help="create, list, describe or delete topics")
    topics.add_argument("action", choices=["create", "list", "describe", "delete"])
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int, default=-1)
    topics.add_argument("--replication-factor", type=int, default=-1)
    topics.add_argument("--config", action="append", help="KEY=VALUE topic config")
    topics.add_argument("--include-internal", action="store_true")
    common(topics)
    topics.set_defaults(func=cmd_topics)

    produce = sub.add_parser("produce", help="produce lines from stdin (acks=all)")
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int)
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    common(produce)
    produce.set_defaults(func=cmd_produce)

    consume = sub.add_parser("consume", help="print records from a topic")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int)
    consume.add_argument("--offset", default="earliest", help="earliest, latest or an offset")
    consume.add_argument("--max-messages", type=int)
    consume.add_argument("--timeout-ms", type=int, default=5000)
    consume.add_argument("--print-key", action="store_true")
    common(consume)
    consume.set_defaults(func=cmd_consume)
