"""Poison records: copy records a consumer group cannot process into a quarantine topic and move the group past
them with an audited commit — `samsa groups skip` for an operator, `PoisonGuard` inside a Python consumer.

Kafka has no such path (its answer is an offset reset, which copies nothing); the seeds ask for "bounded
retry, stop, or quarantine with an auditable skip for each group". Both paths here share `quarantine_records`
(read the records from the partition leader, copy them with their keys, headers and timestamps plus headers
naming where they came from) and the commit metadata `samsa-skip:{...}`, which makes the broker write an audit
record beside the offset resets that `samsa groups history` shows.

A consumer using kafka-python (confluent-kafka is alike: pass the Message the same way)::

    from kafka import KafkaConsumer
    from samsa.broker.poison import PoisonGuard, RetryPolicy

    consumer = KafkaConsumer("orders", group_id="billing", bootstrap_servers="127.0.0.1:9092")
    with PoisonGuard(consumer, group="billing", bootstrap="127.0.0.1:9092",
                     policy=RetryPolicy(attempts=3, backoff_ms=200)) as guard:
        for record in consumer:
            guard.process(record, handle)  # handle(record) retried, then quarantined and committed past

`on_failure="stop"` raises `PoisonRecordError` instead (nothing is skipped; the group resumes at the record).
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from samsa.broker.cli.commands.client import RETRIABLE, Retry, RoutingClient
from samsa.broker.cli.commands.consume import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED, Consumer, list_offsets
from samsa.broker.cli.commands.errors import CliError, KafkaError
from samsa.broker.cli.commands.settings import Settings, parse_servers
from samsa.broker.group.records import encode_skip_metadata
from samsa.kproto.records import Header, Record, encode_batch

QUARANTINE_SUFFIX = ".quarantine"
HEADER_PREFIX = "samsa.quarantine."  # the headers added to each copy: source.topic, ..., operator
MAX_REASON_CHARS = 1000  # the reason travels in the commit metadata (offset.metadata.max.bytes 4096)
COPY_BATCH_RECORDS = 500  # records per produced batch, far below message.max.bytes for ordinary records
UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS, NOT_CONTROLLER = 3, 36, 41
ADMIN_TIMEOUT_MS = 30000

R = TypeVar("R")
T = TypeVar("T")


def default_operator() -> str:
    """The OS user, as `samsa groups reset-offsets` names who moved an offset."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "unknown"


def quarantine_topic_for(topic: str) -> str:
    return topic + QUARANTINE_SUFFIX


@dataclass(frozen=True, slots=True)
class Skipped:
    """What one skip did: records first_offset..last_offset (count of them; offsets may have gaps) of
    topic-partition were copied to quarantine_topic; the group's offset moves to next_offset."""

    group: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    count: int
    quarantine_topic: str
    reason: str
    operator: str

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def metadata(self) -> str:
        """The commit metadata that makes the broker audit the commit as a skip."""
        return encode_skip_metadata({
            "topic": self.topic, "partition": self.partition, "first": self.first_offset, "last": self.last_offset,
            "count": self.count, "quarantine": self.quarantine_topic, "reason": self.reason,
            "operator": self.operator})


def check_reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise CliError("a skip needs a reason: it is written to the group's audit history")
    if len(reason) > MAX_REASON_CHARS:
        raise CliError(f"the reason is {len(reason)} characters; at most {MAX_REASON_CHARS} fit the commit metadata")
    return reason


def read_records(client: RoutingClient, topic: str, partition: int, offset: int, count: int,
                 isolation: int = READ_COMMITTED) -> list[Record]:
    """The first `count` records at or after `offset`, below the high watermark (last stable offset for
    read_committed); a CliError when the partition holds fewer."""
    start = list_offsets(client, topic, [partition], EARLIEST)[partition]
    end = list_offsets(client, topic, [partition], LATEST)[partition]
    if not start <= offset < end:
        raise CliError(f"{topic}-{partition} holds offsets {start} to {end - 1}; offset {offset} is not among them")
    consumer = Consumer(client, topic, {partition: offset}, isolation)
    state = consumer.states[partition]
    out: list[Record] = []
    while len(out) < count:
        before = state.position
        for _, rec, next_position in consumer.poll(0):
            if rec is not None and rec.offset >= state.position and len(out) < count:
                out.append(rec)
            if len(out) < count:
                state.position = max(state.position, next_position)
        if len(out) < count and state.position == before:
            raise CliError(f"{topic}-{partition} has {len(out)} record(s) from offset {offset} to its end "
                           f"{state.end}; --count {count} asks for more")
    return out


def _admin_create(client: RoutingClient, name: str) -> None:
    """CreateTopics with the broker's default partitions and replication factor (KIP-464), to any broker
    (a KRaft broker forwards it to the active controller)."""

    def attempt() -> None:
        r = client.request(client.any_connection(), 19, {
            "topics": [{"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": (),
                        "configs": ()}], "timeout": ADMIN_TIMEOUT_MS, "validate_only": False})
        code = r.topics[0].error_code.value
        if code in (NOT_CONTROLLER, *RETRIABLE):
            raise Retry(code, f"creating topic {name!r}")
        if code not in (0, TOPIC_ALREADY_EXISTS):
            raise KafkaError(code, f"creating topic {name!r}", r.topics[0].error_message)

    client.retrying(attempt, what=f"create topic {name!r}")


def ensure_topic(client: RoutingClient, name: str) -> int:
    """The topic's partition count, creating it when missing; waits until it has leaders."""
    try:
        return len(client.topic(name, refresh=True).partitions)
    except KafkaError as e:
        if e.code != UNKNOWN_TOPIC_OR_PARTITION:
            raise
    _admin_create(client, name)

    def created() -> int:
        try:
            info = client.topic(name, refresh=True)
        except KafkaError as e:
            if e.code in (UNKNOWN_TOPIC_OR_PARTITION, *RETRIABLE):
                raise Retry(5, f"topic {name!r}") from None
            raise
        if not info.partitions or any(p.leader_id < 0 for p in info.partitions.values()):
            raise Retry(5, f"topic {name!r}")
        return len(info.partitions)

    return client.retrying(created, what=f"topic {name!r}")


def _copy(rec: Record, index: int, origin: dict[str, str]) -> Record:
    added = tuple(Header(HEADER_PREFIX + k, v.encode()) for k, v in origin.items())
    # The original timestamp as CreateTime: the copy says when the record was made, not when it was skipped.
    return Record(offset=index, timestamp_ms=rec.timestamp_ms, key=rec.key, value=rec.value,
                  headers=tuple(rec.headers) + added)


def produce_copies(client: RoutingClient, topic: str, partition: int, records: list[Record]) -> None:
    """acks=all produce of the copies, in batches, to `partition`'s leader (retried where Kafka retries;
    a retry after a lost reply may store a copy twice, which the source offset header tells apart)."""
    for i in range(0, len(records), COPY_BATCH_RECORDS):
        chunk = records[i:i + COPY_BATCH_RECORDS]
        batch = encode_batch([Record(j, r.timestamp_ms, r.key, r.value, r.headers) for j, r in enumerate(chunk)],
                             timestamp_ms=chunk[0].timestamp_ms)

        def attempt(batch: bytes = batch) -> None:
            r = client.request_node(client.leader(topic, partition), 0, {
                "transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
            pr = r.responses[0].partition_responses[0]
            code = pr.error_code.value
            if code in RETRIABLE:
                raise Retry(code, f"{topic}-{partition}")
            if code:
                raise KafkaError(code, f"produce to {topic}-{partition}", getattr(pr, "error_message", None))

        client.retrying(attempt, what=f"produce to {topic}")


def quarantine_records(client: RoutingClient, *, group: str, topic: str, partition: int, offset: int,
                       reason: str, count: int = 1, operator: str | None = None,
                       quarantine_topic: str | None = None, isolation: int = READ_COMMITTED,
                       exact: bool = False) -> Skipped:
    """Copy the first `count` records at or after `offset` of topic-partition into the quarantine topic
    (created with the broker's defaults when missing; the copies go to partition `partition % partitions`, so
    one source partition's copies keep their order). Commits nothing: the caller commits `Skipped.next_offset`
    with `Skipped.metadata`, as an admin (`samsa groups skip`) or as the member that owns the partition.
    `exact`: the first record must be at `offset` itself (a consumer's record, not a gap before others)."""
    if count < 1:
        raise CliError(f"--count {count}: at least one record")
    reason = check_reason(reason)
    operator = operator or default_operator()
    target = quarantine_topic or quarantine_topic_for(topic)
    if target == topic:
        raise CliError(f"the quarantine topic cannot be the topic itself ({topic!r})")
    records = read_records(client, topic, partition, offset, count, isolation)
    if exact and records[0].offset != offset:
        raise CliError(f"{topic}-{partition} has no record at offset {offset} (the next is {records[0].offset})")
    partitions = ensure_topic(client, target)
    copies = [_copy(rec, i, {"source.topic": topic, "source.partition": str(partition),
                             "source.offset": str(rec.offset), "group": group, "reason": reason,
                             "operator": operator}) for i, rec in enumerate(records)]
    produce_copies(client, target, partition % partitions, copies)
    return Skipped(group, topic, partition, records[0].offset, records[-1].offset, len(records), target, reason,
                   operator)


def connect(bootstrap: str, client_id: str = "samsa-poison") -> RoutingClient:
    return RoutingClient(Settings(parse_servers(bootstrap), "bootstrap", client_id=client_id))


# --- the consumer-side helper ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retry: `attempts` calls of the handler in all, sleeping backoff_ms, doubling up to
    backoff_max_ms, between them (Kafka's retry.backoff.ms / retry.backoff.max.ms shape)."""

    attempts: int = 3
    backoff_ms: int = 100
    backoff_max_ms: int = 5000

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_ms < 0 or self.backoff_max_ms < self.backoff_ms:
            raise ValueError(f"bad retry policy {self}")

    def delays_ms(self) -> Iterator[int]:
        """The sleeps between the attempts (attempts - 1 of them)."""
        delay = self.backoff_ms
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(delay * 2, self.backoff_max_ms)


class PoisonRecordError(Exception):
    """A record the handler failed on `attempts` times, with on_failure="stop"; the cause is chained."""

    def __init__(self, topic: str, partition: int, offset: int, attempts: int) -> None:
        super().__init__(f"{topic}-{partition} offset {offset} failed {attempts} time(s); stopped (not skipped)")
        self.topic, self.partition, self.offset, self.attempts = topic, partition, offset, attempts


def _get(record: Any, name: str) -> Any:
    """kafka-python's ConsumerRecord has attributes, confluent-kafka's Message has methods."""
    value = getattr(record, name)
    return value() if callable(value) else value


def _client_of(consumer: object) -> str:
    modules = [c.__module__ for c in type(consumer).__mro__]
    if any(m.startswith("confluent_kafka") or m == "cimpl" for m in modules):  # its C classes say "cimpl"
        return "confluent-kafka"
    if any(m == "kafka" or m.startswith("kafka.") for m in modules):
        return "kafka-python"
    raise TypeError(f"{type(consumer).__name__}: not a kafka-python or confluent-kafka consumer; pass commit=")


def commit_with(consumer: object) -> Callable[[str, int, int, str], None]:
    """A synchronous commit of one partition's offset with metadata, through the consumer itself (it is the
    member that owns the partition, so its generation makes the commit valid while the group is active)."""
    if _client_of(consumer) == "confluent-kafka":
        def confluent(topic: str, partition: int, offset: int, metadata: str) -> None:
            from confluent_kafka import TopicPartition

            consumer.commit(offsets=[TopicPartition(topic, partition, offset, metadata=metadata)],  # type: ignore[attr-defined]
                            asynchronous=False)

        return confluent

    def kafka_python(topic: str, partition: int, offset: int, metadata: str) -> None:
        from kafka.structs import OffsetAndMetadata, TopicPartition  # type: ignore[import-untyped]

        fields = [offset, metadata, -1][:len(OffsetAndMetadata._fields)]  # 2.x has no leader_epoch
        consumer.commit({TopicPartition(topic, partition): OffsetAndMetadata(*fields)})  # type: ignore[attr-defined]

    return kafka_python


@dataclass
class PoisonGuard:
    """Runs a handler on each record with bounded retry; when it keeps failing, stops (raises
    PoisonRecordError) or quarantines the record through `quarantine_records` and commits past it as the
    member, so the broker audits the skip. Call it for every record of a partition, in order: the commit
    after a quarantined record says every record before it was processed."""

    consumer: object
    group: str
    bootstrap: str
    on_failure: Literal["quarantine", "stop"] = "quarantine"
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    quarantine_topic: str | None = None
    operator: str | None = None
    commit: Callable[[str, int, int, str], None] | None = None  # default: through the consumer (commit_with)
    sleep: Callable[[float], None] = time.sleep
    quarantined: list[Skipped] = field(default_factory=list, init=False)  # what this guard skipped, in order
    _client: RoutingClient | None = field(default=None, init=False, repr=False)  # opened at the first skip

    def __post_init__(self) -> None:
        if self.commit is None:  # fail at construction, not at the first poison record
            self.commit = commit_with(self.consumer)

    def process(self, record: R, handler: Callable[[R], T]) -> T | None:
        """handler(record), retried; None when the record was quarantined."""
        delays = self.policy.delays_ms()
        attempt = 0
        while True:
            attempt += 1
            try:
                return handler(record)
            except Exception as e:  # the user's code: any failure counts, as a poison record's would
                delay = next(delays, None)
                if delay is not None:
                    self.sleep(delay / 1000)
                    continue
                topic, partition, offset = _get(record, "topic"), _get(record, "partition"), _get(record, "offset")
                if self.on_failure == "stop":
                    raise PoisonRecordError(topic, partition, offset, attempt) from e
                reason = f"{type(e).__name__}: {e}"[:MAX_REASON_CHARS - 40] + f" (after {attempt} attempts)"
                self._quarantine(topic, partition, offset, reason)
                return None

    def _quarantine(self, topic: str, partition: int, offset: int, reason: str) -> None:
        if self._client is None:
            self._client = connect(self.bootstrap, client_id=f"samsa-poison/{self.operator or default_operator()}")
        # read_uncommitted: the consumer already holds this record, whatever its isolation level
        skipped = quarantine_records(self._client, group=self.group, topic=topic, partition=partition,
                                     offset=offset, reason=reason, operator=self.operator,
                                     quarantine_topic=self.quarantine_topic, isolation=READ_UNCOMMITTED,
                                     exact=True)
        assert self.commit is not None  # set in __post_init__
        self.commit(topic, partition, skipped.next_offset, skipped.metadata)
        self.quarantined.append(skipped)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> PoisonGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
