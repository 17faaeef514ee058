"""Differential scenarios: the same function runs against the reference Apache Kafka and against Samsa.

A scenario is ``def name(ctx: Ctx) -> JSON-able outcome``, registered with ``@scenario``. It talks to
the broker through ``ctx.connect()`` (a raw ``broker.client.Connection``: exact API versions, exact
fields) or any client given ``ctx.bootstrap``, and returns what a user could observe: offsets,
records, error codes, states. It must not look at ``ctx.target`` to behave differently; the only
exception is ``ctx.skip(...)`` for a feature Samsa does not advertise yet, decided from ApiVersions.

The test (``test_differential.py``) runs each scenario on both brokers, passes both outcomes
through ``normalize.normalize`` (the single place where allowed differences are erased, each rule
commented) and asserts they are equal, printing a unified diff of the two JSON documents.
``DIFF_DUMP=DIR`` also writes ``DIR/<scenario>.<target>.json`` (raw and normalised).
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import enum
import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch

SCENARIOS: dict[str, Callable[[Ctx], Any]] = {}


def scenario(fn: Callable[[Ctx], Any]) -> Callable[[Ctx], Any]:
    SCENARIOS[fn.__name__] = fn
    return fn


# Kafka answers a config or feature change once its controller committed it; its broker applies the record a
# moment later (longer under load), so a read right after may show the old state. After such a write, the next
# read of configs or features is repeated until SETTLED_READS answers in a row agree, on both brokers alike.
WRITES_THAT_PROPAGATE = frozenset({33, 44, 57})  # AlterConfigs, IncrementalAlterConfigs, UpdateFeatures
READS_THAT_LAG = frozenset({18, 32})  # ApiVersions (finalized features), DescribeConfigs
SETTLED_READS = 4
SETTLE_POLL_S = 0.1
SETTLE_TIMEOUT_S = 10.0


class SettlingConnection(Connection):
    """A Connection whose config and feature reads after a config or feature write wait for the write to show
    (see WRITES_THAT_PROPAGATE). `unsettled` is shared by the connections of one scenario run."""

    def __init__(self, *args: Any, unsettled: list[bool], **kwargs: Any) -> None:
        self._unsettled = unsettled  # before Connection's own ApiVersions
        super().__init__(*args, **kwargs)

    def request(self, api_key: int, values: Mapping[str, Any], *, version: int | None = None,
                expect_response: bool = True) -> Any:
        response = super().request(api_key, values, version=version, expect_response=expect_response)
        if api_key in WRITES_THAT_PROPAGATE:
            self._unsettled[0] = True
        elif api_key in READS_THAT_LAG and self._unsettled[0] and expect_response:
            answers = [jsonable(response)]
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while len(answers) < SETTLED_READS or any(a != answers[-1] for a in answers[-SETTLED_READS:]):
                if time.monotonic() > deadline:
                    break
                time.sleep(SETTLE_POLL_S)
                response = super().request(api_key, values, version=version)
                answers.append(jsonable(response))
            self._unsettled[0] = False
        return response


class ScenarioSkipped(Exception):
    """Raised by ``ctx.skip``: the scenario does not apply to this broker yet (reason given)."""


@dataclass
class Ctx:
    target: str  # "kafka" or "samsa" -- for messages and skips only, never to branch behaviour
    bootstrap: str
    scenario: str
    t0: int  # base for the timestamps the scenario sets: the same in both runs (see ``context``)
    _conns: list[Connection] = field(default_factory=list)
    _unsettled: list[bool] = field(default_factory=lambda: [False])  # see SettlingConnection

    @property
    def host(self) -> str:
        return self.bootstrap.split(",")[0].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])

    def connect(self, client_id: str = "samsa-differential") -> Connection:
        conn = SettlingConnection(self.host, self.port, client_id=client_id, timeout_s=30.0,
                                  unsettled=self._unsettled)
        self._conns.append(conn)
        return conn

    def close(self) -> None:
        for c in self._conns:
            c.close()
        self._conns.clear()

    def topic(self, suffix: str = "t") -> str:
        """A topic name unique to this scenario (the same on both brokers, so outcomes compare)."""
        return f"diff-{self.scenario.replace('_', '-')}-{suffix}"

    def skip(self, reason: str) -> None:
        raise ScenarioSkipped(reason)

    # --- helpers shared by scenarios (plain protocol, same versions on both brokers) ----------------

    def create_topic(self, conn: Connection, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None,
                     *, rf: int = 1, version: int = 5, wait: bool = True) -> Any:
        r = conn.request(19, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": (),
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout": 30000, "validate_only": False}, version=version)
        t = r.topics[0]
        if wait and t.error_code.value == 0:
            self.wait_for_leaders(conn, name, partitions)
        return t

    def wait_for_leaders(self, conn: Connection, name: str, partitions: int, timeout: float = 30.0) -> None:
        """Kafka answers CreateTopics before the broker has the partitions: wait until Metadata has leaders."""
        deadline = time.monotonic() + timeout
        while True:
            r = conn.request(3, {"topics": [{"name": name}], "allow_auto_topic_creation": False}, version=9)
            t = r.topics[0]
            if t.error_code.value == 0 and len(t.partitions) >= partitions and all(
                    p.leader_id >= 0 and p.error_code.value == 0 for p in t.partitions) and all(
                    self.list_offsets(conn, name, p.partition_index, -1).error_code.value == 0
                    for p in t.partitions):
                return  # (ListOffsets too: Kafka's Metadata may name the leader before its log exists)
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.target}: topic {name} has no leaders after {timeout}s: {t}")
            time.sleep(0.1)

    def produce(self, conn: Connection, topic: str, partition: int, batch: bytes, *, acks: int = -1,
                version: int = 9) -> Any:
        r = conn.request(0, {"transactional_id": None, "acks": acks, "timeout": 10000,
                             "topic_data": [{"name": topic, "partition_data": [{"index": partition,
                                                                                "records": batch}]}]},
                         version=version, expect_response=acks != 0)
        return None if acks == 0 else r.responses[0].partition_responses[0]

    def batch(self, records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
              *, ts: int = 0, **kw: Any) -> bytes:
        """A v2 batch whose timestamps are ``t0 + ts`` (so both runs report the same relative times)."""
        return encode_batch(list(records), timestamp_ms=self.t0 + ts, **kw)

    def fetch(self, conn: Connection, topic: str, partition: int, offset: int, *, version: int = 12,
              isolation_level: int = 0, current_leader_epoch: int = -1, max_bytes: int = 1 << 20,
              max_wait_ms: int = 0) -> Any:
        r = conn.request(1, {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 0, "max_bytes": 50 << 20,
                             "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": topic,
                                         "topic_id": self.topic_id(conn, topic) if version >= 13 else None,
                                         "partitions": [
                                 {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                                  "current_leader_epoch": current_leader_epoch, "log_start_offset": -1}]}],
                             "forgotten_topics_data": (), "rack_id": ""}, version=version)
        return r.responses[0].partitions[0]

    def find_coordinator(self, conn: Connection, key: str, key_type: int, timeout: float = 60.0) -> Any:
        """FindCoordinator v4 until it answers (Kafka creates __consumer_offsets / __transaction_state on first use).

        Returns the outcome: the error code and whether the coordinator is this broker."""
        deadline = time.monotonic() + timeout
        while True:
            r = conn.request(10, {"key_type": key_type, "coordinator_keys": [key]}, version=4)
            c = r.coordinators[0]
            ready = c.error_code.value == 0
            if ready and key_type == 0:  # and the coordinator has loaded its __consumer_offsets partition
                g = conn.request(15, {"groups": [key], "include_authorized_operations": False}, version=5).groups[0]
                ready = g.error_code.value == 0
            if ready or time.monotonic() > deadline:
                return {"error": err(c), "key": c.key, "this_broker": (c.host, c.port) == (self.host, self.port)}
            time.sleep(0.2)

    def topic_id(self, conn: Connection, topic: str) -> Any:
        """Fetch v13+ names topics by id (from Metadata; the zero UUID for a topic that does not exist)."""
        r = conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}, version=12)
        return r.topics[0].topic_id or "00000000-0000-0000-0000-000000000000"

    def list_offsets(self, conn: Connection, topic: str, partition: int, timestamp: int, *, version: int = 7,
                     current_leader_epoch: int = -1, isolation_level: int = 0) -> Any:
        r = conn.request(2, {"replica_id": -1, "isolation_level": isolation_level, "timeout": 10000,
                             "topics": [{"name": topic, "partitions": [
                                 {"partition_index": partition, "timestamp": timestamp,
                                  "current_leader_epoch": current_leader_epoch, "max_num_offsets": 1}]}]},
                         version=version)
        return r.topics[0].partitions[0]


def sasl_plain_connection(bootstrap: str, username: str, password: str, *,
                          client_id: str = "samsa-differential") -> Connection:
    """A connection to a SASL_PLAINTEXT listener, authenticated with PLAIN (SaslHandshake v1, then
    SaslAuthenticate) before anything else is sent: every request on it runs as ``User:<username>``."""
    from samsa.broker.security.client import ClientSecurity

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    security = ClientSecurity(listener="SASL_PLAINTEXT", ssl_context=None, mechanism="PLAIN",
                              username=username, password=password)
    return Connection(host, int(port), client_id=client_id, timeout_s=30.0, security=security)


@contextmanager
def context(target: str, bootstrap: str, name: str, t0: int) -> Iterator[Ctx]:
    """Both runs of a scenario get the same ``t0``, so the batches they write are byte-identical."""
    ctx = Ctx(target=target, bootstrap=bootstrap, scenario=name, t0=t0)
    try:
        yield ctx
    finally:
        ctx.close()


# --- turning responses into JSON ---------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """A kio entity (or anything nested) as plain JSON values: dataclasses -> dicts, error codes ->
    "name(code)", timedeltas -> ms, datetimes -> epoch ms, UUIDs -> str, bytes -> text or hex."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if type(value).__name__ == "ErrorCode":
        return error_name(value.value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return "hex:" + b.hex()
    return repr(value)


def error_name(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return f"{ErrorCode(code).name.upper()}({code})"
    except ValueError:
        return f"UNKNOWN({code})"


def err(entity: Any) -> str:
    return error_name(entity.error_code.value)


def records_of(data: bytes | None) -> list[dict[str, Any]]:
    """The batches of a Fetch answer: header fields and each record (offset, timestamp, key, value, headers)."""
    out = []
    if not data:
        return out
    for h, recs in decode_batches(data, max_decompressed_bytes=1 << 26, allow_partial_tail=True):
        ts_type = "LogAppendTime" if h.attributes & 0x08 else "CreateTime"
        out.append({
            "base_offset": h.base_offset,
            "batch_length": h.batch_length,
            "crc": h.crc,
            "last_offset_delta": h.last_offset_delta,
            "partition_leader_epoch": h.partition_leader_epoch,
            "compression": h.attributes & 0x07,
            "timestamp_type": ts_type,
            "transactional": bool(h.attributes & 0x10),
            "control": bool(h.attributes & 0x20),
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "base_sequence": h.base_sequence,
            "max_timestamp": h.max_timestamp,
            "records": [{"offset": r.offset, "timestamp": r.timestamp_ms, "timestamp_type": ts_type,
                         **({"control": True} if h.attributes & 0x20 else {}),
                         "key": jsonable(r.key), "value": jsonable(r.value),
                         "headers": [[x.key, jsonable(x.value)] for x in r.headers]} for r in recs],
        })
    return out


# --- comparing ---------------------------------------------------------------------------------


def dumps(outcome: Any) -> str:
    return json.dumps(outcome, indent=1, sort_keys=True, default=repr)


def diff(kafka: Any, samsa: Any) -> str:
    a, b = dumps(kafka).splitlines(), dumps(samsa).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "kafka", "samsa", lineterm="", n=4))


@dataclass
class Comparison:
    kafka: Any  # normalised, masked
    samsa: Any
    fixed: list[str]  # KNOWN_DIFFERENCES patterns that no longer differ
    known: list[str]  # KNOWN_DIFFERENCES patterns that still differ (masked)

    @property
    def equal(self) -> bool:
        return self.kafka == self.samsa

    def report(self) -> str:
        return diff(self.kafka, self.samsa)


def compare(name: str, kafka: Any, samsa: Any, *, t0: int, now: int, strict: bool = False) -> Comparison:
    """Normalise both outcomes (normalize.py), mask the allowed and the known differences, compare."""
    import copy

    from differential import normalize as n

    k = n.normalize(copy.deepcopy(kafka), t0=t0, now=now)
    s = n.normalize(copy.deepcopy(samsa), t0=t0, now=now)
    n.mask(k, s, [(p, r) for sc, p, r in n.ALLOWED_AT if sc == name], "<allowed difference>")
    known, fixed = ([], []) if strict else n.mask(k, s, n.KNOWN_DIFFERENCES.get(name, []), "<known difference>")
    return Comparison(k, s, fixed, known)
