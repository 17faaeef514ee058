"""The differential scenarios (issue 8). Each returns what a client could observe, as JSON.

Conventions: explicit API versions (the same on both brokers), topic names from ``ctx.topic``,
record timestamps from ``ctx.batch(..., ts=delta)`` (``ctx.t0 + delta``), error codes through
``err`` ("NAME(code)"). Nothing here hides a difference: that is ``normalize.py``'s job, in one place.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from differential.framework import Ctx, err, error_name, jsonable, records_of, scenario
from samsa.broker.wire import build
from samsa.kproto.messages import decode_response, encode_request, request_class

HOUR = 3_600_000


def _produce_outcome(p: Any) -> dict[str, Any]:
    return {"error": err(p), "base_offset": p.base_offset, "log_append_time": jsonable(p.log_append_time),
            "log_start_offset": getattr(p, "log_start_offset", None),
            "record_errors": jsonable(getattr(p, "record_errors", ())),
            "error_message": getattr(p, "error_message", None)}


def _fetch_outcome(p: Any) -> dict[str, Any]:
    return {"error": err(p), "high_watermark": p.high_watermark,
            "last_stable_offset": getattr(p, "last_stable_offset", None),
            "log_start_offset": getattr(p, "log_start_offset", None),
            "aborted_transactions": jsonable(getattr(p, "aborted_transactions", None)),
            "preferred_read_replica": getattr(p, "preferred_read_replica", None),
            "batches": records_of(p.records)}


def _lo_outcome(p: Any) -> dict[str, Any]:
    return {"error": err(p), "offset": p.offset, "timestamp": jsonable(p.timestamp),
            "leader_epoch": getattr(p, "leader_epoch", None)}


# --- produce / fetch ---------------------------------------------------------------------------


@scenario
def produce_offsets(ctx: Ctx) -> Any:
    """Offsets returned by Produce: per partition, per batch size, across Produce versions and acks."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2))}
    steps = []
    for partition, n, version, acks in [(0, 1, 3, -1), (0, 3, 7, 1), (0, 2, 9, -1), (1, 5, 12, 1), (0, 1, 12, 1),
                                        (1, 1, 8, 0), (1, 2, 5, -1)]:
        recs = [(b"k%d" % i, b"v%d" % i, ()) for i in range(n)]
        p = ctx.produce(c, t, partition, ctx.batch(recs, ts=10), acks=acks, version=version)
        steps.append({"partition": partition, "records": n, "version": version, "acks": acks,
                      "response": None if p is None else _produce_outcome(p)})
    out["steps"] = steps
    out["latest"] = [_lo_outcome(ctx.list_offsets(c, t, i, -1)) for i in range(2)]
    out["hw"] = [ctx.fetch(c, t, i, 0).high_watermark for i in range(2)]
    # A topic with LogAppendTime: the broker stamps the batch (log_append_time in the answer, the record times)
    t2 = ctx.topic("lat")
    out["create_lat"] = err(ctx.create_topic(c, t2, 1, {"message.timestamp.type": "LogAppendTime"}))
    p = ctx.produce(c, t2, 0, ctx.batch([(None, b"a", ()), (None, b"b", ())], ts=-5 * HOUR), version=9)
    out["lat_produce"] = _produce_outcome(p)
    out["lat_fetch"] = _fetch_outcome(ctx.fetch(c, t2, 0, 0))
    return out


@scenario
def records_round_trip(ctx: Ctx) -> Any:
    """Records, keys, headers and batch headers read back, for every codec and several Fetch versions."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    recs: list[Any] = [
        (b"key", b"value", ()),
        (None, b"null key", ()),
        (b"null value", None, ()),
        (b"", b"", ()),
        (b"h", b"headers", [("a", b"1"), ("a", b"2"), ("null", None), ("", b"empty key"),
                            ("utf8-\u00e9", b"\xff\x00")]),
        (b"\x00\x01binary", b"\xfe" * 300, ()),
    ]
    produced = []
    for codec in (0, 1, 2, 3, 4):
        p = ctx.produce(c, t, 0, ctx.batch(recs, ts=codec * 1000, compression=codec), version=9)
        produced.append(_produce_outcome(p))
    out["produced"] = produced
    for version in (4, 11, 12, 16):
        out[f"fetch_v{version}"] = _fetch_outcome(ctx.fetch(c, t, 0, 0, version=version))
    # From the middle of a batch: the whole batch that holds the offset comes back.
    out["fetch_from_8"] = _fetch_outcome(ctx.fetch(c, t, 0, 8))
    # A small byte limit: still the first batch whole (KIP-74).
    out["fetch_max_bytes_10"] = _fetch_outcome(ctx.fetch(c, t, 0, 0, max_bytes=10))
    out["fetch_at_end"] = _fetch_outcome(ctx.fetch(c, t, 0, 30))
    return out


# --- errors for bad requests -------------------------------------------------------------------


@scenario
def produce_errors(ctx: Ctx) -> Any:
    """Produce error codes: unknown topic, wrong partition, too large, CRC mismatch, acks, two batches, timestamps."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1, {"max.message.bytes": "2000"}))}
    good = ctx.batch([(None, b"v", ())])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    cases: dict[str, tuple[str, int, bytes, int]] = {
        "unknown_topic": (ctx.topic("missing"), 0, good, -1),
        "wrong_partition": (t, 9, good, -1),
        "negative_partition": (t, -1, good, -1),
        "too_large": (t, 0, ctx.batch([(None, b"x" * 5000, ())]), -1),
        "crc_mismatch": (t, 0, bytes(corrupt), -1),
        "acks_2": (t, 0, good, 2),
        "two_batches": (t, 0, good + ctx.batch([(None, b"w", ())]), -1),
        "timestamp_2h_ahead": (t, 0, ctx.batch([(None, b"f", ())], ts=2 * HOUR), -1),
        "timestamp_very_old": (t, 0, encode_old(ctx), -1),
        "truncated_batch": (t, 0, good[:-3], -1),
        "empty_records": (t, 0, b"", -1),
    }
    for name, (topic, partition, data, acks) in cases.items():
        out[name] = _produce_outcome(ctx.produce(c, topic, partition, data, acks=acks, version=9))
    out["after"] = {"hw": ctx.fetch(c, t, 0, 0).high_watermark,
                    "good": _produce_outcome(ctx.produce(c, t, 0, good, version=9))}
    # A client batch must have baseOffset 0 (the leader assigns offsets); on a topic of its own.
    t2 = ctx.topic("base")
    out["create_base"] = err(ctx.create_topic(c, t2, 1))
    out["nonzero_base_offset"] = _produce_outcome(ctx.produce(c, t2, 0, ctx.batch([(None, b"b", ())], base_offset=5)))
    # A compacted topic needs keys.
    t3 = ctx.topic("compacted")
    out["create_compacted"] = err(ctx.create_topic(c, t3, 1, {"cleanup.policy": "compact"}))
    out["compacted_null_key"] = _produce_outcome(ctx.produce(c, t3, 0, ctx.batch([(b"k", b"1", ()), (None, b"2", ())])))
    out["compacted_keyed"] = _produce_outcome(ctx.produce(c, t3, 0, ctx.batch([(b"k", b"3", ())])))
    return out


def encode_old(ctx: Ctx) -> bytes:
    # message.timestamp.before.max.ms defaults to Long.MAX_VALUE: a 1970 timestamp is accepted.
    from samsa.kproto.records import encode_batch

    return encode_batch([(None, b"old", ())], timestamp_ms=1000)


@scenario
def fetch_and_list_offsets_errors(ctx: Ctx) -> Any:
    """Out-of-range offsets, unknown topic/partition, leader epoch checks (fenced / unknown epoch)."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    ctx.produce(c, t, 0, ctx.batch([(None, b"a", ()), (None, b"b", ())]))
    fetches = {
        "offset_past_end": (t, 0, 5, -1),
        "offset_negative": (t, 0, -1, -1),
        "offset_at_end": (t, 0, 2, -1),
        "unknown_topic": (ctx.topic("missing"), 0, 0, -1),
        "wrong_partition": (t, 3, 0, -1),
        "epoch_current": (t, 0, 0, 0),
        "epoch_future": (t, 0, 0, 5),
    }
    for name, (topic, partition, offset, epoch) in fetches.items():
        p = ctx.fetch(c, topic, partition, offset, current_leader_epoch=epoch)
        out[f"fetch_{name}"] = {"error": err(p), "hw": p.high_watermark, "records": len(records_of(p.records))}
    lists = {
        "unknown_topic": (ctx.topic("missing"), 0, -1, -1),
        "wrong_partition": (t, 3, -1, -1),
        "epoch_current": (t, 0, -1, 0),
        "epoch_future": (t, 0, -1, 5),
    }
    for name, (topic, partition, ts, epoch) in lists.items():
        out[f"list_offsets_{name}"] = _lo_outcome(ctx.list_offsets(c, topic, partition, ts, current_leader_epoch=epoch))
    r = c.request(23, {"replica_id": -1, "topics": [{"topic": t, "partitions": [
        {"partition": 0, "current_leader_epoch": e, "leader_epoch": 0}]} for e in (-1, 0, 5)]}, version=4)
    out["offset_for_leader_epoch"] = jsonable(r.topics)
    return out


def _raw(ctx: Ctx, frame: bytes, timeout: float = 5.0) -> bytes | str:
    """Send one frame on a fresh connection; the answer's payload, or "closed"/"no answer"."""
    with socket.create_connection((ctx.host, ctx.port), timeout=timeout) as s:
        s.sendall(frame)
        try:
            head = b""
            while len(head) < 4:
                chunk = s.recv(4 - len(head))
                if not chunk:
                    return "closed"
                head += chunk
            (size,) = struct.unpack(">i", head)
            data = b""
            while len(data) < size:
                chunk = s.recv(size - len(data))
                if not chunk:
                    return "closed mid-answer"
                data += chunk
            return data
        except TimeoutError:
            return "no answer"
        except ConnectionResetError:
            return "closed"


@scenario
def unsupported_versions(ctx: Ctx) -> Any:
    """Requests of versions the broker does not support, and an unknown API key."""
    out: dict[str, Any] = {}
    # ApiVersions v99: KIP-511, a v0 answer with UNSUPPORTED_VERSION and the broker's ranges.
    payload = struct.pack(">hhi", 18, 99, 7) + struct.pack(">h", 4) + b"test" + b"\x00\x00\x00"
    ans = _raw(ctx, struct.pack(">i", len(payload)) + payload)
    if isinstance(ans, str):
        out["api_versions_v99"] = ans
    else:
        cid, resp = decode_response(18, 0, ans)
        out["api_versions_v99"] = {"correlation_id": cid, "error": err(resp),
                                   "api_keys": [[k.api_key, k.min_version, k.max_version] for k in resp.api_keys]}
    # Produce v2 and Fetch v3 were removed in Kafka 4.0 (KIP-896), Metadata v14 does not exist yet: a request
    # of a version kio can write, with the version field of its header patched.
    for key, written, claimed, values in [
        (0, 3, 2, {"acks": 1, "timeout": 1000, "topic_data": []}),
        (1, 4, 3, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1000, "topics": []}),
        (3, 12, 14, {"topics": None}),
        (2, 1, 0, {"replica_id": -1, "topics": []}),
    ]:
        frame = bytearray(encode_request(build(request_class(key, written), values), correlation_id=9,
                                         client_id="diff"))
        struct.pack_into(">h", frame, 6, claimed)
        ans = _raw(ctx, bytes(frame))
        out[f"api{key}_v{claimed}"] = ans if isinstance(ans, str) else f"answered {len(ans)} bytes"
    # An API key that does not exist.
    payload = struct.pack(">hhi", 999, 0, 11) + struct.pack(">h", 4) + b"test"
    ans = _raw(ctx, struct.pack(">i", len(payload)) + payload)
    out["api999"] = ans if isinstance(ans, str) else f"answered {len(ans)} bytes"
    # The connection that sent nothing wrong still works afterwards (sanity).
    out["after"] = sorted(ctx.connect().versions)[:1]
    return out


# --- ListOffsets -------------------------------------------------------------------------------


@scenario
def list_offsets_by_timestamp(ctx: Ctx) -> Any:
    """Earliest (-2), latest (-1), max timestamp (-3), earliest-local (-4), latest-tiered (-5), earliest pending
    upload (-6, v11), an unknown negative timestamp (-7), by time."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    out["empty"] = {str(ts): _lo_outcome(ctx.list_offsets(c, t, 0, ts, version=9)) for ts in (-1, -2, -3, -4, -5)}
    base = -100_000
    for i in range(5):  # offsets 0..4, one record each, t0-100s + i s
        ctx.produce(c, t, 0, ctx.batch([(None, b"%d" % i, ())], ts=base + i * 1000))
    # One batch of three (offsets 5..7) whose middle record has the highest timestamp of the log.
    from samsa.kproto.records import Record, encode_batch

    # (Relative offsets 0..2: a producer's batch has base offset 0, see produce_errors.nonzero_base_offset.)
    recs = [Record(0, ctx.t0 + base + 5000, None, b"5"), Record(1, ctx.t0 + base + 50_000, None, b"6"),
            Record(2, ctx.t0 + base + 6000, None, b"7")]
    out["produce_batch_of_3"] = err(ctx.produce(c, t, 0, encode_batch(recs, timestamp_ms=ctx.t0 + base + 5000)))
    # A later batch with an older timestamp (offset 8).
    ctx.produce(c, t, 0, ctx.batch([(None, b"8", ())], ts=base + 3500))
    queries = {"latest": -1, "earliest": -2, "max_timestamp": -3, "earliest_local": -4, "latest_tiered": -5,
               "earliest_pending_upload": -6, "unknown_negative": -7,
               "before_all": ctx.t0 + base - 1, "exact_first": ctx.t0 + base, "exact_2": ctx.t0 + base + 2000,
               "between_2_3": ctx.t0 + base + 2500, "between_4_5": ctx.t0 + base + 4500,
               "inside_batch": ctx.t0 + base + 5500, "at_max": ctx.t0 + base + 50_000,
               "after_all": ctx.t0 + base + 50_001, "now_plus_hour": ctx.t0 + HOUR}
    for version in (1, 4, 7, 8, 9, 10, 11):
        rows = {}
        for name, ts in queries.items():
            if (ts == -3 and version < 7) or (ts == -4 and version < 8) or (ts == -5 and version < 9) or (
                    ts in (-6, -7) and version < 10):
                continue
            rows[name] = _lo_outcome(ctx.list_offsets(c, t, 0, ts, version=version))
        out[f"v{version}"] = rows
    # isolation_level read_committed: the last stable offset (no transactions: the high watermark)
    out["read_committed_latest"] = _lo_outcome(ctx.list_offsets(c, t, 0, -1, version=9, isolation_level=1))
    return out


# --- Metadata ----------------------------------------------------------------------------------


@scenario
def metadata_shape(ctx: Ctx) -> Any:
    """Metadata v1, v9, v12 for a created topic, an unknown one and a bad name (no auto-creation)."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 3))}
    missing = ctx.topic("missing")
    for version in (1, 9, 12):
        names = [t] if version == 1 else [t, missing, "bad name!"]
        r = c.request(3, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False,
                          "include_topic_authorized_operations": False}, version=version)
        out[f"v{version}"] = jsonable(r)
        r = c.request(3, {"topics": [], "allow_auto_topic_creation": False}, version=version)
        out[f"v{version}_empty_list"] = jsonable(r.topics)
    r = c.request(3, {"topics": None, "allow_auto_topic_creation": False}, version=12)
    out["v12_all_topics_has_ours"] = t in [x.name for x in r.topics]
    # auto-creation (auto.create.topics.enable=true on both): v12 with allow_auto_topic_creation
    auto = ctx.topic("auto")
    r = c.request(3, {"topics": [{"name": auto}], "allow_auto_topic_creation": True}, version=12)
    out["v12_auto_create_first"] = [err(x) for x in r.topics]
    ctx.wait_for_leaders(c, auto, 1)
    r = c.request(3, {"topics": [{"name": auto}], "allow_auto_topic_creation": False}, version=12)
    out["v12_auto_created"] = jsonable(r.topics)
    return out


# --- configs -----------------------------------------------------------------------------------


@scenario
def describe_configs_defaults(ctx: Ctx) -> Any:
    """DescribeConfigs for a topic with one override: every name, value, source, read-only, type, synonyms."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1, {"retention.ms": "1000"}))}

    def describe(version: int, keys: list[str] | None, synonyms: bool) -> Any:
        r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": keys}],
                           "include_synonyms": synonyms, "include_documentation": False}, version=version)
        res = r.results[0]
        return {"error": err(res), "resource": [res.resource_type, res.resource_name],
                "configs": {x.name: {k: v for k, v in jsonable(x).items() if k not in ("name", "documentation")}
                            for x in res.configs}}

    out["v4_all"] = describe(4, None, True)
    out["v1_all"] = describe(1, None, False)
    out["v4_keys"] = describe(4, ["retention.ms", "cleanup.policy", "no.such.config"], False)
    r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": ctx.topic("missing"),
                                      "configuration_keys": None}],
                       "include_synonyms": False, "include_documentation": False}, version=4)
    out["unknown_topic"] = err(r.results[0])
    return out


@scenario
def alter_configs(ctx: Ctx) -> Any:
    """IncrementalAlterConfigs and AlterConfigs on a topic: results and what DescribeConfigs then shows."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    keys = ["retention.ms", "cleanup.policy", "segment.ms", "max.message.bytes"]

    def show() -> Any:
        r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": keys}],
                           "include_synonyms": False, "include_documentation": False}, version=4)
        return {x.name: [x.value, x.config_source] for x in r.results[0].configs}

    def incremental(ops: list[tuple[str, int, str | None]], name: str = t) -> Any:
        r = c.request(44, {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": False},
            version=1)
        return err(r.responses[0])

    out["set"] = incremental([("retention.ms", 0, "5000"), ("cleanup.policy", 0, "compact")])
    out["after_set"] = show()
    out["delete"] = incremental([("retention.ms", 1, None)])
    out["append"] = incremental([("cleanup.policy", 2, "delete")])
    out["after_delete_append"] = show()
    out["subtract"] = incremental([("cleanup.policy", 3, "compact")])
    out["after_subtract"] = show()
    out["bad_value"] = incremental([("retention.ms", 0, "soon")])
    out["unknown_name"] = incremental([("no.such.config", 0, "1")])
    out["unknown_topic"] = incremental([("retention.ms", 0, "1")], ctx.topic("missing"))
    r = c.request(33, {"resources": [{"resource_type": 2, "resource_name": t, "configs": [
        {"name": "segment.ms", "value": "100000"}]}], "validate_only": False}, version=2)
    out["legacy_alter"] = err(r.responses[0])
    out["after_legacy_alter"] = show()
    return out


# Kafka's INVALID_CONFIG messages for topic configs are fixed texts (ConfigDef's and LogConfig's), so these
# scenarios report them under "message", which normalize.py does not erase (it erases "error_message").
BAD_TOPIC_CONFIGS: list[tuple[str, str]] = [
    ("retention.ms", "soon"), ("retention.ms", "-2"), ("retention.ms", ""), ("retention.ms", " 5 "),
    ("cleanup.policy", "compact2"), ("cleanup.policy", "Compact"), ("cleanup.policy", "compact,,delete"),
    ("cleanup.policy", "compact, delete"), ("cleanup.policy", ""), ("message.timestamp.type", "createtime"),
    ("compression.type", "GZIP"), ("compression.type", "brotli"), ("compression.gzip.level", "0"),
    ("compression.lz4.level", "18"), ("compression.zstd.level", "-131073"), ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "x"), ("preallocate", "yes"), ("preallocate", "TRUE"),
    ("unclean.leader.election.enable", "1"), ("segment.bytes", "13"), ("segment.bytes", "3000000000"),
    ("segment.index.bytes", "3"), ("max.message.bytes", "1e3"), ("min.insync.replicas", "0"), ("segment.ms", "0"),
    ("flush.messages", "0"), ("max.compaction.lag.ms", "0"), ("leader.replication.throttled.replicas", "x"),
    ("leader.replication.throttled.replicas", "0:1,1:2"), ("retention.bytes", "-5"),
    ("message.timestamp.after.max.ms", "-1"), ("delete.retention.ms", "1.5"), ("no.such.config", "1"),
    ("message.format.version", "3.0"),
]


def _config_result(x: Any) -> dict[str, Any]:
    return {"error": err(x), "message": x.error_message}


@scenario
def topic_config_validation(ctx: Ctx) -> Any:
    """Bad (and borderline) topic config values through CreateTopics, AlterConfigs and IncrementalAlterConfigs:
    the error code and Kafka's message for each, and what a topic then describes."""
    c = ctx.connect()
    out: dict[str, Any] = {}
    created = []
    for i, (name, value) in enumerate(BAD_TOPIC_CONFIGS):
        r = c.request(19, {"topics": [{"name": ctx.topic(f"cfg{i}"), "num_partitions": 1, "replication_factor": 1,
                                       "assignments": (), "configs": [{"name": name, "value": value}]}],
                           "timeout": 30000, "validate_only": True}, version=7)
        created.append([name, value, _config_result(r.topics[0])])
    out["create_validate_only"] = created
    r = c.request(19, {"topics": [{"name": ctx.topic("lags"), "num_partitions": 1, "replication_factor": 1,
                                   "assignments": (), "configs": [{"name": "min.compaction.lag.ms", "value": "10"},
                                                                  {"name": "max.compaction.lag.ms", "value": "5"}]}],
                       "timeout": 30000, "validate_only": True}, version=7)
    out["create_min_lag_over_max"] = _config_result(r.topics[0])

    t = ctx.topic()
    out["create"] = err(ctx.create_topic(c, t, 1))

    def incremental(ops: list[tuple[str, int, str | None]], name: str = t, validate_only: bool = False) -> Any:
        r = c.request(44, {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": validate_only},
            version=1)
        return _config_result(r.responses[0])

    def show(keys: list[str]) -> Any:  # after an alter: the connection waits for it to show (framework.py)
        r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": keys}],
                           "include_synonyms": False, "include_documentation": False}, version=4)
        res = r.results[0]
        return {"error": err(res), "message": res.error_message,
                "configs": {x.name: [x.value, x.config_source] for x in res.configs}}

    out["incremental_bad"] = [[n, v, incremental([(n, 0, v)], validate_only=True)] for n, v in BAD_TOPIC_CONFIGS]
    out["empty_cleanup_policy"] = incremental([("cleanup.policy", 0, "")])
    out["after_empty_cleanup_policy"] = show(["cleanup.policy"])
    out["append_to_long"] = incremental([("retention.ms", 2, "5")])
    out["subtract_from_unknown"] = incremental([("no.such.config", 3, "5")])
    out["append_then_subtract_all"] = [incremental([("cleanup.policy", 2, "compact")]),
                                       incremental([("cleanup.policy", 3, "compact")])]
    out["after_subtract_all"] = show(["cleanup.policy"])
    out["set_null"] = incremental([("retention.ms", 0, None)])
    out["duplicate_key"] = incremental([("retention.ms", 0, "5"), ("retention.ms", 0, "6")])
    out["min_lag_over_max"] = incremental([("min.compaction.lag.ms", 0, "10"), ("max.compaction.lag.ms", 0, "5")])
    out["max_lag_under_existing_min"] = [incremental([("min.compaction.lag.ms", 0, "10")]),
                                         incremental([("max.compaction.lag.ms", 0, "5")])]
    r = c.request(44, {"resources": [{"resource_type": 2, "resource_name": t, "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "7"}]}] * 2, "validate_only": False}, version=1)
    out["duplicate_resource"] = [_config_result(x) for x in r.responses]

    def legacy(configs: list[tuple[str, str | None]]) -> Any:
        r = c.request(33, {"resources": [{"resource_type": 2, "resource_name": t, "configs": [
            {"name": n, "value": v} for n, v in configs]}], "validate_only": False}, version=2)
        return _config_result(r.responses[0])

    out["legacy_bad"] = legacy([("segment.ms", "0")])
    out["legacy_null"] = legacy([("segment.ms", None)])
    out["legacy_empty_cleanup_policy"] = legacy([("cleanup.policy", "")])
    out["after_legacy"] = show(["cleanup.policy", "segment.ms", "min.compaction.lag.ms"])
    return out


@scenario
def describe_configs_broker(ctx: Ctx) -> Any:
    """DescribeConfigs for the broker: error_message on success, the static listeners, a bad broker id."""
    c = ctx.connect()

    def describe(name: str, keys: list[str] | None) -> Any:
        r = c.request(32, {"resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": keys}],
                           "include_synonyms": True, "include_documentation": False}, version=4)
        return r.results[0]

    res = describe("1", ["listeners", "advertised.listeners", "message.max.bytes", "no.such.config"])
    out: dict[str, Any] = {"error": err(res), "message": res.error_message}
    out["configs"] = {x.name: {"source": x.config_source, "read_only": x.read_only, "sensitive": x.is_sensitive,
                               "type": x.config_type, "synonym_sources": [s.source for s in x.synonyms]}
                      for x in res.configs}
    res = describe("1", None)
    listed = {x.name: x.config_source for x in res.configs}
    out["all"] = {"error": err(res), "message": res.error_message,
                  "listeners": listed.get("listeners"), "advertised.listeners": listed.get("advertised.listeners")}
    res = describe("", ["message.max.bytes"])
    out["default_resource"] = {"error": err(res), "names": [x.name for x in res.configs]}
    res = describe("7", None)
    out["other_broker"] = {"error": err(res), "configs": len(res.configs)}
    return out


# --- admin: topics, partitions, records ----------------------------------------------------------


@scenario
def create_topics_errors(ctx: Ctx) -> Any:
    """CreateTopics error codes (and the v5+ echo of partitions/replication factor)."""
    c = ctx.connect()
    cases: list[tuple[str, int, int, dict[str, str], bool]] = [
        (ctx.topic("ok"), 2, 1, {}, False),
        (ctx.topic("ok"), 2, 1, {}, False),  # duplicate
        (ctx.topic("rf3"), 1, 3, {}, False),
        (ctx.topic("rf0"), 1, 0, {}, False),
        (ctx.topic("badcfg"), 1, 1, {"retention.ms": "soon"}, False),
        (ctx.topic("unknowncfg"), 1, 1, {"no.such.config": "1"}, False),
        (ctx.topic("zero"), 0, 1, {}, False),
        (ctx.topic("defaults"), -1, -1, {}, False),
        (ctx.topic("validate"), 1, 1, {}, True),
        ("bad name!", 1, 1, {}, False),
        ("", 1, 1, {}, False),
        (".", 1, 1, {}, False),
        ("x" * 250, 1, 1, {}, False),
        (ctx.topic("a.b"), 1, 1, {}, False),
        (ctx.topic("a_b"), 1, 1, {}, False),  # collides with a.b
    ]
    out = []
    for name, partitions, rf, configs, validate in cases:
        r = c.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                       "assignments": (), "configs": [{"name": k, "value": v}
                                                                      for k, v in configs.items()]}],
                           "timeout": 30000, "validate_only": validate}, version=7)
        x = r.topics[0]
        out.append({"name": name[:40], "error": err(x), "error_message": x.error_message,
                    "num_partitions": x.num_partitions, "replication_factor": x.replication_factor,
                    "topic_config_error": getattr(x, "topic_config_error_code", None),
                    "has_configs": len(x.configs) > 0})
    # Two topics in one request, one of them bad; and the same name twice (INVALID_REQUEST).
    pair = (ctx.topic("pair1"), ctx.topic("pair2"), ctx.topic("pair2"))
    r = c.request(19, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                                   "configs": ()} for n in pair],
                       "timeout": 30000, "validate_only": False}, version=7)
    out.append({"batch": sorted([x.name, err(x)] for x in r.topics)})
    # validate_only did not create the topic
    r = c.request(3, {"topics": [{"name": ctx.topic("validate")}], "allow_auto_topic_creation": False}, version=9)
    out.append({"validate_only_created": err(r.topics[0])})
    return out


@scenario
def delete_topics_errors(ctx: Ctx) -> Any:
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2))}
    ctx.produce(c, t, 0, ctx.batch([(None, b"a", ())]))

    def delete(names: list[str], version: int = 6) -> Any:
        r = c.request(20, {"topics": [{"name": n, "topic_id": None} for n in names], "topic_names": names,
                           "timeout": 30000}, version=version)
        return [{"name": x.name, "error": err(x), "error_message": getattr(x, "error_message", None)}
                for x in r.responses]

    out["delete"] = delete([t])
    out["again"] = delete([t])
    out["unknown_v4"] = delete([ctx.topic("missing")], version=4)
    r = c.request(20, {"topics": [{"name": None, "topic_id": "00000000-0000-0000-0000-00000000abcd"}],
                       "timeout": 30000}, version=6)
    out["unknown_id"] = [[x.name, err(x)] for x in r.responses]
    deadline = time.monotonic() + 20
    while True:  # Kafka deletes asynchronously: the name becomes free once the deletion is done
        p = ctx.create_topic(c, t, 1, wait=False)
        if err(p) != "TOPIC_ALREADY_EXISTS(36)" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out["recreate"] = err(p)
    ctx.wait_for_leaders(c, t, 1)
    out["recreated_empty"] = ctx.fetch(c, t, 0, 0).high_watermark
    return out


@scenario
def create_partitions_errors(ctx: Ctx) -> Any:
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}

    def grow(items: list[tuple[str, int, Any]], validate: bool = False) -> Any:
        r = c.request(37, {"topics": [{"name": n, "count": k, "assignments": a} for n, k, a in items],
                           "timeout": 30000, "validate_only": validate}, version=3)
        return [{"name": x.name, "error": err(x), "error_message": x.error_message} for x in r.results]

    out["validate_only"] = grow([(t, 4, None)], validate=True)
    out["grow"] = grow([(t, 3, None)])
    ctx.wait_for_leaders(c, t, 3)
    out["same"] = grow([(t, 3, None)])
    out["shrink"] = grow([(t, 2, None)])
    out["unknown"] = grow([(ctx.topic("missing"), 2, None)])
    out["bad_assignment_broker"] = grow([(t, 4, [{"broker_ids": [4242]}])])
    out["assignment_count_mismatch"] = grow([(t, 5, [{"broker_ids": [1]}])])
    out["duplicate_topic"] = grow([(t, 6, None), (t, 7, None)])
    r = c.request(3, {"topics": [{"name": t}], "allow_auto_topic_creation": False}, version=9)
    out["partitions_after"] = len(r.topics[0].partitions)
    out["produce_new_partition"] = err(ctx.produce(c, t, 2, ctx.batch([(None, b"x", ())])))
    return out


@scenario
def delete_records(ctx: Ctx) -> Any:
    """DeleteRecords: low watermark, what Fetch/ListOffsets see after it, error codes."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2))}
    for i in range(4):
        ctx.produce(c, t, 0, ctx.batch([(None, b"%d" % i, ())]))
    ctx.produce(c, t, 0, ctx.batch([(None, b"b%d" % i, ()) for i in range(4)]))  # offsets 4..7 in one batch

    def delete(items: list[tuple[int, int]], topic: str = t) -> Any:
        r = c.request(21, {"topics": [{"name": topic, "partitions": [{"partition_index": p, "offset": o}
                                                                     for p, o in items]}], "timeout": 10000},
                      version=2)
        return [[x.partition_index, x.low_watermark, err(x)] for x in r.topics[0].partitions]

    out["to_2"] = delete([(0, 2)])
    out["fetch_1"] = err(ctx.fetch(c, t, 0, 1))
    out["fetch_2"] = _fetch_outcome(ctx.fetch(c, t, 0, 2))
    out["earliest"] = _lo_outcome(ctx.list_offsets(c, t, 0, -2))
    out["backwards_to_1"] = delete([(0, 1)])
    out["inside_batch_6"] = delete([(0, 6)])
    out["fetch_6"] = _fetch_outcome(ctx.fetch(c, t, 0, 6))
    out["earliest_after_6"] = _lo_outcome(ctx.list_offsets(c, t, 0, -2))
    out["past_end"] = delete([(0, 99)])
    out["to_hw_-1"] = delete([(0, -1)])
    out["empty_partition"] = delete([(1, 0)])
    out["wrong_partition"] = delete([(7, 0)])
    out["unknown_topic"] = delete([(0, 0)], ctx.topic("missing"))
    out["end"] = {"earliest": _lo_outcome(ctx.list_offsets(c, t, 0, -2)),
                  "latest": _lo_outcome(ctx.list_offsets(c, t, 0, -1)),
                  "fetch_hw": _fetch_outcome(ctx.fetch(c, t, 0, 8))}
    return out


# --- groups ------------------------------------------------------------------------------------


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 (what a Java consumer puts in JoinGroup's protocol metadata)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    return (struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
            + struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
            + struct.pack(">i", -1))


def _describe_group(c: Any, group: str, *, known: bool = False) -> Any:
    """`known`: the group exists by now. Kafka's coordinator answers DescribeGroups from its last committed
    state, so right after a join it may still say Dead (its write not yet committed): ask again, bounded."""
    deadline = time.monotonic() + 10
    while True:
        r = c.request(15, {"groups": [group], "include_authorized_operations": False}, version=5)
        g = r.groups[0]
        if not known or g.group_state != "Dead" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return {"error": err(g), "state": g.group_state, "protocol_type": g.protocol_type, "protocol": g.protocol_data,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "group_instance_id": m.group_instance_id,
                         "metadata": jsonable(m.member_metadata), "assignment": jsonable(m.member_assignment)}
                        for m in g.members]}


@scenario
def group_lifecycle(ctx: Ctx) -> Any:
    """Classic group: JoinGroup (member id required), SyncGroup, states, stale generation, leave, delete."""
    c = ctx.connect(client_id="diff-member")
    group = ctx.topic("group")
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    out["find_coordinator"] = ctx.find_coordinator(c, group, 0)
    out["describe_unknown"] = _describe_group(c, group)
    join = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(t)}], "reason": None}
    r = c.request(11, join, version=7)
    out["join1"] = {"error": err(r), "generation": r.generation_id, "member_id_given": bool(r.member_id)}
    member = r.member_id
    r = c.request(11, {**join, "member_id": member}, version=7)
    out["join2"] = {"error": err(r), "generation": r.generation_id, "protocol_type": r.protocol_type,
                    "protocol_name": r.protocol_name, "is_leader": r.leader == member,
                    "member_id_same": r.member_id == member,
                    "members": [[m.member_id == member, m.group_instance_id, jsonable(m.metadata)] for m in r.members]}
    generation = r.generation_id
    out["state_after_join"] = _describe_group(c, group, known=True)
    sync = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": assignment(t, [0])}]}
    r = c.request(14, {**sync, "generation_id": generation + 1}, version=5)
    out["sync_stale_generation"] = err(r)
    r = c.request(14, sync, version=5)
    out["sync"] = {"error": err(r), "assignment": jsonable(r.assignment), "protocol_name": r.protocol_name}
    out["state_after_sync"] = _describe_group(c, group)

    def heartbeat(gen: int, mid: str) -> str:
        return err(c.request(12, {"group_id": group, "generation_id": gen, "member_id": mid,
                                  "group_instance_id": None}, version=4))

    out["heartbeat"] = heartbeat(generation, member)
    out["heartbeat_stale_generation"] = heartbeat(generation - 1, member)
    out["heartbeat_unknown_member"] = heartbeat(generation, "nobody")

    def commit(gen: int, mid: str, offset: int = 5, version: int = 8) -> Any:
        r = c.request(8, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": mid,
                          "group_instance_id": None, "retention_time_ms": -1,
                          "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                                 "committed_leader_epoch": -1,
                                                                 "committed_metadata": "m"}]}]}, version=version)
        return err(r.topics[0].partitions[0])

    # Six records, so the commits below (5, then 6: the log end) are positions a consumer can reach.
    out["produce"] = _produce_outcome(ctx.produce(c, t, 0, ctx.batch([(None, b"%d" % i, ()) for i in range(6)],
                                                                     ts=10), version=9))
    out["commit_stale_generation"] = commit(generation - 1, member)
    out["commit_future_generation"] = commit(generation + 1, member)
    out["commit_unknown_member"] = commit(generation, "nobody")
    out["commit_past_log_end"] = commit(generation, member, offset=7)
    out["commit_ok"] = commit(generation, member)
    out["commit_v2_ok"] = commit(generation, member, offset=6, version=2)

    def fetch_offsets() -> Any:
        r = c.request(9, {"group_id": group, "topics": [{"name": t, "partition_indexes": [0]}],
                          "require_stable": False}, version=7)
        return {"error": err(r), "topics": [{"name": x.name, "partitions": [
            {"partition_index": p.partition_index, "offset": p.committed_offset, "metadata": p.metadata,
             "error": err(p)} for p in x.partitions]} for x in r.topics]}

    out["offset_fetch"] = fetch_offsets()
    r = c.request(16, {"states_filter": []}, version=4)
    out["listed"] = [[g.group_id, g.protocol_type, g.group_state] for g in r.groups if g.group_id == group]
    r = c.request(42, {"groups_names": [group]}, version=2)
    out["delete_non_empty"] = [[x.group_id, err(x)] for x in r.results]
    r = c.request(13, {"group_id": group, "members": [{"member_id": member, "group_instance_id": None,
                                                      "reason": None}]}, version=5)
    out["leave"] = {"error": err(r), "members": [[m.member_id == member, err(m)] for m in r.members]}
    out["state_after_leave"] = _describe_group(c, group)
    out["offset_fetch_after_leave"] = fetch_offsets()
    out["commit_after_leave_as_simple"] = commit(-1, "")
    r = c.request(42, {"groups_names": [group, ctx.topic("nogroup")]}, version=2)
    out["delete"] = sorted([x.group_id, err(x)] for x in r.results)
    out["state_after_delete"] = _describe_group(c, group)
    out["offset_fetch_after_delete"] = fetch_offsets()
    return out


@scenario
def group_two_members(ctx: Ctx) -> Any:
    """A second member joins a stable group: rebalance in progress for the first, a new generation for both."""
    import threading

    c1 = ctx.connect(client_id="m1")
    c2 = ctx.connect(client_id="m2")
    group = ctx.topic("group")
    join = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 6000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(group)}], "reason": None}
    out: dict[str, Any] = {"find_coordinator": ctx.find_coordinator(c1, group, 0)}
    m1 = c1.request(11, join, version=7).member_id
    r1 = c1.request(11, {**join, "member_id": m1}, version=7)
    gen1 = r1.generation_id
    c1.request(14, {"group_id": group, "generation_id": gen1, "member_id": m1, "group_instance_id": None,
                    "protocol_type": "consumer", "protocol_name": "range",
                    "assignments": [{"member_id": m1, "assignment": assignment(group, [0])}]}, version=5)
    out.update(gen1=gen1, state1=_describe_group(c1, group)["state"])
    m2 = c2.request(11, join, version=7).member_id
    result: dict[str, Any] = {}

    def second() -> None:
        result["r2"] = c2.request(11, {**join, "member_id": m2}, version=7)

    th = threading.Thread(target=second)
    th.start()
    time.sleep(1.0)
    out["state_while_joining"] = _describe_group(c1, group)["state"]
    hb = c1.request(12, {"group_id": group, "generation_id": gen1, "member_id": m1, "group_instance_id": None},
                    version=4)
    out["heartbeat_during_rebalance"] = err(hb)
    r1 = c1.request(11, {**join, "member_id": m1}, version=7)
    th.join(30)
    r2 = result["r2"]
    out["rejoin"] = {"errors": [err(r1), err(r2)], "same_generation": r1.generation_id == r2.generation_id,
                     "generation": r1.generation_id, "one_leader": (r1.leader == m1) + (r2.leader == m1) in (0, 2),
                     "leader_members": sorted(len(r.members) for r in (r1, r2))}
    out["state_after_rejoin"] = _describe_group(c1, group)["state"]
    for conn, m in ((c1, m1), (c2, m2)):
        conn.request(13, {"group_id": group, "members": [{"member_id": m, "group_instance_id": None,
                                                         "reason": None}]}, version=5)
    out["state_after_both_leave"] = _describe_group(c1, group)["state"]
    return out


# --- transactions ------------------------------------------------------------------------------


@scenario
def transactional_visibility(ctx: Ctx) -> Any:
    """read_committed sees nothing of an open transaction, then the committed records; aborted ones never."""
    c = ctx.connect()
    if not {22, 24, 26} <= set(c.versions):  # InitProducerId alone may come first, for idempotence
        ctx.skip("transactions not implemented (issue 5): the broker does not advertise InitProducerId, "
                 "AddPartitionsToTxn and EndTxn")
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    txn_id = ctx.topic("txn")
    out["find_coordinator"] = ctx.find_coordinator(c, txn_id, 1)
    deadline = time.monotonic() + 30
    while True:  # the transaction coordinator loads __transaction_state on first use
        r = c.request(22, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
                           "producer_epoch": -1}, version=4)
        if err(r) not in ("COORDINATOR_LOAD_IN_PROGRESS(14)", "COORDINATOR_NOT_AVAILABLE(15)",
                          "NOT_COORDINATOR(16)") or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    out["init_producer_id"] = {"error": err(r), "epoch": r.producer_epoch}
    pid, epoch = r.producer_id, r.producer_epoch
    from samsa.kproto.records import encode_batch

    def txn_round(values: list[bytes], seq: int, commit: bool) -> Any:
        res: dict[str, Any] = {}
        r = c.request(24, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                           "v3_and_below_producer_epoch": epoch,
                           "v3_and_below_topics": [{"name": t, "partitions": [0]}]}, version=3)
        res["add_partitions"] = [error_name(p.partition_error_code.value) for x in r.results_by_topic_v3_and_below
                                 for p in x.results_by_partition]
        b = encode_batch([(None, v, ()) for v in values], timestamp_ms=ctx.t0, producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        r = c.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 10000,
                          "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": b}]}]}, version=9)
        res["produce"] = _produce_outcome(r.responses[0].partition_responses[0])
        res["open_committed"] = _fetch_outcome(ctx.fetch(c, t, 0, 0, isolation_level=1))
        uncommitted = _fetch_outcome(ctx.fetch(c, t, 0, 0))
        res["open_uncommitted_values"] = [x["value"] for b in uncommitted["batches"] for x in b["records"]]
        # Kafka reports the LSO (the open transaction's first offset) at either isolation level.
        res["open_uncommitted_offsets"] = {k: uncommitted[k] for k in ("high_watermark", "last_stable_offset")}
        res["open_lso"] = _lo_outcome(ctx.list_offsets(c, t, 0, -1, isolation_level=1))
        r = c.request(26, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                           "committed": commit}, version=3)
        res["end_txn"] = err(r)
        time.sleep(0.5)  # markers are written asynchronously by the coordinator
        res["after_committed"] = _fetch_outcome(ctx.fetch(c, t, 0, 0, isolation_level=1))
        res["after_uncommitted"] = _fetch_outcome(ctx.fetch(c, t, 0, 0))
        return res

    out["committed"] = txn_round([b"c1", b"c2"], 0, True)
    out["aborted"] = txn_round([b"a1"], 2, False)
    return out


# --- idempotent producer -----------------------------------------------------------------------


@scenario
def idempotent_producer(ctx: Ctx) -> Any:
    """Sequence numbers: a retry returns the original offset, a gap is refused, old epochs are fenced."""
    from samsa.kproto.records import encode_batch

    c = ctx.connect()
    if 22 not in c.versions:
        ctx.skip("idempotent producers not implemented (issue 5): the broker does not advertise InitProducerId")
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    deadline = time.monotonic() + 30
    while True:  # a fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS until it has a block of producer ids
        r = c.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                           "producer_epoch": -1}, version=4)
        if err(r) != "COORDINATOR_LOAD_IN_PROGRESS(14)" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out["init_producer_id"] = {"error": err(r), "producer_id": r.producer_id, "epoch": r.producer_epoch}
    pid, epoch = r.producer_id, r.producer_epoch

    def send(name: str, n: int, seq: int, *, producer_id: int = pid, producer_epoch: int = epoch,
             records_of: str | None = None) -> None:
        """`records_of`: resend the records of that earlier send (a true retry: the same bytes)."""
        values = (records_of or name).encode()
        b = encode_batch([(None, b"%s-%d" % (values, i), ()) for i in range(n)], timestamp_ms=ctx.t0,
                         producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=seq)
        out[name] = _produce_outcome(ctx.produce(c, t, 0, b))

    send("first_seq0", 3, 0)
    send("retry_seq0", 3, 0, records_of="first_seq0")  # the same batch again: its original offset, nothing appended
    send("next_seq3", 2, 3)
    send("retry_older_seq0", 3, 0, records_of="first_seq0")  # still among the last 5 batches
    send("conflicting_replay_seq3", 2, 3)  # sequence 3 again with other records (Samsa refuses it, issue 20)
    send("gap_seq10", 1, 10)
    send("overlap_seq4", 2, 4)
    send("bumped_epoch_seq0", 1, 0, producer_epoch=epoch + 1)
    send("old_epoch_seq5", 1, 5)
    send("unknown_producer_seq7", 1, 7, producer_id=pid + 1000)
    send("unknown_producer_seq0", 1, 0, producer_id=pid + 1001)
    r = c.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                       "producer_epoch": -1}, version=4)
    out["second_init"] = {"error": err(r), "new_id": r.producer_id != pid, "epoch": r.producer_epoch}
    out["log"] = _fetch_outcome(ctx.fetch(c, t, 0, 0))
    return out


# --- offsets of a group that never joins (assign() + commitSync), DescribeCluster ----------------


@scenario
def simple_consumer_offsets(ctx: Ctx) -> Any:
    """OffsetCommit/OffsetFetch/OffsetDelete for a group with no members, as a consumer using assign() does."""
    c = ctx.connect()
    t = ctx.topic()
    group = ctx.topic("simple")
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2))}
    out["find_coordinator"] = ctx.find_coordinator(c, group, 0)

    def fetch_v8(groups: list[str], topics: list[str] | None) -> Any:
        r = c.request(9, {"groups": [{"group_id": g, "topics": None if topics is None else [
            {"name": x, "partition_indexes": [0, 1]} for x in topics]} for g in groups],
            "require_stable": True}, version=8)
        return [{"group": g.group_id, "error": err(g), "topics": [
            {"name": x.name, "partitions": [{"partition_index": p.partition_index, "offset": p.committed_offset,
                                             "leader_epoch": p.committed_leader_epoch, "metadata": p.metadata,
                                             "error": err(p)} for p in x.partitions]} for x in g.topics]}
                for g in r.groups]

    out["fetch_before"] = fetch_v8([group], [t])
    r = c.request(8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                      "group_instance_id": None, "retention_time_ms": -1,
                      "topics": [{"name": t, "partitions": [
                          {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": 0,
                           "committed_metadata": "meta"},
                          {"partition_index": 1, "committed_offset": 0, "committed_leader_epoch": -1,
                           "committed_metadata": None},
                          {"partition_index": 7, "committed_offset": 1, "committed_leader_epoch": -1,
                           "committed_metadata": None}]},
                                 {"name": ctx.topic("missing"), "partitions": [
                                     {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                      "committed_metadata": None}]}]}, version=8)
    out["commit"] = sorted([x.name, p.partition_index, err(p)] for x in r.topics for p in x.partitions)
    out["fetch_after"] = fetch_v8([group, ctx.topic("nogroup")], [t])
    out["fetch_all_topics"] = fetch_v8([group], None)
    out["describe"] = _describe_group(c, group)
    r = c.request(16, {"states_filter": []}, version=4)
    out["listed"] = [[g.group_id, g.protocol_type, g.group_state] for g in r.groups if g.group_id == group]
    r = c.request(47, {"group_id": group, "topics": [{"name": t, "partitions": [{"partition_index": 0}]}]},
                  version=0)
    out["offset_delete"] = {"error": err(r), "partitions": [[p.partition_index, err(p)] for x in r.topics
                                                            for p in x.partitions]}
    out["fetch_after_delete"] = fetch_v8([group], [t])
    return out


@scenario
def describe_cluster(ctx: Ctx) -> Any:
    c = ctx.connect()
    return {f"v{v}": jsonable(c.request(60, {"include_cluster_authorized_operations": False}, version=v))
            for v in (0, 1)}


# --- internal topics ---------------------------------------------------------------------------


@scenario
def internal_topics(ctx: Ctx) -> Any:
    """__consumer_offsets as a client sees it: Metadata, configs, and what a client may not do to it."""
    c = ctx.connect()
    out: dict[str, Any] = {"find_coordinator": ctx.find_coordinator(c, ctx.topic("g"), 0)}
    name = "__consumer_offsets"
    r = c.request(3, {"topics": [{"name": name}], "allow_auto_topic_creation": False}, version=12)
    t = r.topics[0]
    out["metadata"] = {"error": err(t), "is_internal": t.is_internal, "partitions": len(t.partitions),
                       "replication": sorted({len(p.replica_nodes) for p in t.partitions})}
    r = c.request(3, {"topics": None, "allow_auto_topic_creation": False}, version=12)
    out["listed_in_all_topics"] = name in [x.name for x in r.topics]
    r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": [
        "cleanup.policy", "compression.type", "segment.bytes", "min.insync.replicas"]}],
        "include_synonyms": False, "include_documentation": False}, version=4)
    out["configs"] = {x.name: [x.value, x.config_source] for x in r.results[0].configs}
    out["produce"] = _produce_outcome(ctx.produce(c, name, 0, ctx.batch([(b"k", b"v", ())])))
    out["create"] = err(ctx.create_topic(c, name, 1, wait=False))
    r = c.request(37, {"topics": [{"name": name, "count": 60, "assignments": None}], "timeout": 30000,
                       "validate_only": True}, version=3)
    out["create_partitions_validate"] = err(r.results[0])
    r = c.request(21, {"topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": 0}]}],
                       "timeout": 10000}, version=2)
    out["delete_records"] = err(r.topics[0].partitions[0])
    return out


# --- Fetch byte limits, group request errors -----------------------------------------------------


@scenario
def fetch_limits(ctx: Ctx) -> Any:
    """Fetch over three partitions with response and partition byte limits (KIP-74: first batch always whole)."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 3))}
    for p in range(3):
        for i in range(3):
            ctx.produce(c, t, p, ctx.batch([(None, b"p%d-b%d-" % (p, i) + b"x" * 300, ())]))

    def fetch(max_bytes: int, partition_max: int, offsets: tuple[int, int, int] = (0, 0, 0)) -> Any:
        r = c.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
                          "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                          "topics": [{"topic": t, "partitions": [
                              {"partition": p, "fetch_offset": o, "partition_max_bytes": partition_max,
                               "current_leader_epoch": -1, "log_start_offset": -1}
                              for p, o in enumerate(offsets)]}],
                          "forgotten_topics_data": (), "rack_id": ""}, version=12)
        return [{"partition": p.partition_index, "error": err(p), "hw": p.high_watermark,
                 "offsets": [rec["offset"] for b in records_of(p.records) for rec in b["records"]]}
                for x in r.responses for p in x.partitions]

    out["unlimited"] = fetch(1 << 20, 1 << 20)
    out["response_limit_100"] = fetch(100, 1 << 20)
    out["response_limit_800"] = fetch(800, 1 << 20)
    out["partition_limit_100"] = fetch(1 << 20, 100)
    out["partition_limit_800"] = fetch(1 << 20, 800)
    out["from_offsets_2_1_0"] = fetch(1 << 20, 1 << 20, (2, 1, 0))
    out["past_end_on_one"] = fetch(1 << 20, 1 << 20, (3, 9, 0))
    return out


@scenario
def group_request_errors(ctx: Ctx) -> Any:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup refusals: bad timeouts, empty ids, protocol mismatches."""
    c = ctx.connect()
    group = ctx.topic("group")
    out: dict[str, Any] = {"find_coordinator": ctx.find_coordinator(c, group, 0)}
    base = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(ctx.topic())}], "reason": None}

    def join(**kw: Any) -> Any:
        r = c.request(11, {**base, **kw}, version=7)
        return {"error": err(r), "generation": r.generation_id, "member_id_given": bool(r.member_id)}

    out["session_too_small"] = join(session_timeout=1)
    out["session_too_large"] = join(session_timeout=10_000_000)
    out["empty_group_id"] = join(group_id="")
    out["no_protocols"] = join(protocols=[])
    out["unknown_member_id"] = join(member_id="someone-else")
    m = c.request(11, base, version=7).member_id
    r = c.request(11, {**base, "member_id": m}, version=7)
    out["joined"] = {"error": err(r), "generation": r.generation_id}
    out["other_protocol_type"] = join(protocol_type="connect")
    out["no_common_protocol"] = join(protocols=[{"name": "roundrobin", "metadata": b""}])
    r = c.request(14, {"group_id": group, "generation_id": 1, "member_id": "nobody", "group_instance_id": None,
                       "protocol_type": "consumer", "protocol_name": "range", "assignments": []}, version=5)
    out["sync_unknown_member"] = err(r)
    r = c.request(14, {"group_id": group, "generation_id": 1, "member_id": m, "group_instance_id": None,
                       "protocol_type": "connect", "protocol_name": "range", "assignments": []}, version=5)
    out["sync_wrong_protocol_type"] = err(r)
    r = c.request(12, {"group_id": ctx.topic("nogroup"), "generation_id": 1, "member_id": m,
                       "group_instance_id": None}, version=4)
    out["heartbeat_unknown_group"] = err(r)
    r = c.request(13, {"group_id": group, "members": [{"member_id": "nobody", "group_instance_id": None,
                                                      "reason": None}]}, version=5)
    out["leave_unknown_member"] = {"error": err(r), "members": [err(x) for x in r.members]}
    r = c.request(13, {"group_id": group, "members": [{"member_id": m, "group_instance_id": None,
                                                      "reason": None}]}, version=5)
    out["leave"] = {"error": err(r), "members": [err(x) for x in r.members]}
    return out
