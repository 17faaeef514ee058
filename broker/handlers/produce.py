"""Produce (key 0), v3-v13.

v3 requires record batches v2 and adds transactional_id; v5 adds log_start_offset; v8 adds
record_errors and error_message; v9 is flexible; v10 adds current_leader/node_endpoints tags
(KIP-951); v11 changes only client behaviour; v12 is transactions V2 (the leader adds a transactional
batch's partition to the transaction, broker/txn/verification.py); v13 names topics by topic_id instead of
name (KIP-516), in the request and the answer: an id the broker does not know is UNKNOWN_TOPIC_ID for each
of its partitions, an unknown partition of a known topic UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
A request with acks=0 gets no response at all, as in Kafka.

A leader cut off from the controller for its session (broker/lifecycle.py, cut_off) holds a Produce for the
partitions it leads until a heartbeat goes through again (then answers as usual), or for the request's
timeout or one session at most (then NOT_LEADER_OR_FOLLOWER): the connection stays muted meanwhile, so the
producer's later requests keep their order. Refusing at once and accepting again once healed broke a
pipelined idempotent producer's sequence (chaos seed 313334002; librdkafka then bumped its epoch and wrote
another partition's in-doubt batch twice). A Kafka leader cut off this long keeps its requests waiting too.

An idempotent batch that follows a sequence this leader refused NOT_ENOUGH_REPLICAS (before appending it)
is refused NOT_ENOUGH_REPLICAS too, not OUT_OF_ORDER_SEQUENCE_NUMBER, for REFUSED_GAP_MS: when the ISR grows
back in the middle of a producer's pipelined requests, Kafka refuses the earlier ones and calls a later one
out of order; librdkafka then bumps its epoch and sends again, as new, a batch the previous leader had
written before it died (chaos seeds 813923003, 498817000, 498817009: its retry of that batch was refused
"not enough replicas", so the producer took it for not persisted). Refused as retriable, the producer sends
its batches again in order and the broker recognises the written one as a duplicate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.metadata import INTERNAL_TOPICS
from samsa.broker.replica_manager import Partition
from samsa.broker.security.acl_requests import ProduceChecks, produce_authorization
from samsa.broker.security.listeners import endpoint_on
from samsa.broker.wire import build, field, ms
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.storage.errors import StorageError
from samsa.storage.validator import (
    LogValidatorConfig,
    ValidatedBatch,
    ValidationFailure,
    is_large,
    validate_batch,
)

if TYPE_CHECKING:
    from kio.schema.produce import v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13

    from samsa.broker.metadata.image import BrokerImage
    ProduceRequest = (v3.ProduceRequest | v4.ProduceRequest | v5.ProduceRequest | v6.ProduceRequest
                      | v7.ProduceRequest | v8.ProduceRequest | v9.ProduceRequest | v10.ProduceRequest
                      | v11.ProduceRequest | v12.ProduceRequest | v13.ProduceRequest)
    ProduceResponse = (v3.ProduceResponse | v4.ProduceResponse | v5.ProduceResponse | v6.ProduceResponse
                       | v7.ProduceResponse | v8.ProduceResponse | v9.ProduceResponse | v10.ProduceResponse
                       | v11.ProduceResponse | v12.ProduceResponse | v13.ProduceResponse)

    # acks=0 gets no response; acks=all (or a large batch) answers later.
    ProduceAnswer = ProduceResponse | None | Awaitable[ProduceResponse | None]

API = ApiSpec(key=0, min_version=3, max_version=13)

logger = logging.getLogger(__name__)

# Worker threads that validate large batches (storage.validator.is_large): few, so a flood of them queues
# instead of taking every core.
VALIDATION_THREADS = 2
_EXECUTOR: ThreadPoolExecutor | None = None
_VALIDATOR_CONFIGS_MAX = 10_000
_VALIDATOR_CONFIGS: dict[tuple[str, int], tuple[Any, LogValidatorConfig]] = {}


@dataclass(frozen=True, slots=True)
class RecordError:
    batch_index: int
    message: str | None


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's answer (a PartitionProduceResponse before it is built for the version)."""

    error: ErrorCode
    message: str | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1  # -1: CreateTime topic (answered as null)
    log_start_offset: int = -1
    record_errors: tuple[RecordError, ...] = ()
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch), KIP-951


@dataclass(frozen=True, slots=True)
class AwaitingReplication:
    """An acks=all append whose answer waits until the high watermark reaches `required_offset`
    (Kafka's DelayedProduce); `appended` is the answer if it does in time."""

    appended: PartitionResult
    partition: Partition
    required_offset: int
    min_isr: int
    leader_epoch: int


PartitionOutcome = PartitionResult | AwaitingReplication
# Per topic entry of the request: its name (None: a topic id the broker does not know), the key the request
# named it by (the name before v13, the topic id from v13: the answer echoes it) and (partition index,
# outcome) in request order.
_Results = list[tuple[str | None, str | uuid.UUID | None, list[tuple[int, PartitionOutcome]]]]


def _result(error: ErrorCode, message: str | None = None, log_start: int = -1) -> PartitionResult:
    return PartitionResult(error, message, log_start_offset=log_start)


def _failure(failure: ValidationFailure, log_start: int) -> PartitionResult:
    errors = tuple(RecordError(e.batch_index, e.message) for e in failure.record_errors)
    return PartitionResult(failure.error_code, failure.message,
                           log_start_offset=log_start if failure.with_log_start else -1, record_errors=errors)


def _validator_config(ctx: RequestContext, partition: Partition) -> LogValidatorConfig:
    """The partition's LogValidatorConfig, rebuilt only when the topic's effective configs change."""
    topic_config = ctx.broker.topic_config(partition.topic)
    key = (partition.topic, partition.partition_id)
    cached = _VALIDATOR_CONFIGS.get(key)
    if cached is not None and cached[0] is topic_config:
        return cached[1]
    limit = ctx.broker.config.get_int("samsa.max.decompressed.batch.bytes")
    config = LogValidatorConfig.from_topic_config(f"{partition.topic}-{partition.partition_id}", topic_config, limit)
    if len(_VALIDATOR_CONFIGS) >= _VALIDATOR_CONFIGS_MAX:
        _VALIDATOR_CONFIGS.clear()
    _VALIDATOR_CONFIGS[key] = (topic_config, config)
    return config


def _leader(ctx: RequestContext, topic: str, index: int, records: bytes | None
            ) -> tuple[Partition, bytes] | PartitionResult:
    """The partition to append `records` to, or the answer that refuses them before validation."""
    partition = ctx.broker.replica_manager.get_partition(topic, index)
    if partition is None:
        return _result(ctx.broker.replica_manager.missing_error(topic, index))
    if topic in INTERNAL_TOPICS:
        # Only the coordinators write their own topics (through the replica manager, not this handler).
        return _result(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}")
    if partition.leader_id != ctx.broker.node_id or ctx.broker.lifecycle.presumed_fenced():
        return _result(ErrorCode.not_leader_or_follower)
    if not records:
        return _result(ErrorCode.invalid_record, "The record set is empty")
    return partition, records


def _append(ctx: RequestContext, partition: Partition, validated: ValidatedBatch | ValidationFailure, acks: int,
            transactional_id: str | None, request_bytes: int) -> PartitionOutcome:
    """After LogValidator: the broker's own checks (transaction, min.insync.replicas), then the append.
    `request_bytes`: the size of the producer's batch (what BytesInPerSec counts, as in Kafka)."""
    log_start = partition.log.log_start_offset
    if isinstance(validated, ValidationFailure):
        return _failure(validated, log_start)
    header = validated.header
    if header.is_transactional:
        # Only for a partition of the producer's ongoing transaction (KIP-890 part 1's check); v12+ adds it
        # (transactions V2, KIP-890 part 2).
        error = ctx.broker.txn.verify_produce(header.producer_id, header.producer_epoch, partition.topic,
                                              partition.partition_id, transactional_id, ctx.version >= 12)
        if error != ErrorCode.none:
            return _result(error, "the partition is not part of the producer's ongoing transaction"
                           if error == ErrorCode.invalid_txn_state else None)
    if acks == -1:
        min_isr = ctx.broker.topic_settings(partition.topic).min_insync_replicas
        if len(partition.isr) < min_isr:
            _note_refused(partition, header.producer_id, header.producer_epoch, header.base_sequence, ctx.now_ms)
            return _result(ErrorCode.not_enough_replicas,
                           f"The size of the current ISR {len(partition.isr)} is insufficient to satisfy "
                           f"the min.isr requirement of {min_isr}", log_start=log_start)
    try:
        info = partition.append_as_leader(bytearray(validated.records), ctx.now_ms)
    except StorageError as e:
        error = ErrorCode(e.error_code)
        if error == ErrorCode.out_of_order_sequence_number:
            refused = _after_refused(partition, header.producer_id, header.producer_epoch, header.base_sequence,
                                     ctx.now_ms)
            if refused is not None:
                return _result(ErrorCode.not_enough_replicas,
                               f"sequence {header.base_sequence} follows sequence {refused}, which this leader "
                               f"refused with NOT_ENOUGH_REPLICAS: send it again first", log_start=log_start)
        # Kafka reports the log start offset with producer-state refusals, not with storage failures.
        log_start = -1 if error == ErrorCode.kafka_storage_error else partition.log.log_start_offset
        return _result(error, str(e) or None, log_start=log_start)
    if partition.refused_sequences:
        _fill_refused(partition, header.producer_id, header.producer_epoch,
                      header.base_sequence + header.last_offset_delta)
    if not info.duplicate:  # BrokerTopicMetrics BytesInPerSec / MessagesInPerSec (topic_metrics.py)
        ctx.broker.request_metrics.topics.record_append(partition.topic, request_bytes,
                                                        info.last_offset - info.first_offset + 1)
    result = PartitionResult(ErrorCode.none, None, info.first_offset, info.log_append_time_ms, info.log_start_offset)
    if acks == -1 and partition.log.high_watermark <= info.last_offset:
        # acks=all: answered once every in-sync replica has the batch (Kafka's DelayedProduce)
        min_isr = ctx.broker.topic_settings(partition.topic).min_insync_replicas
        return AwaitingReplication(result, partition, info.last_offset + 1, min_isr, partition.leader_epoch)
    return result


# How long after a NOT_ENOUGH_REPLICAS refusal a later sequence of the same producer is refused the same way
# instead of as out of order (see the module docstring); producers retry well within it, and one that gives
# up on a batch bumps its epoch (KIP-360), which ends it too.
REFUSED_GAP_MS = 60_000
# The most producers remembered per partition; the oldest refusals go first.
REFUSED_PRODUCERS_MAX = 1000


def _note_refused(partition: Partition, producer_id: int, epoch: int, sequence: int, now_ms: int) -> None:
    """Remember that this leader refused (without appending) `sequence` of an idempotent producer."""
    if producer_id < 0 or sequence < 0:
        return
    refused = partition.refused_sequences
    known = refused.get(producer_id)
    if known is not None and known[0] == epoch and known[1] <= sequence and now_ms - known[2] <= REFUSED_GAP_MS:
        return  # the gap already starts at an earlier sequence
    if len(refused) >= REFUSED_PRODUCERS_MAX:
        for pid in sorted(refused, key=lambda p: refused[p][2])[:len(refused) // 2]:
            del refused[pid]
    refused[producer_id] = (epoch, sequence, now_ms)


def _fill_refused(partition: Partition, producer_id: int, epoch: int, last_sequence: int) -> None:
    """A batch of the producer up to `last_sequence` was appended or recognised as written: a refusal at or
    before it (or of another epoch) no longer leaves a gap."""
    known = partition.refused_sequences.get(producer_id)
    if known is not None and (known[0] != epoch or known[1] <= last_sequence):
        del partition.refused_sequences[producer_id]


def _after_refused(partition: Partition, producer_id: int, epoch: int, sequence: int, now_ms: int) -> int | None:
    """The refused sequence an out-of-order `sequence` follows (see _note_refused), None if there is none."""
    known = partition.refused_sequences.get(producer_id)
    if known is None or known[0] != epoch or now_ms - known[2] > REFUSED_GAP_MS:
        return None
    return known[1] if known[1] < sequence else None


def _produce_partition(ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int,
                       transactional_id: str | None) -> PartitionOutcome:
    found = _leader(ctx, topic, index, records)
    if isinstance(found, PartitionResult):
        return found
    partition, data = found
    validated = validate_batch(data, _validator_config(ctx, partition), ctx.now_ms)
    return _append(ctx, partition, validated, acks, transactional_id, len(data))


async def _produce_partition_off_loop(ctx: RequestContext, topic: str, index: int, records: bytes | None,
                                      acks: int, transactional_id: str | None,
                                      remote_add: bool = False) -> PartitionOutcome:
    """A large batch is validated (decompressed, walked, maybe recompressed) on a worker thread, so the
    event loop keeps serving other connections; the append itself happens back on the loop.
    `remote_add` (transactions V2, another broker coordinating): a transactional batch waits for the
    coordinator to add its partition before it is appended (Kafka's AddPartitionsToTxnManager callback)."""
    found = _leader(ctx, topic, index, records)
    if isinstance(found, PartitionResult):
        return found
    partition, data = found
    config = _validator_config(ctx, partition)
    if is_large(data):
        loop = asyncio.get_running_loop()
        validated = await loop.run_in_executor(_validation_executor(), validate_batch, data, config, ctx.now_ms)
    else:
        validated = validate_batch(data, config, ctx.now_ms)
    if remote_add and transactional_id is not None and isinstance(validated, ValidatedBatch) \
            and validated.header.is_transactional:
        h = validated.header
        await ctx.broker.txn.remote.wait_added(transactional_id, h.producer_id, h.producer_epoch, topic, index)
    # Leadership may have moved while the batch was being validated or added.
    found = _leader(ctx, topic, index, records)
    if isinstance(found, PartitionResult):
        return found
    return _append(ctx, found[0], validated, acks, transactional_id, len(data))


def _validation_executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=VALIDATION_THREADS, thread_name_prefix="samsa-validate")
    return _EXECUTOR


async def _await_replication(ctx: RequestContext, waits: list[AwaitingReplication],
                             timeout_ms: int) -> dict[int, PartitionResult]:
    """Complete acks=all answers: the high watermark passes the batch (then NOT_ENOUGH_REPLICAS_AFTER_APPEND
    if the ISR shrank below min.insync.replicas meanwhile), leadership moves (NOT_LEADER_OR_FOLLOWER), or
    the request's timeout passes (REQUEST_TIMED_OUT; the records may still be committed later).
    The answers are keyed by id() of the wait they complete."""
    node = ctx.broker.node_id
    done: dict[int, PartitionResult] = {}
    pending = list(waits)
    with anyio.move_on_after(max(0, timeout_ms) / 1000):
        while pending:
            still: list[AwaitingReplication] = []
            for wait in pending:
                partition = wait.partition
                if partition.leader_id != node or partition.leader_epoch != wait.leader_epoch:
                    done[id(wait)] = _failed(wait.appended, ErrorCode.not_leader_or_follower)
                elif partition.log.high_watermark >= wait.required_offset:
                    done[id(wait)] = (_failed(wait.appended, ErrorCode.not_enough_replicas_after_append)
                                      if len(partition.isr) < wait.min_isr else wait.appended)
                else:
                    still.append(wait)
            pending = still
            if not pending:
                break
            event = anyio.Event()
            partitions = {w.partition for w in pending}
            for p in partitions:
                p.add_waiter(event)
            try:
                await event.wait()
            finally:
                for p in partitions:
                    p.remove_waiter(event)
    for wait in pending:
        done[id(wait)] = _failed(wait.appended, ErrorCode.request_timed_out)
    return done


def _failed(appended: PartitionResult, error: ErrorCode) -> PartitionResult:
    """An appended batch's answer when its acks=all wait fails: the error, and no base offset."""
    return dataclasses.replace(appended, error=error, base_offset=-1)


def _topic_name(ctx: RequestContext, topic: object) -> tuple[str | None, str | uuid.UUID | None]:
    """The name of a request's topic entry (None: an id the broker does not know) and the key the request
    named it by: its name before v13, its topic_id from v13 (KIP-516)."""
    if ctx.version < 13:
        name: str = field(topic, "name")
        return name, name
    topic_id: uuid.UUID | None = field(topic, "topic_id")
    found = ctx.broker.image.topics_by_id.get(str(topic_id)) if topic_id is not None else None
    return (found.name if found is not None else None), topic_id


def _authorization(request: ProduceRequest, ctx: RequestContext) -> ProduceChecks:
    """WRITE on each topic, on the transactional id for transactional batches (broker.security.acl_requests);
    topics named by an id the broker does not know are answered UNKNOWN_TOPIC_ID before any check."""
    named = ((_topic_name(ctx, t)[0], t) for t in request.topic_data)
    return produce_authorization(ctx, request.transactional_id, (
        (name, (d.records for d in t.partition_data)) for name, t in named if name is not None))


def _remote_add(request: ProduceRequest, ctx: RequestContext) -> bool:
    """Transactions V2 (Produce v12+) with the transaction coordinated by another broker: the leader asks it
    to add each partition (broker/txn/verification.py) and waits for the answer."""
    return (ctx.version >= 12 and request.transactional_id is not None
            and not ctx.broker.txn.is_local_coordinator(request.transactional_id))


# How often a held Produce looks whether a heartbeat went through again (_hold_while_cut_off).
CUT_OFF_POLL_S = 0.05


def handle_produce(request: ProduceRequest, ctx: RequestContext) -> ProduceAnswer:
    if ctx.broker.lifecycle.cut_off() and _leads_any(request, ctx):
        return _hold_while_cut_off(request, ctx)
    return _handle_now(request, ctx)


def _leads_any(request: ProduceRequest, ctx: RequestContext) -> bool:
    """Whether this broker's image shows it leading one of the request's partitions."""
    node = ctx.broker.node_id
    replicas = ctx.broker.replica_manager
    for topic in request.topic_data:
        name = _topic_name(ctx, topic)[0]
        if name is None:
            continue
        for data in topic.partition_data:
            partition = replicas.get_partition(name, data.index)
            if partition is not None and partition.leader_id == node:
                return True
    return False


async def _hold_while_cut_off(request: ProduceRequest, ctx: RequestContext) -> ProduceResponse | None:
    """The request once the controller answers a heartbeat again (or says this broker is fenced), or once the
    request's timeout or one broker.session.timeout.ms has passed: by then the controller has fenced a broker
    it cannot hear, and NOT_LEADER_OR_FOLLOWER sends the producer to the new leader."""
    lifecycle = ctx.broker.lifecycle
    session_s = ctx.broker.config.get_int("broker.session.timeout.ms") / 1000
    with anyio.move_on_after(max(0.0, min(ms(request.timeout) / 1000, session_s))):
        while lifecycle.cut_off():
            await anyio.sleep(CUT_OFF_POLL_S)
    answer = _handle_now(request, dataclasses.replace(ctx, now_ms=int(time.time() * 1000)))
    if inspect.isawaitable(answer):
        return await answer
    return answer


def _handle_now(request: ProduceRequest, ctx: RequestContext) -> ProduceAnswer:
    if _remote_add(request, ctx) or any(
            is_large(data.records) for topic in request.topic_data for data in topic.partition_data if data.records):
        return _handle_produce_off_loop(request, ctx)
    acks = request.acks
    results: _Results = []
    auth = _authorization(request, ctx)
    for topic in request.topic_data:
        name, key = _topic_name(ctx, topic)
        partitions: list[tuple[int, PartitionOutcome]] = []
        for data in topic.partition_data:
            result: PartitionOutcome
            if acks not in (0, 1, -1):
                result = _result(ErrorCode.invalid_required_acks)
            elif name is None:
                result = _result(ErrorCode.unknown_topic_id)
            elif (refused := auth.refusal(name, data.records)) is not None:
                result = _result(*refused)
            else:
                result = _produce_partition(ctx, name, data.index, data.records, acks, request.transactional_id)
            partitions.append((data.index, result))
        results.append((name, key, partitions))
    return _finish(request, ctx, results)


async def _handle_produce_off_loop(request: ProduceRequest, ctx: RequestContext) -> ProduceResponse | None:
    """handle_produce for a request holding a large batch, or whose transactional batches need another
    broker's add: partitions in request order, as on the loop."""
    acks = request.acks
    remote_add = _remote_add(request, ctx)
    results: _Results = []
    auth = _authorization(request, ctx)
    for topic in request.topic_data:
        name, key = _topic_name(ctx, topic)
        partitions: list[tuple[int, PartitionOutcome]] = []
        for data in topic.partition_data:
            result: PartitionOutcome
            if acks not in (0, 1, -1):
                result = _result(ErrorCode.invalid_required_acks)
            elif name is None:
                result = _result(ErrorCode.unknown_topic_id)
            elif (refused := auth.refusal(name, data.records)) is not None:
                result = _result(*refused)
            elif data.records and (remote_add or is_large(data.records)):
                result = await _produce_partition_off_loop(ctx, name, data.index, data.records, acks,
                                                           request.transactional_id, remote_add)
            else:
                result = _produce_partition(ctx, name, data.index, data.records, acks, request.transactional_id)
            partitions.append((data.index, result))
        results.append((name, key, partitions))
    answer = _finish(request, ctx, results)
    if not inspect.isawaitable(answer):
        return answer
    return await answer


def _finish(request: ProduceRequest, ctx: RequestContext, results: _Results) -> ProduceAnswer:
    leaders: set[int] = set()
    waits: list[AwaitingReplication] = []
    answered: _Results = []
    for name, key, partitions in results:
        outcomes: list[tuple[int, PartitionOutcome]] = []
        for index, outcome in partitions:
            if isinstance(outcome, AwaitingReplication):
                waits.append(outcome)
                outcomes.append((index, outcome))
                continue
            _count_answer(ctx, name if name is not None else str(key), outcome.error)
            if outcome.error == ErrorCode.not_leader_or_follower and ctx.version >= 10 and name is not None:
                leader = _current_leader(ctx, name, index)
                if leader is not None:
                    outcome = dataclasses.replace(outcome, current_leader=leader)
                    leaders.add(leader[0])
            outcomes.append((index, outcome))
        answered.append((name, key, outcomes))
    if request.acks == 0:
        return None
    if waits:
        return _respond_after_replication(ctx, request, waits, answered, leaders)
    return _response(ctx, answered, {}, leaders)


async def _respond_after_replication(ctx: RequestContext, request: ProduceRequest, waits: list[AwaitingReplication],
                                     results: _Results, leaders: set[int]) -> ProduceResponse:
    done = await _await_replication(ctx, waits, ms(request.timeout))
    for wait in waits:
        _count_answer(ctx, wait.partition.topic, done[id(wait)].error)
    return _response(ctx, results, done, leaders)


def _count_answer(ctx: RequestContext, topic: str, error: ErrorCode) -> None:
    """Kafka's RequestMetrics ErrorsPerSec (per partition) and Total/FailedProduceRequestsPerSec."""
    ctx.broker.request_metrics.count_produce(topic, error)


def _response(ctx: RequestContext, results: _Results, done: dict[int, PartitionResult],
              leaders: set[int]) -> ProduceResponse:
    """The one place a produce answer becomes the kio response of the request's version."""
    responses = []
    for _name, key, partitions in results:
        answers = []
        for index, outcome in partitions:
            r = done[id(outcome)] if isinstance(outcome, AwaitingReplication) else outcome
            answers.append({
                "index": index,
                "error_code": r.error,
                "error_message": r.message,
                "base_offset": r.base_offset,
                "log_append_time": r.log_append_time_ms if r.log_append_time_ms >= 0 else None,
                "log_start_offset": r.log_start_offset,
                "record_errors": [{"batch_index": e.batch_index, "batch_index_error_message": e.message}
                                  for e in r.record_errors],
                **({"current_leader": {"leader_id": r.current_leader[0], "leader_epoch": r.current_leader[1]}}
                   if r.current_leader is not None else {}),
            })
        responses.append({"name": key, "topic_id": key, "partition_responses": answers})
    # KIP-951: the new leaders' endpoints, so the client redirects without a metadata round trip.
    # Each on the listener this request came in on (as Metadata answers).
    image = ctx.broker.image
    endpoints = [_node_endpoint(ctx, b) for node in sorted(leaders) if (b := image.brokers.get(node)) is not None]
    cls: type[ProduceResponse] = response_class(0, ctx.version)
    return build(cls, {"responses": responses, "throttle_time": 0, "node_endpoints": endpoints})


def _current_leader(ctx: RequestContext, topic: str, index: int) -> tuple[int, int] | None:
    found = ctx.broker.image.topics_by_name.get(topic)
    p = found.partitions.get(index) if found is not None else None
    if p is None or p.leader < 0 or p.leader == ctx.broker.node_id:
        return None
    return p.leader, p.leader_epoch


def _node_endpoint(ctx: RequestContext, b: BrokerImage) -> dict[str, object]:
    broker = ctx.broker
    host, port = endpoint_on(broker.config, broker.image, broker.node_id, ctx.listener_name, b.broker_id, b.host,
                             b.port)
    return {"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack}
