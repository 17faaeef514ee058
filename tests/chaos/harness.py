"""One chaos run: a real 3-node cluster, idempotent acks=all writers from two clients, assign-mode
readers, a seeded nemesis, healing, a drain from offset 0, and the checker's verdict.

    result = run_chaos(ChaosConfig(seed=7, min_fault_s=10.0, max_fault_s=30.0), tmp_path)
    print(result.report())

Who does what (threads in this process; the cluster's nodes are `samsa serve` processes):
  * writers   confluent-kafka (`enable.idempotence`, `acks=all`) and kafka-python (`enable_idempotence`,
              `acks='all'`), each at a steady rate, sending unique values "w<writer>-<seq>" to partitions
              in turn and recording each outcome: the acked offset, or an error;
  * readers   confluent-kafka and kafka-python consumers in assign mode from offset 0, recording each
              poll and each seek (offset resets are errors, not silent: `auto.offset.reset=error`/`none`);
  * watcher   Metadata every few hundred ms, counting leader epochs and leader moves per partition;
  * nemesis   this (the main) thread: every few seconds one fault, chosen by `random.Random(seed)`, then
              healed before the next. Main thread, because a node restarted from another thread would
              get PR_SET_PDEATHSIG when that thread ends (see cluster_cli.start_node).

What a send's outcome means, and why almost every error is indeterminate: both clients retry
retriable errors until their delivery timeout, so the error a send finally reports says nothing of
the earlier attempts, any of which may have been appended. Only a send the client refused before it
left (`produce()` raised) is FAILED, known not written.

A seed replays the nemesis's choices (which fault, for how long, which partition it goes for), not
the cluster's timing: which node leads a partition at that moment is the cluster's doing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import os
import random
import re
import shutil
import subprocess
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from cluster.cluster_harness import Cluster
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kp_errors

from chaos.checker import CheckResult, History, Outcome, Poll, Seek, Send, check
from chaos.netns import NetworkLab, NetworkLabUnavailable, node_host
from chaos.secured import PLAINTEXT, ClientSettings, SecuredSetup
from samsa.broker.cli import cluster as cluster_cli
from samsa.broker.client import Connection, KafkaClientError
from samsa.kproto.errors import ErrorCode

T = TypeVar("T")

# --- bounds (every wait has one) ---------------------------------------------------------------------------

ISR_FULL_BOUND_S = 30.0  # the target: the ISR is full again within 30 s of healing
RESTART_BOUND_S = 30.0  # a restarted node listens on its port within this
# Client timeouts near Kafka's defaults (request.timeout.ms 30 s; delivery.timeout.ms 120 s, halved to bound a
# run). Short ones make the clients give up on requests a broker is still answering (an acks=all wait while
# the ISR shrinks): librdkafka then times messages out, bumps its producer epoch and sends the rest again
# under new sequence numbers, which no broker can deduplicate, and kafka-python treats a timed-out
# InitProducerId as fatal. Both are the client's doing; the test is of the broker.
DELIVERY_TIMEOUT_MS = 60_000  # both producers: give up on a send (then it is indeterminate)
CLIENT_REQUEST_TIMEOUT_MS = 30_000
RECONNECT_BACKOFF_MAX_MS = 1_000  # kafka-python's default 30 s would outlast a restarted node's downtime
FLUSH_BOUND_S = DELIVERY_TIMEOUT_MS / 1000 + 10.0
CATCH_UP_BOUND_S = 15.0  # readers reach the high watermarks after the writers stop
DRAIN_BOUND_S = 60.0
WATCH_INTERVAL_S = 0.25
PROBE_TIMEOUT_S = 2.0
QUIET_WRITES_S = 1.0  # writes after healing, before the writers stop: the healed cluster must take them
READ_BATCH_COUNT = 500
CLIENT_LOG_MAX_BYTES = 4 << 20  # per client log file, and one rotated file
KEPT_RUNS_MAX_COUNT = 20  # failed runs kept in SAMSA_CHAOS_KEEP; later ones are not copied

# Short liveness timeouts so that faults of a few seconds move leadership and shrink the ISR (Kafka's
# defaults: 9000, 2000 and 30000 ms). The request log (a line per answered request: client id, error codes)
# is the evidence of which node answered a stuck client what.
CLUSTER_OVERRIDES = ("broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
                     "replica.lag.time.max.ms=2000", "samsa.request.log.enable=true")

# Each fault's weight: a leader kill moves the partition it aims at, so it weighs most (every partition's
# leader must move in a short run); a pause or a cut moves leaders only when it outlasts the broker session.
# "isolate" needs the run's own network namespaces (netns.py); without them it is left out.
FAULT_WEIGHTS = {"kill-leader": 2, "pause": 1, "kill-controller": 1, "isolate": 1}


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    seed: int
    # The nemesis starts faults for at least min_fault_s, then until every partition's leader has moved
    # at least once (the target), but not past max_fault_s.
    min_fault_s: float = 10.0
    max_fault_s: float = 30.0
    partitions: int = 3
    nodes: int = 3
    write_rate_per_s: float = 75.0  # per writer
    fault_gap_s: tuple[float, float] = (0.5, 2.0)  # quiet time between one fault's heal and the next
    kill_downtime_s: tuple[float, float] = (0.5, 3.0)
    pause_s: tuple[float, float] = (2.0, 5.0)
    isolate_s: tuple[float, float] = (2.0, 6.0)
    replication_factor: int = 3  # wanted; 1 when the cluster refuses it


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    node: int | None  # None: skipped (see note)
    partitions: tuple[int, ...]  # the partitions a kill-leader went for (the node led them)
    start_s: float  # since the run's writes started
    end_s: float
    note: str = ""

    def describe(self) -> str:
        what = self.kind if self.node is None else f"{self.kind} node {self.node}"
        if self.partitions:
            what += f" (leader of {', '.join(f'p{p}' for p in self.partitions)})"
        return f"{self.start_s:6.1f}-{self.end_s:6.1f} s  {what}" + (f"  [{self.note}]" if self.note else "")


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    replication_factor: int
    rf_note: str  # why the replication factor is what it is
    partitions: int
    faults: tuple[Fault, ...]
    leader_moves: dict[int, int]  # partition -> times the leader became another broker
    leader_epoch_bumps: dict[int, int]  # partition -> leader epochs advanced (a restart of the sole replica counts)
    isr_full_s: float | None  # after healing; None: not within ISR_FULL_BOUND_S
    drain_complete: bool  # the drain read every partition to its high watermark
    drain_end: dict[int, int]
    check: CheckResult
    writer_figures: dict[str, str]
    reader_figures: dict[str, str]
    reader_resets: int  # positions a broker declared out of range, or below a truncation (see Reader)
    producer_fatal_errors: tuple[str, ...]  # each one replaced its producer (see ConfluentWriter.guarded)
    stuck_writers: tuple[str, ...]  # writers with sends still unresolved FLUSH_BOUND_S after healing
    unlisted_leaders: tuple[str, ...]  # Metadata answers whose partition leader is not in their broker list
    producer_ids: dict[str, tuple[tuple[int, int], ...]]  # writer -> (producer id, epoch) pairs it was given
    pid_collisions: tuple[str, ...]  # producer ids two writers were both given
    isolation_note: str
    elapsed_s: float
    errors: tuple[str, ...] = ()  # harness-side trouble (a thread crashed, a node would not restart)
    client_log_dir: Path | None = None
    security_note: str = PLAINTEXT.note  # the listeners' security (secured.py for the secured variant)

    @property
    def fault_counts(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.faults if f.node is not None))

    def report(self) -> str:
        lines = [
            f"chaos seed {self.seed}: {self.partitions} partitions, replication factor {self.replication_factor}"
            f" ({self.rf_note}), {self.elapsed_s:.1f} s",
            f"faults: {len([f for f in self.faults if f.node is not None])} "
            + str(self.fault_counts) + f"; isolation: {self.isolation_note}",
            f"security: {self.security_note}",
            *(f"  {f.describe()}" for f in self.faults),
            "leader moves per partition: " + str(self.leader_moves)
            + "; leader epochs per partition: " + str(self.leader_epoch_bumps),
            "ISR full " + (f"{self.isr_full_s:.1f} s after healing" if self.isr_full_s is not None
                           else f"NOT within {ISR_FULL_BOUND_S:.0f} s of healing"),
            f"drain: {'complete' if self.drain_complete else 'INCOMPLETE'} to high watermarks {self.drain_end}",
            *(f"writer {name}: {text}" for name, text in self.writer_figures.items()),
            *(f"reader {name}: {text}" for name, text in self.reader_figures.items()),
            self.check.summary(),
            "producer ids: " + "; ".join(f"{name} {list(got)}" for name, got in self.producer_ids.items()),
            *(f"PRODUCER ID COLLISION: {c}" for c in self.pid_collisions),
            *(f"producer fatal error (the producer was replaced): {e}" for e in self.producer_fatal_errors),
            *([f"Metadata named a leader it did not list {len(self.unlisted_leaders)}x, e.g. "
               f"{self.unlisted_leaders[0]}"] if self.unlisted_leaders else []),
            *(f"harness error: {e}" for e in self.errors),
        ]
        if self.client_log_dir is not None:
            lines.append(f"client logs: {self.client_log_dir}; history: {self.client_log_dir.parent / 'history.json'}")
        return "\n".join(lines)


_PID_LINE = re.compile(r"Acquired PID\{Id:(-?\d+),Epoch:(-?\d+)\}|ProducerId set to (-?\d+) with epoch (-?\d+)")


class ClientLogs:
    """Every client's own log (librdkafka's and kafka-python's) in DIR/<name>.log instead of on stderr.
    SAMSA_CHAOS_CLIENT_DEBUG=fetch,consumer,... turns on librdkafka's debug contexts."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.handlers: list[logging.Handler] = []
        self.loggers: dict[str, logging.Logger] = {}
        self.debug = os.environ.get("SAMSA_CHAOS_CLIENT_DEBUG", "")

    def logger(self, name: str, logger_name: str | None = None) -> logging.Logger:
        if name in self.loggers:
            return self.loggers[name]
        # Bounded: kafka-python logs a traceback per loop when its sender crash-loops (60 MB in a minute).
        handler = logging.handlers.RotatingFileHandler(self.directory / f"{name}.log", maxBytes=CLIENT_LOG_MAX_BYTES,
                                                       backupCount=1)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger = logging.getLogger(logger_name or f"chaos.client.{name}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG if self.debug else logging.INFO)
        logger.handlers[:] = [handler]
        self.handlers.append(handler)
        self.loggers[name] = logger
        return logger

    def librdkafka(self, name: str, debug: str = "") -> dict[str, Any]:
        """The config entries that send a confluent-kafka client's log to its file (with `debug`, or
        SAMSA_CHAOS_CLIENT_DEBUG when set)."""
        contexts = self.debug or debug
        logger = self.logger(name)
        if contexts:
            logger.setLevel(logging.DEBUG)  # librdkafka's debug lines arrive at level 7, logging's DEBUG
        return {"logger": logger, **({"debug": contexts} if contexts else {})}

    def producer_ids(self, name: str) -> set[tuple[int, int]]:
        """The (producer id, epoch) pairs a producer's log says it got: librdkafka's eos debug line
        "Acquired PID{Id:N,Epoch:E}" and kafka-python's "ProducerId set to N with epoch E"."""
        found: set[tuple[int, int]] = set()
        for path in (self.directory / f"{name}.log", self.directory / f"{name}.log.1"):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace")
                for m in _PID_LINE.finditer(text):
                    pid, epoch = int(m.group(1) or m.group(3)), int(m.group(2) or m.group(4))
                    if pid >= 0:
                        found.add((pid, epoch))
        return found

    def close(self) -> None:
        for logger in self.loggers.values():  # a client thread that logs late must not reopen the file
            logger.handlers[:] = [logging.NullHandler()]
        for handler in self.handlers:
            handler.close()


def log(t0: float, message: str) -> None:
    print(f"[{time.monotonic() - t0:6.1f} s] {message}", flush=True)


# --- writers -------------------------------------------------------------------------------------------------


def revive_metadata_refresh(cluster: Any) -> bool:
    """Restart a kafka-python client's metadata refresh loop if it has died; True when it had.

    kafka-python 3.0.12's ClusterMetadata._refresh_loop catches only KafkaError: a refresh that fails with
    an OSError (ConnectionResetError, when a killed broker resets the client's connection while it is being
    set up) ends the loop for good, and the client never refreshes its metadata again: it retries a moved
    partition's batches at the old leader until they expire. Seen in a secured chaos run in CI on
    2026-12-02 (the producer's view froze 5 s into the run; its batches for a partition whose leader moved
    later answered NOT_LEADER_OR_FOLLOWER for 60 s while every broker reported the new leader), and
    reproduced by failing one metadata send with ConnectionResetError. A client bug, not the broker's."""
    future = getattr(cluster, "_refresh_loop_future", None)
    if future is None or not future.is_done or getattr(cluster, "closed", False):
        return False
    cluster._refresh_loop_future = None
    cluster.start_refresh_loop()
    return True


def revive_kafka_python_metadata(cluster: Any, who: str) -> int:
    """1 (and a line in kafka-python's log) when `who`'s metadata refresh loop had to be restarted, else 0."""
    if not revive_metadata_refresh(cluster):
        return 0
    logging.getLogger("kafka").warning("chaos harness: %s's metadata refresh loop had ended (kafka-python 3.0.12 "
                                       "ends it on a non-Kafka error): restarted", who)
    return 1


class Writer(threading.Thread):
    """Sends "w<index>-<seq>" at a steady rate to partition seq % partitions until stopped, then flushes."""

    client = ""

    def __init__(self, index: int, bootstrap: str, topic: str, partitions: int, rate_per_s: float,
                 logs: ClientLogs, security: ClientSettings = PLAINTEXT) -> None:
        super().__init__(name=f"writer-w{index}", daemon=True)
        self.name_ = f"w{index}"
        self.logs, self.security = logs, security
        self.bootstrap, self.topic, self.partitions, self.rate_per_s = bootstrap, topic, partitions, rate_per_s
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.pending: dict[str, int] = {}  # value -> partition, sent and not yet resolved
        self.sends: list[Send] = []
        self.error_counts: Counter[str] = Counter()
        self.restarts = 0
        self.metadata_revivals = 0  # kafka-python's dead metadata refresh loop restarted (revive_metadata_refresh)
        self.fatal_errors: list[str] = []  # the client's fatal errors (idempotence broken), each replaced it
        self.stuck = False  # sends still unresolved FLUSH_BOUND_S after the writer was told to stop
        self.crash: str | None = None

    def resolve(self, value: str, partition: int, outcome: Outcome, offset: int | None = None,
                error: str | None = None) -> None:
        with self.lock:
            if self.pending.pop(value, None) is None:
                # Resolved already: a callback after the writer gave up on it (kafka-python's force_close),
                # or a client calling back twice. The first outcome stands.
                self.error_counts[f"late {outcome.value}"] += 1
                return
            self.sends.append(Send(self.name_, value, partition, outcome, offset, error))
            if error is not None:
                self.error_counts[error] += 1

    def run(self) -> None:
        try:
            self.open()
            seq = 0
            next_at = time.monotonic()
            while not self.stop_event.is_set():
                now = time.monotonic()
                if now < next_at:
                    self.idle(min(next_at - now, 0.05))
                    continue
                next_at = max(next_at + 1 / self.rate_per_s, now - 1.0)  # no burst after a long stall
                value = f"{self.name_}-{seq}"
                partition = seq % self.partitions
                seq += 1
                with self.lock:
                    self.pending[value] = partition
                self.send(value, partition)
            self.close(FLUSH_BOUND_S)
        except Exception:
            self.crash = traceback.format_exc()
        finally:
            with self.lock:
                for value, partition in list(self.pending.items()):
                    self.sends.append(Send(self.name_, value, partition, Outcome.INDETERMINATE,
                                           error="unresolved when the writer stopped"))
                self.pending.clear()

    def figures(self) -> str:
        outcomes = Counter(s.outcome.value for s in self.sends)
        errors = ", ".join(f"{e} x{n}" for e, n in self.error_counts.most_common(4))
        return (f"{self.client}: {len(self.sends)} sends, " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items()))
                + (f"; producer replaced after fatal errors {self.restarts}x" if self.restarts else "")
                + (f"; metadata refresh loop restarted {self.metadata_revivals}x (kafka-python bug)"
                   if self.metadata_revivals else "")
                + ("; STUCK: sends unresolved after the flush bound" if self.stuck else "")
                + (f"; errors: {errors}" if errors else ""))

    # the client-specific part: ConfluentWriter and KafkaPythonWriter implement these (Writer is never run itself)
    def open(self) -> None: raise NotImplementedError
    def idle(self, seconds: float) -> None: raise NotImplementedError
    def send(self, value: str, partition: int) -> None: raise NotImplementedError
    def close(self, timeout_s: float) -> None: raise NotImplementedError


class ConfluentWriter(Writer):
    client = "confluent-kafka"

    def open(self) -> None:
        self.producer = Producer({
            "bootstrap.servers": self.bootstrap, "client.id": f"chaos-{self.name_}",
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS, "request.timeout.ms": CLIENT_REQUEST_TIMEOUT_MS,
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS, "topic.metadata.refresh.interval.ms": 2000,
            # eos: the idempotence state machine (PID, epoch bumps, sequence errors), a few lines per fault
            "error_cb": self.on_error, **self.logs.librdkafka(self.name_, debug="eos"), **self.security.librdkafka,
        })

    def on_error(self, err: KafkaError) -> None:
        # A callback must not raise: confluent-kafka turns that into a SystemError from a later call.
        with contextlib.suppress(Exception):
            self.logs.logger(self.name_).warning(f"error_cb: {err}")
            if err.fatal():
                self.error_counts[f"fatal {err.name()}"] += 1

    def idle(self, seconds: float) -> None:
        self.guarded(lambda: self.producer.poll(seconds))

    def guarded(self, call: Callable[[], T]) -> T | None:
        """Run a producer call; after a fatal error (the idempotent producer is unusable: librdkafka
        raises it from the next call) replace the producer. The old one's unresolved sends stay
        pending and end as indeterminate."""
        try:
            return call()
        except KafkaException as e:
            err = e.args[0]
            if not err.fatal():
                raise
            self.fatal_errors.append(err.str())
            self.logs.logger(self.name_).error(f"fatal, replacing the producer: {err}")
            with contextlib.suppress(KafkaException):
                self.producer.flush(1.0)
            self.restarts += 1
            self.open()
            return None

    def send(self, value: str, partition: int) -> None:
        def delivered(err: KafkaError | None, msg: Any) -> None:
            try:
                if err is None:
                    offset = msg.offset()
                    if offset is None or offset < 0:  # librdkafka's implicit ack (see checker.Send)
                        offset = None
                    self.resolve(value, partition, Outcome.ACKED, offset)
                else:
                    self.resolve(value, partition, Outcome.INDETERMINATE, error=err.name())
            except Exception:
                self.logs.logger(self.name_).error(f"delivery callback raised: {traceback.format_exc()}")

        def produce() -> None:
            try:
                self.producer.produce(self.topic, value.encode(), partition=partition, on_delivery=delivered)
            except BufferError:
                self.resolve(value, partition, Outcome.FAILED, error="local queue full")
            except KafkaException as e:
                # Refused before it left the client: known not written.
                self.resolve(value, partition, Outcome.FAILED, error=f"produce() raised {e.args[0].name()}")
                raise

        self.guarded(produce)
        self.guarded(lambda: self.producer.poll(0))

    def close(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        remaining = 1
        while remaining and time.monotonic() < deadline:
            remaining = self.guarded(lambda: self.producer.flush(max(0.0, deadline - time.monotonic()))) or 0
        self.stuck = remaining > 0


class KafkaPythonWriter(Writer):
    client = "kafka-python"

    def open(self) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, client_id=f"chaos-{self.name_}", enable_idempotence=True,
            acks="all", linger_ms=5, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            request_timeout_ms=CLIENT_REQUEST_TIMEOUT_MS, reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
            metadata_max_age_ms=5000, **self.security.kafka_python)

    def idle(self, seconds: float) -> None:
        self.stop_event.wait(seconds)

    def send(self, value: str, partition: int) -> None:
        self.metadata_revivals += revive_kafka_python_metadata(self.producer._metadata, self.name_)
        manager = self.producer._transaction_manager
        if manager is not None and manager.has_fatal_error():
            # kafka-python's idempotent producer is dead after a fatal error: every batch is aborted
            # (their sends end as indeterminate). Replace it, as ConfluentWriter.guarded does.
            self.fatal_errors.append(f"kafka-python: {manager.last_error}")
            self.producer._sender.force_close()
            self.restarts += 1
            self.open()
        try:
            future = self.producer.send(self.topic, value.encode(), partition=partition)
        except kp_errors.KafkaError as e:
            self.resolve(value, partition, Outcome.FAILED, error=f"send() raised {type(e).__name__}")
            return
        future.add_callback(lambda md: self.resolve(value, partition, Outcome.ACKED, int(md.offset)))
        future.add_errback(lambda e: self.resolve(value, partition, Outcome.INDETERMINATE, error=type(e).__name__))

    def close(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:  # a second at a time, so that a metadata refresh loop that dies meanwhile is restarted
            self.metadata_revivals += revive_kafka_python_metadata(self.producer._metadata, self.name_)
            try:
                self.producer.flush(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                break
            except kp_errors.KafkaTimeoutError:
                if time.monotonic() < deadline:
                    continue
                # kafka-python's close() flushes again and raises: force the sender down instead, which
                # fails the outstanding batches (their sends end as indeterminate).
                self.stuck = True
                self.producer._sender.force_close()
                return
        self.producer.close(timeout=5)


# --- readers -------------------------------------------------------------------------------------------------


class Reader(threading.Thread):
    """An assign-mode consumer of every partition from offset 0, recording polls and seeks."""

    client = ""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, logs: ClientLogs,
                 security: ClientSettings = PLAINTEXT) -> None:
        super().__init__(name=f"reader-{name}", daemon=True)
        self.logs, self.security = logs, security
        self.name_, self.bootstrap, self.topic, self.partitions = name, bootstrap, topic, partitions
        self.stop_event = threading.Event()
        self.events: list[Poll | Seek] = []
        self.position: dict[int, int] = dict.fromkeys(range(partitions), 0)  # next offset per partition
        self.resets = 0
        self.metadata_revivals = 0  # kafka-python's dead metadata refresh loop restarted (revive_metadata_refresh)
        self.reset_details: list[str] = []
        self.error_counts: Counter[str] = Counter()
        self.crash: str | None = None

    def record(self, by_partition: dict[int, list[tuple[int, str]]]) -> None:
        for partition, records in by_partition.items():
            self.events.append(Poll(self.name_, partition, tuple(records)))
            self.position[partition] = records[-1][0] + 1

    def seek(self, partition: int, offset: int) -> None:
        self.events.append(Seek(self.name_, partition, offset))
        self.position[partition] = offset

    def run(self) -> None:
        try:
            self.open()
            while not self.stop_event.is_set():
                self.poll_once()
            self.close()
        except Exception:
            self.crash = traceback.format_exc()

    def figures(self) -> str:
        read = sum(len(e.records) for e in self.events if isinstance(e, Poll))
        errors = ", ".join(f"{e} x{n}" for e, n in self.error_counts.most_common(4))
        return (f"{self.client}: {read} records read, offset resets {self.resets}"
                + (f" ({'; '.join(self.reset_details[:3])})" if self.reset_details else "")
                + (f"; metadata refresh loop restarted {self.metadata_revivals}x (kafka-python bug)"
                   if self.metadata_revivals else "")
                + (f"; errors: {errors}" if errors else ""))

    # the client-specific part: ConfluentReader and KafkaPythonReader implement these (Reader is never run itself)
    def open(self) -> None: raise NotImplementedError
    def poll_once(self) -> None: raise NotImplementedError
    def close(self) -> None: raise NotImplementedError


def unpack(m: Message) -> tuple[int, int, str, int]:
    """(partition, offset, value, leader epoch or -1) of a record confluent-kafka returned."""
    partition, offset, value, epoch = m.partition(), m.offset(), m.value(), m.leader_epoch()
    assert partition is not None and offset is not None and value is not None, m
    return partition, offset, value.decode(), -1 if epoch is None else epoch


class ConfluentReader(Reader):
    client = "confluent-kafka"

    def open(self) -> None:
        # librdkafka wants a group.id even in assign mode; the group is never joined.
        self.consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"chaos-unused-{self.name_}",
            "client.id": f"chaos-{self.name_}", "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS, "topic.metadata.refresh.interval.ms": 2000,
            **self.logs.librdkafka(self.name_), **self.security.librdkafka,
        })
        self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        for p in range(self.partitions):
            self.seek(p, 0)  # OFFSET_BEGINNING: the log start offset, 0 (nothing is ever deleted here)

    def poll_once(self) -> None:
        by_partition: dict[int, list[tuple[int, str]]] = defaultdict(list)
        epochs: dict[int, set[int]] = defaultdict(set)
        reset: dict[int, str] = {}
        for m in self.consumer.consume(num_messages=READ_BATCH_COUNT, timeout=0.2):
            err = m.error()
            if err is None:
                partition, offset, value, epoch = unpack(m)
                by_partition[partition].append((offset, value))
                epochs[partition].add(epoch)
            else:
                self.error_counts[err.name()] += 1
                partition_or_none = m.partition()
                if err.code() == KafkaError._AUTO_OFFSET_RESET and partition_or_none is not None:
                    reset[partition_or_none] = err.str()
        self.record(dict(by_partition))
        if by_partition:  # for reading the client log next to the broker logs when a check fails
            self.logs.logger(self.name_).info("read " + "; ".join(
                f"p{p} {r[0][0]}-{r[-1][0]} leader epochs {sorted(epochs[p])}"
                for p, r in sorted(by_partition.items())))
        if reset:
            # The broker said our position is out of range (or the log was truncated below it). Start
            # those partitions over from 0, a seek the checker knows of. Only an assign clears the error
            # state; it restarts every partition at the position given, so after the whole batch is recorded.
            for p, why in reset.items():
                self.resets += 1
                self.reset_details.append(f"partition {p} at offset {self.position[p]}: {why}")
                self.logs.logger(self.name_).warning(f"reset partition {p} at {self.position[p]} to 0: {why}")
                self.seek(p, 0)
            self.consumer.assign([TopicPartition(self.topic, q, self.position[q]) for q in range(self.partitions)])

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonReader(Reader):
    client = "kafka-python"

    def open(self) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, client_id=f"chaos-{self.name_}", group_id=None,
            enable_auto_commit=False, auto_offset_reset="none", fetch_max_wait_ms=100,
            request_timeout_ms=CLIENT_REQUEST_TIMEOUT_MS + 1000, reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
            metadata_max_age_ms=5000, **self.security.kafka_python)
        self.tps = [KpTopicPartition(self.topic, p) for p in range(self.partitions)]
        self.consumer.assign(self.tps)
        self.consumer.seek_to_beginning(*self.tps)
        for p in range(self.partitions):
            self.seek(p, 0)

    def poll_once(self) -> None:
        self.metadata_revivals += revive_kafka_python_metadata(self.consumer._cluster, self.name_)
        try:
            polled = self.consumer.poll(timeout_ms=200, max_records=READ_BATCH_COUNT)
        except kp_errors.OffsetOutOfRangeError as e:
            self.error_counts["OffsetOutOfRangeError"] += 1
            bad = e.args[0] if e.args and isinstance(e.args[0], dict) else {tp: None for tp in self.tps}
            for tp, offset in bad.items():
                self.resets += 1
                self.reset_details.append(f"partition {tp.partition} at offset {offset}: OffsetOutOfRangeError")
                self.consumer.seek(tp, 0)
                self.seek(tp.partition, 0)
            return
        except kp_errors.KafkaError as e:
            self.error_counts[type(e).__name__] += 1
            time.sleep(0.1)
            return
        self.record({tp.partition: [(int(r.offset), bytes(r.value).decode()) for r in records]
                     for tp, records in polled.items() if records})

    def close(self) -> None:
        self.consumer.close()


# --- the leader watcher ------------------------------------------------------------------------------------


@dataclass(slots=True)
class PartitionView:
    leader: int = -1
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


def topic_metadata(cluster: Cluster, node_id: int, topic: str) -> dict[int, PartitionView] | None:
    answer = topic_metadata_and_brokers(cluster, node_id, topic)
    return None if answer is None else answer[0]


def topic_metadata_and_brokers(cluster: Cluster, node_id: int,
                               topic: str) -> tuple[dict[int, PartitionView], tuple[int, ...]] | None:
    """The partitions of `topic` as node `node_id` answers Metadata, and the brokers it lists; None when
    it does not answer or does not know the topic."""
    try:
        with Connection(cluster.host(node_id), cluster.port(node_id), client_id="chaos-watch",
                        timeout_s=PROBE_TIMEOUT_S) as c:
            r = c.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})
    except (OSError, KafkaClientError):
        return None
    if not r.topics or r.topics[0].error_code != ErrorCode.none:
        return None
    views = {int(p.partition_index): PartitionView(int(p.leader_id), int(p.leader_epoch), tuple(p.replica_nodes),
                                                   tuple(p.isr_nodes))
             for p in r.topics[0].partitions if p.error_code in (ErrorCode.none, ErrorCode.leader_not_available)}
    return views, tuple(sorted(int(b.node_id) for b in r.brokers))


class LeaderWatch(threading.Thread):
    """Counts, per partition, leader epochs and leader moves (the leader became another broker), from
    Metadata of the running nodes in turn. A node may answer from an older image: only a higher leader
    epoch than the last one seen counts. A move and back between two looks is a missed move; a fault
    every few seconds and a look every 250 ms make that rare, and it only undercounts."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int) -> None:
        super().__init__(name="leader-watch", daemon=True)
        self.cluster, self.topic = cluster, topic
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.views: dict[int, PartitionView] = {p: PartitionView() for p in range(partitions)}
        self.last_leader: dict[int, int] = dict.fromkeys(range(partitions), -1)
        self.moves: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.bumps: dict[int, int] = dict.fromkeys(range(partitions), 0)
        # (seconds, node asked, partition, leader, leader epoch, isr) whenever a node's answer changed
        self.timeline: list[tuple[float, int, int, int, int, tuple[int, ...]]] = []
        self.last_seen: dict[tuple[int, int], tuple[int, int, tuple[int, ...]]] = {}
        self.unlisted_leaders: list[str] = []  # Metadata answers naming a leader they do not list
        self.t0 = time.monotonic()
        self.crash: str | None = None

    def run(self) -> None:
        try:
            turn = 0
            while not self.stop_event.wait(WATCH_INTERVAL_S):
                nodes = [n for n in self.cluster.node_ids
                         if self.cluster.running(n) and n not in self.cluster.paused]
                if nodes:
                    turn += 1
                    self.look(nodes[turn % len(nodes)])
        except Exception:
            self.crash = traceback.format_exc()

    def look(self, node_id: int) -> None:
        answer = topic_metadata_and_brokers(self.cluster, node_id, self.topic)
        if answer is None:
            return
        views, brokers = answer
        with self.lock:
            for p, view in views.items():
                if view.leader >= 0 and view.leader not in brokers:
                    # Kafka answers LEADER_NOT_AVAILABLE and leader -1 for a leader it does not list
                    # (KRaftMetadataCache); kafka-python's producer crash-loops on it (UnknownBrokerIdError).
                    self.unlisted_leaders.append(f"{time.monotonic() - self.t0:.1f} s: node {node_id} named "
                                                 f"broker {view.leader} leader of p{p} but listed brokers {brokers}")
                seen = (view.leader, view.leader_epoch, view.isr)
                if self.last_seen.get((node_id, p)) != seen:
                    self.last_seen[(node_id, p)] = seen
                    self.timeline.append((round(time.monotonic() - self.t0, 2), node_id, p, *seen))
                old = self.views.get(p)
                if old is None or view.leader_epoch < old.leader_epoch:
                    continue
                if view.leader_epoch == old.leader_epoch:
                    # The same epoch again: the ISR may have changed (that bumps no leader epoch), and a
                    # leader of -1 only means the node answering does not list the leader's broker (it
                    # saw it fenced), which may name the leader of this epoch later.
                    view = PartitionView(old.leader if view.leader < 0 else view.leader, view.leader_epoch,
                                         view.replicas, view.isr)
                elif old.leader_epoch >= 0:
                    self.bumps[p] += view.leader_epoch - old.leader_epoch
                if view.leader >= 0:
                    if self.last_leader[p] >= 0 and view.leader != self.last_leader[p]:
                        self.moves[p] += 1
                    self.last_leader[p] = view.leader
                self.views[p] = view

    def leader_of(self, partition: int) -> int:
        with self.lock:
            return self.views[partition].leader


# --- the run -------------------------------------------------------------------------------------------------


def create_topic(cluster: Cluster, topic: str, partitions: int, rf: int) -> tuple[int, str]:
    """Create `topic` with replication factor `rf` (min.insync.replicas 2 when rf >= 3) or, when the cluster
    refuses it with INVALID_REPLICATION_FACTOR, with 1. Returns the factor and why."""
    def attempt(factor: int) -> tuple[ErrorCode, str | None]:
        configs = [{"name": "min.insync.replicas", "value": "2"}] if factor >= 3 else []
        with cluster.connect(cluster.node_ids[0], 30.0) as conn:
            r = conn.request(19, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": factor,
                                              "assignments": (), "configs": configs}],
                                  "timeout": 30_000, "validate_only": False})
        return ErrorCode(r.topics[0].error_code), r.topics[0].error_message

    error, message = attempt(rf)
    if error == ErrorCode.none:
        return rf, f"as asked, min.insync.replicas {2 if rf >= 3 else 1}"
    if error != ErrorCode.invalid_replication_factor or rf == 1:
        raise AssertionError(f"CreateTopics {topic}: {error.name} {message}")
    error1, message1 = attempt(1)
    if error1 != ErrorCode.none:
        raise AssertionError(f"CreateTopics {topic} with replication factor 1: {error1.name} {message1}")
    return 1, f"the cluster refused {rf}: {error.name} {message}"


def wait_isr_full(cluster: Cluster, topic: str, partitions: int, bound_s: float) -> float | None:
    """Seconds until every node's Metadata shows a leader and isr == replicas for every partition."""
    started = time.monotonic()
    while time.monotonic() - started < bound_s:
        full = True
        for node_id in cluster.node_ids:
            views = topic_metadata(cluster, node_id, topic)
            if views is None or len(views) != partitions or not all(
                    v.leader >= 0 and set(v.isr) == set(v.replicas) for v in views.values()):
                full = False
                break
        if full:
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def high_watermarks(bootstrap: str, topic: str, partitions: int, logs: ClientLogs,
                    security: ClientSettings = PLAINTEXT) -> dict[int, int] | None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-unused-watermarks",
                         **logs.librdkafka("watermarks"), **security.librdkafka,
                         "enable.auto.commit": False})
    try:
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
                for p in range(partitions)}
    except KafkaException:
        return None
    finally:
        consumer.close()


def drain(bootstrap: str, topic: str, ends: dict[int, int], bound_s: float, logs: ClientLogs,
          security: ClientSettings = PLAINTEXT) -> tuple[dict[int, list[tuple[int, str]]], bool]:
    """Every partition from offset 0 up to `ends` (exclusive), with a fresh consumer."""
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in ends}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-unused-drain", "client.id": "chaos-drain",
                         **logs.librdkafka("drain"), **security.librdkafka,
                         "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + bound_s
        def done(p: int) -> bool:
            return ends[p] == 0 or (bool(out[p]) and out[p][-1][0] >= ends[p] - 1)
        while not all(done(p) for p in ends) and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=READ_BATCH_COUNT, timeout=0.5):
                if m.error() is None:
                    partition, offset, value, _epoch = unpack(m)
                    out[partition].append((offset, value))
        return out, all(done(p) for p in ends)
    finally:
        consumer.close()


def network_lab(nodes: int) -> tuple[NetworkLab | None, str]:
    """The run's own network (each node in a namespace, so one can be cut off), or None and why not:
    then the nodes share loopback and the nemesis leaves "isolate" out. SAMSA_CHAOS_NETNS=0 asks for
    loopback."""
    if os.environ.get("SAMSA_CHAOS_NETNS", "1") == "0":
        return None, "off: SAMSA_CHAOS_NETNS=0 put the nodes on loopback, where one cannot be cut off"
    try:
        lab = NetworkLab.create(nodes)
    except (NetworkLabUnavailable, OSError, subprocess.SubprocessError) as e:
        return None, f"off: no network namespaces here ({e}); the nodes share loopback"
    return lab, f"on: each node in its own network namespace ({lab.prefix}-*), cut off by downing its bridge port"


class Nemesis:
    """Faults on `cluster`, one at a time, each healed before the next; every choice from `rng`.

    A killed node is restarted without waiting for it to listen (Python takes 2-5 s to boot here): the
    gap before the next fault overlaps the boot, and the next fault waits only for what is left of it.
    """

    def __init__(self, cluster: Cluster, watch: LeaderWatch, config: ChaosConfig, t0: float,
                 lab: NetworkLab | None = None) -> None:
        self.cluster, self.watch, self.config, self.t0, self.lab = cluster, watch, config, t0, lab
        self.weights = {k: w for k, w in FAULT_WEIGHTS.items() if k != "isolate" or lab is not None}
        self.rng = random.Random(config.seed)
        self.faults: list[Fault] = []
        self.booting: set[int] = set()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self, min_s: float, max_s: float) -> None:
        begin = self.now()
        while True:
            gap = self.rng.uniform(*self.config.fault_gap_s)
            kind = self.rng.choices(list(self.weights), weights=list(self.weights.values()))[0]
            elapsed = self.now() - begin + gap
            unmoved = self.unmoved()
            if elapsed >= max_s or (elapsed >= min_s and not unmoved):
                return
            if elapsed >= min_s:
                # Past the least fault time only a partition whose leader never moved keeps the run going:
                # go for its leader (pauses and cuts move a leader only when they outlast the session, and
                # a leader the controller fenced may come back as the partition's only in-sync replica).
                kind = "kill-leader"
            time.sleep(gap)
            self.wait_booted()
            self.one(kind)

    def restart(self, node: int) -> None:
        """Start `node` again with its data (what Cluster.start does, less the wait for its port)."""
        assert not self.cluster.running(node), f"node {node} is running"
        # Cluster decided in the main thread whether its children may die with us (PR_SET_PDEATHSIG);
        # the nemesis runs in the main thread, so the same holds here.
        proc = cluster_cli.start_node(self.cluster.plan, self.cluster.plan.node(node),
                                      die_with_parent=self.cluster._die_with_parent)
        self.cluster.processes[node] = proc
        cluster_cli.write_state(self.cluster.plan, self.cluster.processes)
        self.booting.add(node)

    def wait_booted(self) -> None:
        """Until every restarted node listens on its broker port (bounded; a node that exits or never
        listens fails the run with its log tail)."""
        deadline = time.monotonic() + RESTART_BOUND_S
        for node in sorted(self.booting):
            while not self.cluster.listening(node):
                proc = self.cluster.processes[node]
                assert proc.poll() is None, (f"node {node} exited with {proc.returncode} after its restart\n"
                                             f"{self.cluster.log_tail(node)}")
                assert time.monotonic() < deadline, (f"node {node} did not listen within {RESTART_BOUND_S:.0f} s "
                                                     f"of its restart\n{self.cluster.log_tail(node)}")
                time.sleep(0.05)
        self.booting.clear()

    def unmoved(self) -> list[int]:
        """Partitions whose leader has not moved yet."""
        with self.watch.lock:
            moves = dict(self.watch.moves)
        return [p for p, n in sorted(moves.items()) if n == 0]

    def target(self) -> tuple[int, tuple[int, ...]]:
        """The node to go for and the partitions it leads among those whose leader moved least: the
        node leading most of them, ties broken by the seed. (-1, ()) when none of them has a leader
        with another in-sync replica to take over."""
        with self.watch.lock:
            moves = dict(self.watch.moves)
            views = dict(self.watch.views)
        fewest = min(moves.values())
        # Among those, the partitions kills went for least: a kill whose node came back within its session
        # may leave the leader where it was, and going for that partition again while another was never
        # tried left one partition's leader unmoved in a short run (CI, seed 917285016).
        tried: dict[int, int] = defaultdict(int)
        for fault in self.faults:
            for p in fault.partitions:
                tried[p] += 1
        movable = [p for p, n in sorted(moves.items())
                   # A leader that is its partition's only in-sync replica cannot move: killing it only takes
                   # the partition offline until it returns. Such a partition waits for its ISR to grow.
                   if n == fewest and views[p].leader >= 0 and len(views[p].isr) > 1]
        least_tried = min((tried[p] for p in movable), default=0)
        led: dict[int, list[int]] = defaultdict(list)
        for p in movable:
            if tried[p] == least_tried:
                led[views[p].leader].append(p)
        if not led:
            return -1, ()
        most = max(len(ps) for ps in led.values())
        node = self.rng.choice(sorted(n for n, ps in led.items() if len(ps) == most))
        return node, tuple(led[node])

    def hold(self, fault: Fault, seconds: float, what: str, begin: Callable[[int], None],
             end: Callable[[int], None]) -> None:
        """A fault that lasts: begin it on fault.node, wait `seconds`, end it (always), record it."""
        assert fault.node is not None
        log(self.t0, f"nemesis: {what} for {seconds:.1f} s")
        begin(fault.node)
        try:
            time.sleep(seconds)
        finally:
            end(fault.node)
        self.faults.append(replace(fault, end_s=self.now()))

    def one(self, kind: str) -> None:
        start = self.now()
        if kind == "isolate":
            assert self.lab is not None
            # A third of the time each: the node a leader kill would go for, the active controller, any node.
            aimed, _ = self.target()
            view = self.cluster.quorum_leader()
            choices = [n for n in (aimed, view.leader_id if view else -1) if n >= 0]
            node = self.rng.choice([*choices, self.rng.choice(self.cluster.node_ids)])
            seconds = self.rng.uniform(*self.config.isolate_s)
            self.hold(Fault(kind, node, (), start, start), seconds, f"cut node {node} off the network",
                      self.lab.cut, self.lab.mend)
            return
        if kind == "pause":
            # Half the time the node a leader kill would go for, else any node.
            aimed, _ = self.target()
            any_node = self.rng.choice(self.cluster.node_ids)
            node = aimed if self.rng.random() < 0.5 and aimed >= 0 else any_node
            seconds = self.rng.uniform(*self.config.pause_s)
            self.hold(Fault(kind, node, (), start, start), seconds, f"SIGSTOP node {node}",
                      self.cluster.pause, self.cluster.resume)
            return
        downtime = self.rng.uniform(*self.config.kill_downtime_s)
        partitions: tuple[int, ...] = ()
        if kind == "kill-leader":
            node, partitions = self.target()
            if node < 0:
                self.faults.append(Fault(kind, None, (), start, self.now(),
                                         "no leader with another in-sync replica, skipped"))
                return
        else:
            view = self.cluster.quorum_leader()
            if view is None:
                self.faults.append(Fault(kind, None, (), start, self.now(), "no quorum leader, skipped"))
                return
            node = view.leader_id
        led = f", leader of {', '.join(f'p{p}' for p in partitions)}" if partitions else ""
        log(self.t0, f"nemesis: SIGKILL node {node} ({kind}{led}), restart in {downtime:.1f} s")
        self.cluster.kill(node)
        time.sleep(downtime)
        self.restart(node)
        self.faults.append(Fault(kind, node, partitions, start, self.now()))

    def heal(self) -> None:
        if self.lab is not None:
            for node in list(self.lab.cut_nodes):
                self.lab.mend(node)
        for node in list(self.cluster.paused):
            self.cluster.resume(node)
        for node in self.cluster.node_ids:
            if not self.cluster.running(node):
                self.restart(node)
        self.wait_booted()


def run_chaos(config: ChaosConfig, directory: Path,
              cluster_factory: Callable[[Path], Cluster] | None = None, *, secured: bool = False) -> RunResult:
    """One run; every process it starts is stopped (by PID, paused ones resumed first) and the network
    namespaces it made are deleted before it returns. The calling thread spends the run in the client
    namespace (see netns.py), and so do the client threads it starts.

    `secured`: the secured variant (secured.py: clients on SASL_SSL with SCRAM-SHA-512, inter-broker and
    controller traffic over TLS). It needs the run's own network namespaces, where every node has the same
    ports and one plan-wide listener config fits them all: NetworkLabUnavailable without them."""
    lab, isolation_note = (None, "off: the caller's cluster") if cluster_factory else network_lab(config.nodes)
    if lab is None:
        if secured:
            raise NetworkLabUnavailable(f"the secured variant needs the run's own network namespaces: "
                                        f"{isolation_note}")
        return _run_chaos(config, directory, cluster_factory, None, isolation_note)
    try:
        setup = SecuredSetup.create(directory / "tls", [node_host(n) for n in lab.node_ids]) if secured else None
        overrides = CLUSTER_OVERRIDES + (setup.overrides if setup else ())
        with lab.inside_clients():
            return _run_chaos(config, directory, lambda d: Cluster(d, plan=lab.plan(d, overrides)),
                              lab, isolation_note, setup)
    finally:
        lab.destroy()


def _run_chaos(config: ChaosConfig, directory: Path, cluster_factory: Callable[[Path], Cluster] | None,
               lab: NetworkLab | None, isolation_note: str, setup: SecuredSetup | None = None) -> RunResult:
    started = time.monotonic()
    print(f"chaos seed {config.seed} (rerun with SAMSA_CHAOS_SEED={config.seed})", flush=True)
    cluster = (cluster_factory or (lambda d: Cluster(d, config.nodes, CLUSTER_OVERRIDES)))(directory)
    errors: list[str] = []
    threads: list[Writer | Reader | LeaderWatch] = []
    logs = ClientLogs(directory / "clients")
    try:
        cluster.up()
        security = setup.settings if setup else PLAINTEXT
        if setup is not None:
            ready_s = setup.prepare(cluster)
            print(f"secured: every node let the clients' SCRAM user in {ready_s:.1f} s after it was made", flush=True)
        topic = f"chaos-{config.seed}"
        rf, rf_note = create_topic(cluster, topic, config.partitions, config.replication_factor)
        t0 = time.monotonic()
        log(t0, f"cluster {cluster.bootstrap_servers} up in {t0 - started:.1f} s; topic {topic}: "
                f"{config.partitions} partitions, replication factor {rf} ({rf_note})")
        if not wait_for_leaders(cluster, topic, config.partitions, 30.0):
            raise AssertionError(f"{topic} has no leader for some partition after 30 s")
        bootstrap = setup.bootstrap(cluster) if setup else cluster.bootstrap_servers
        watch = LeaderWatch(cluster, topic, config.partitions)
        watch.t0 = t0
        logs.logger("kafka-python", "kafka")  # w1's and c1's: kafka-python logs to the one "kafka" logger
        rate = config.write_rate_per_s
        writers: list[Writer] = [ConfluentWriter(0, bootstrap, topic, config.partitions, rate, logs, security),
                                 KafkaPythonWriter(1, bootstrap, topic, config.partitions, rate, logs, security)]
        readers: list[Reader] = [ConfluentReader("c0", bootstrap, topic, config.partitions, logs, security),
                                 KafkaPythonReader("c1", bootstrap, topic, config.partitions, logs, security)]
        threads = [watch, *writers, *readers]
        for t in threads:
            t.start()
        watch.look(cluster.node_ids[0])

        nemesis = Nemesis(cluster, watch, config, t0, lab)
        try:
            # With one replica no leader can move: do not chase moves past the least fault time.
            nemesis.run(config.min_fault_s, config.max_fault_s if rf > 1 else config.min_fault_s)
        finally:
            nemesis.heal()
        healed_at = time.monotonic()
        log(t0, f"healed after {len(nemesis.faults)} faults; waiting for the ISR to be full")
        isr_full_s = wait_isr_full(cluster, topic, config.partitions, ISR_FULL_BOUND_S)
        log(t0, "ISR full " + (f"{isr_full_s:.1f} s after healing" if isr_full_s is not None else
                               f"NOT within {ISR_FULL_BOUND_S:.0f} s of healing"))
        time.sleep(max(0.0, QUIET_WRITES_S - (time.monotonic() - healed_at)))
        for w in writers:
            w.stop_event.set()
        for w in writers:
            w.join(FLUSH_BOUND_S + 10)
            if w.is_alive():
                errors.append(f"writer {w.name_} did not stop within {FLUSH_BOUND_S + 10:.0f} s")
        log(t0, "writers stopped: " + "; ".join(f"{w.name_} {w.figures()}" for w in writers))

        ends = high_watermarks(bootstrap, topic, config.partitions, logs, security)
        if ends is None:
            errors.append("no high watermarks (ListOffsets failed)")
            ends = {}
        catch_up_deadline = time.monotonic() + CATCH_UP_BOUND_S
        while time.monotonic() < catch_up_deadline and not all(
                r.position.get(p, 0) >= end for r in readers for p, end in ends.items()):
            time.sleep(0.1)
        for r in readers:
            r.stop_event.set()
        for r in readers:
            r.join(15)
        watch.stop_event.set()
        watch.join(5)
        drained, complete = drain(bootstrap, topic, ends, DRAIN_BOUND_S, logs, security) if ends else ({}, False)
        log(t0, f"drained {sum(len(v) for v in drained.values())} records to {ends}"
                + ("" if complete else " (INCOMPLETE)"))

        for t in threads:
            if t.crash:
                errors.append(f"{t.name} crashed:\n{t.crash}")
        sends = [s for w in writers for s in w.sends]
        polls = [e for r in readers for e in r.events]
        # Every producer must get its own producer id: two sharing one corrupt each other's sequences.
        pids = {w.name_: logs.producer_ids(w.name_ if isinstance(w, ConfluentWriter) else "kafka-python")
                for w in writers}
        shared = set.intersection(*({pid for pid, _ in got} for got in pids.values())) if pids else set()
        pid_collisions = tuple(f"producer id {pid} given to " + " and ".join(
            f"{name} (epochs {sorted(e for p, e in got if p == pid)})" for name, got in sorted(pids.items()))
            for pid in sorted(shared))
        history = History(sends, polls, drained, ends)
        result = check(history)
        save_history(directory / "history.json", history, nemesis.faults, watch.timeline)
        return RunResult(
            seed=config.seed, replication_factor=rf, rf_note=rf_note, partitions=config.partitions,
            faults=tuple(nemesis.faults), leader_moves=dict(watch.moves), leader_epoch_bumps=dict(watch.bumps),
            isr_full_s=isr_full_s, drain_complete=complete, drain_end=dict(ends), check=result,
            writer_figures={w.name_: w.figures() for w in writers},
            reader_figures={r.name_: r.figures() for r in readers}, reader_resets=sum(r.resets for r in readers),
            producer_fatal_errors=tuple(e for w in writers for e in w.fatal_errors),
            stuck_writers=tuple(f"{w.name_} ({w.client})" for w in writers if w.stuck),
            unlisted_leaders=tuple(watch.unlisted_leaders),
            producer_ids={name: tuple(sorted(got)) for name, got in pids.items()}, pid_collisions=pid_collisions,
            isolation_note=isolation_note, security_note=security.note,
            elapsed_s=time.monotonic() - started, errors=tuple(errors),
            client_log_dir=logs.directory)
    finally:
        for t in threads:
            t.stop_event.set()
        # The data is thrown away: kill -9 rather than wait for graceful shutdowns, 1-3 s a run. Paused
        # nodes get SIGCONT first (cluster.stop), and stop() reaps whatever is left.
        for node in list(cluster.paused):
            cluster.resume(node)
        for node in cluster.node_ids:
            if cluster.running(node):
                cluster.kill(node)
        cluster.stop()
        for t in threads:
            t.join(2)
        logs.close()


def wait_for_leaders(cluster: Cluster, topic: str, partitions: int, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        views = topic_metadata(cluster, cluster.node_ids[0], topic)
        if views is not None and len(views) == partitions and all(v.leader >= 0 for v in views.values()):
            return True
        time.sleep(0.1)
    return False


def save_history(path: Path, history: History, faults: list[Fault],
                 timeline: list[tuple[float, int, int, int, int, tuple[int, ...]]]) -> None:
    """The run's history as JSON, for reading a failed check by hand (checker.check(History(...)) again)."""
    path.write_text(json.dumps({
        "sends": [[s.writer, s.value, s.partition, s.outcome.value, s.offset, s.error] for s in history.sends],
        "events": [["seek", e.consumer, e.partition, e.offset] if isinstance(e, Seek)
                   else ["poll", e.consumer, e.partition, e.records] for e in history.polls],
        "drain": {str(p): records for p, records in history.drain.items()},
        "drain_end": {str(p): end for p, end in history.drain_end.items()},
        "faults": [[f.kind, f.node, list(f.partitions), round(f.start_s, 2), round(f.end_s, 2), f.note]
                   for f in faults],
        "metadata": [[t, node, p, leader, epoch, list(isr)] for t, node, p, leader, epoch, isr in timeline],
    }))


def keep_evidence(directory: Path, seed: int) -> Path:
    """Copy a failed run's directory (node data and logs, client logs: a few MB) to SAMSA_CHAOS_KEEP
    (default /tmp/samsa-chaos), out of pytest's tmp dirs, which only the last three sessions keep.
    Returns where the run's files are."""
    root = Path(os.environ.get("SAMSA_CHAOS_KEEP", "/tmp/samsa-chaos"))
    if root.is_dir() and len(list(root.glob("seed*"))) >= KEPT_RUNS_MAX_COUNT:
        return directory  # full: the run stays where pytest put it (its last three sessions are kept)
    keep = root / f"seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copytree(directory, keep, dirs_exist_ok=True)
    return keep


def seeds(count: int, base: int | None = None) -> list[int]:
    """`count` seeds from `base` (SAMSA_CHAOS_SEED) or, without one, from the clock (printed by each run).
    Under pytest-xdist every worker collects the same seeds: the clock is read as the run's start, taken
    from the run id the workers share."""
    if base is None:
        env = os.environ.get("SAMSA_CHAOS_SEED")
        run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if env:
            base = int(env)
        elif run_id:
            base = int(run_id[:8], 16) % 1_000_000 * 1000
        else:
            base = int(time.time()) % 1_000_000 * 1000
    return [base + i for i in range(count)]

