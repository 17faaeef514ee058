"""The metadata quorum's driver (Kafka: KafkaRaftClient's I/O half + KafkaRaftManager).

It runs the sans-IO `raft.RaftCore` against real things: the `__cluster_metadata-0` log on disk (the
same segment format as every partition), Kafka's `quorum-state` file, snapshot files, a clock, and
the network (Raft RPCs as Kafka requests, encoded by `raft.codec`). Committed entries are applied
to the `MetadataImage` and published to the broker.

    quorum = MetadataQuorum.open(node_id=1, voters={1: ("127.0.0.1", 9093)}, log=..., ...)
    offset = await quorum.write(records)   # on the active controller: committed, applied, published
    await quorum.run()                      # timers and outbound requests, until cancelled

A single node is a one-voter quorum: it elects itself on the first tick, and a write is fsynced,
committed and applied before `write` returns, with no network involved — the same code path as a
three-node cluster, where a write is committed once a majority of voters has it on disk.

Persist before you send (raft.events), off the event loop: while `run()` runs, the actions of every
core step are queued; a single executor takes what is queued, writes all its persist actions as one
batch with one fsync of the log on the driver's worker thread (broker.metadata.raft_disk), and only
then executes the other actions in order — sends, commits, leadership changes. A vote is granted
and an offset acknowledged only once durable, and no client connection waits for the disk. Before
`run()` starts (construction, the single voter's own registration) steps run inline: nothing is
served yet. After it ends nothing more is executed (what was queued is lost, as in a crash).

A failed metadata-log write (Kafka treats it as fatal): a write the free-disk reserve would refuse
is refused before the core advances (MetadataWriteRefusedError, KAFKA_STORAGE_ERROR); an I/O error
after the core advanced means the core and the disk disagree, so the driver stops executing, fails
the waiting writes with KAFKA_STORAGE_ERROR, logs one CRITICAL line and ends the process (exit 1).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.quorum_types import (
    Endpoint,
    MetadataWriteRefusedError,
    NotControllerError,
    PendingWrite,
    halt_process,
)
from samsa.broker.metadata.quorum_types import now_ms as _now_ms
from samsa.broker.metadata.raft_disk import (
    PERSIST_ACTIONS,
    MetadataLogWriter,
    PersistAction,
    image_from_snapshot,
    latest_snapshot,
    provisional_image,
    read_entries,
    read_quorum_state,
)
from samsa.broker.metadata.records import (
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
    decode_records,
    encode_records,
)
from samsa.broker.node_client import ClientSecurity, NodeClient, NodeUnavailableError
from samsa.broker.observability.histogram import Histogram
from samsa.raft import codec
from samsa.raft.core import RaftCore
from samsa.raft.events import (
    Action,
    Appended,
    BecomeFollower,
    BecomeLeader,
    Busy,
    CommitUpTo,
    LoadSnapshot,
    Received,
    Resign,
    Send,
    TakeSnapshot,
    Tick,
)
from samsa.raft.log import EntryKind
from samsa.raft.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    RaftRequest,
    VoteResponse,
)
from samsa.raft.quorum_state import Leader, QuorumConfig
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterEndpoint, VoterNode, VoterSet, decode_kraft_version
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.log import Log

logger = logging.getLogger(__name__)

_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)
# Kafka: metadata.log.max.record.bytes.between.snapshots (20 MiB); we count entries, which are small.
SNAPSHOT_EVERY_ENTRIES = 10_000
# Records that create data or let clients write it: refused while free disk is under the reserve.
# Everything else (deletes, configs, broker registrations, heartbeats, ISR and leader changes) is what an
# operator and the cluster need to recover, and stays allowed.
RESERVE_REFUSED_RECORDS = (TopicRecord, PartitionRecord, ProducerIdsRecord)
# How long a fatal metadata-log failure waits before ending the process, so that the KAFKA_STORAGE_ERROR
# answers to the waiting writes reach their clients.
FATAL_EXIT_DELAY_S = 0.2


# --- the driver ---------------------------------------------------------------------------------------


class MetadataQuorum:
    def __init__(
        self,
        *,
        node_id: int,
        cluster_id: str,
        voters: Mapping[int, Endpoint],
        log: Log,
        config: QuorumConfig | None = None,
        publish: Callable[[MetadataImage], None] | None = None,
        on_leader_change: Callable[[bool, int | None], None] | None = None,
        rng: random.Random | None = None,
        snapshot_every_entries: int = SNAPSHOT_EVERY_ENTRIES,
        disk_guard: DiskSpaceGuard | None = None,
        on_fatal: Callable[[BaseException], None] = halt_process,
        security: ClientSecurity | None = None,
        directory_id: uuid.UUID = ZERO_DIRECTORY_ID,
        listeners: tuple[VoterEndpoint, ...] | None = None,  # this node's controller listener (KIP-853)
    ) -> None:
        """`disk_guard` is the data directory's free-disk reserve (the one `log` appends under): writes
        that create data are refused below it, and the driver's own writes pass it. `on_fatal` is called
        once a metadata-log write failed after the core advanced (default: end the process)."""
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.directory_id = directory_id  # meta.properties' directory.id (KIP-853 replica key)
        self._static_voters = dict(voters)
        self._endpoints = dict(voters)  # every controller listener ever known, by node id
        self._log = log
        self.directory = log.directory
        self._publish = publish
        self._on_leader_change = on_leader_change
        self._snapshot_every = snapshot_every_entries
        self._disk_guard = disk_guard
        self._on_fatal, self._security = on_fatal, security  # (security: the controller listener's TLS / SASL)
        quorum_config = config or QuorumConfig(voters=frozenset(voters))
        assert quorum_config.voters == frozenset(voters)
        self.writer = MetadataLogWriter(log, quorum_config.voters, disk_guard)
        snapshot = latest_snapshot(self.directory)
        start = snapshot.snapshot_id.end_offset if snapshot is not None else log.log_start_offset
        entries = read_entries(log, max(start, log.log_start_offset)) if log.log_end_offset > start else []
        self.image = image_from_snapshot(snapshot)
        self.provisional_image = provisional_image(snapshot, entries)
        self._last_snapshot_offset = snapshot.snapshot_id.end_offset if snapshot is not None else 0
        state = read_quorum_state(self.directory)
        bootstrap = VoterSet(tuple(
            VoterNode(n, directory_id if n == node_id else ZERO_DIRECTORY_ID,
                      (VoterEndpoint(codec.CONTROLLER_LISTENER_NAME, e.host, e.port),))
            for n, e in voters.items()))
        self.core = RaftCore(node_id, quorum_config, rng or random.Random(), _now_ms(), quorum_state=state,
                             snapshot=snapshot, entries=entries, directory_id=directory_id,
                             bootstrap_voters=bootstrap, listeners=listeners)
        # offset of the last entry of a write -> the write, until its commit (or loss)
        self._waiting: dict[int, PendingWrite] = {}
        self.commit_latency = Histogram()  # raft-metrics commit-latency: a write's propose to its commit
        self._inbound: dict[int, asyncio.Future[Any]] = {}
        self._next_inbound_cid = 1 << 40  # the core's own correlation ids count up from 0
        self._clients: dict[int, NodeClient] = {}
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # The executor (module docstring): actions queued while run() runs, the batch being written.
        self._queue: list[Action] = []
        self._work: asyncio.Event | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._writing: concurrent.futures.Future[Any] | None = None
        self._running = False  # run() is running: steps go to the executor
        self._stopped = False  # run() ended or the log failed: nothing more reaches the disk or the network
        self.failure: BaseException | None = None  # the metadata-log write that failed (fatal)
        self._unpublished = False  # the image has commits the broker has not been shown yet
        self.is_leader = False
        self.leader_id: int | None = None
        self._leader_high_watermark: int | None = None
        self._leader_ready_offset: int | None = None  # a new leader acts once the image reaches this
        # every entry below this offset is in the image (control entries included)
        self.applied_offset = snapshot.snapshot_id.end_offset if snapshot is not None else 0
        # A restarted follower knows its leader from the quorum-state file (the core announces only
        # changes): brokers need it to find the active controller.
        if self.core.leader_id != self.node_id:
            self.leader_id = self.core.leader_id
        # One tick now: a one-voter quorum elects itself and commits what the log holds, so a single
        # node's image is complete before the broker opens a socket.
        self._execute(self.core.step(Tick(), _now_ms()))

    # --- state ------------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark

    @property
    def caught_up(self) -> bool:
        """The image holds every entry the leader had committed when we last heard from it (a leader
        or single voter: every committed entry). Until then it may lack topics that exist."""
        if self.is_leader:
            return True
        return self._leader_high_watermark is not None and self.applied_offset >= self._leader_high_watermark

    def set_listeners(self, publish: Callable[[MetadataImage], None],
                      on_leader_change: Callable[[bool, int | None], None]) -> None:
        self._publish = publish
        self._on_leader_change = on_leader_change

    def describe(self) -> Any:
        return self.core.describe_quorum()

    @property
    def voters(self) -> dict[int, Endpoint]:
        """The voters in force (KIP-853: the latest VotersRecord in the log, else controller.quorum.voters)
        and their controller listeners."""
        out: dict[int, Endpoint] = {}
        for v in self.core.voter_set().voters:
            e = v.endpoint(codec.CONTROLLER_LISTENER_NAME) or (v.endpoints[0] if v.endpoints else None)
            if (found := Endpoint(e.host, e.port) if e else self._static_voters.get(v.voter_id)) is not None:
                out[v.voter_id] = found
        self._endpoints.update(out)
        return out

    def endpoint(self, node_id: int) -> Endpoint | None:
        """A node's controller listener: a voter's, else the last one known (a leader that removed itself
        from the voters still leads until the change commits, and its followers keep fetching from it)."""
        return self.voters.get(node_id) or self._endpoints.get(node_id)

    def execute(self, actions: list[Action]) -> None:  # a core call's, made by broker.metadata.voter_changes
        self._execute(actions)
        self._kick()

    def await_commit(self, actions: list[Action], offset: int, epoch: int) -> asyncio.Future[int]:
        """Carry out `actions` (which appended the entry at `offset` in `epoch`); the future resolves when that
        entry commits, or fails with NotControllerError if it is lost."""
        pending = PendingWrite(epoch)
        self._waiting[offset] = pending
        self._execute(actions)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if pending.error is not None:
            future.set_exception(pending.error)
        elif pending.offset is not None:
            future.set_result(pending.offset)
        else:
            pending.future = future
        self._kick()
        return future

    # --- writes -----------------------------------------------------------------------------------

    def write_nowait(self, records: Sequence[MetadataRecord]) -> asyncio.Future[int] | int:
        """Propose `records` as one entry. Returns the committed offset when the commit happened at once
        (a one-voter quorum before run() started), else a future of it. Raises NotControllerError when
        this node cannot write, MetadataWriteRefusedError when the metadata log cannot take the write."""
        if self.failure is not None:
            raise MetadataWriteRefusedError(self.node_id, f"the metadata log failed: {self.failure}")
        if self._stopped:
            raise NotControllerError(None, "the metadata quorum stopped")
        if not self.is_leader:
            # Also while a new leader's image catches up with its epoch start (see _leadership).
            raise NotControllerError(self.leader_id if self.leader_id != self.node_id else None)
        payload = encode_records(records)
        now = _now_ms()
        # Refused before the core advances, so the core and the disk never disagree over it.
        if (self._disk_guard is not None and any(isinstance(r, RESERVE_REFUSED_RECORDS) for r in records)
                and self._disk_guard.below_reserve(len(payload), now)):
            raise MetadataWriteRefusedError(
                self.node_id, f"free disk space of {self.directory.parent} is below samsa.min.free.disk.bytes "
                              f"({self._disk_guard.min_free_bytes}): only deletes and cluster changes are accepted")
        result, actions = self.core.propose([payload], now)
        if not isinstance(result, Appended):
            if isinstance(result, Busy):
                raise NotControllerError(self.node_id, f"{result.uncommitted_count} metadata entries await commit")
            raise NotControllerError(result.leader_id)
        pending = PendingWrite(result.epoch)
        self._waiting[result.last_offset] = pending
        self._execute(actions)
        if pending.error is not None:
            raise pending.error
        if pending.offset is not None:
            return pending.offset
        pending.future = asyncio.get_running_loop().create_future()
        self._kick()
        return pending.future

    async def write(self, records: Sequence[MetadataRecord], *, timeout_s: float = 30.0) -> int:
        result = self.write_nowait(records)
        if isinstance(result, int):
            return result
        return await asyncio.wait_for(result, timeout_s)

    # --- inbound Raft requests (from the controller listener) ---------------------------------------

    async def handle_request(self, request: Any, api_key: int, api_version: int) -> Any:
        """Answer a Vote / BeginQuorumEpoch / EndQuorumEpoch / Fetch / FetchSnapshot kio request."""
        try:
            source, message = codec.decode_request(request, cluster_id=self.cluster_id)
        except codec.CodecError as e:
            logger.warning("refusing a Raft request: %s", e)
            return codec.error_response(api_key, api_version, e.error_code)
        nodes = [(n, e.host, e.port) for n, e in sorted(self.voters.items())]
        return codec.encode_response(await self._answer(source, message), api_version, nodes=nodes)

    async def _answer(self, source: int, message: RaftRequest) -> Any:
        cid = self._next_inbound_cid
        self._next_inbound_cid += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inbound[cid] = future
        try:
            self._execute(self.core.step(Received(source, message, cid), _now_ms()))
            self._kick()
            # A parked fetch is answered within fetch_max_wait_ms; anything else once its step's
            # persistence is durable.
            return await asyncio.wait_for(future, self.core.config.request_timeout_ms / 1000)
        finally:
            self._inbound.pop(cid, None)

    # --- the action executor ----------------------------------------------------------------------

    def _execute(self, actions: list[Action]) -> None:
        """Carry out one step's actions: queued for the executor while run() runs, else at once."""
        if not actions or self._stopped:
            return
        if self._running:
            assert self._work is not None
            self._queue.extend(actions)
            self._work.set()
            return
        persist: list[PersistAction] = [a for a in actions if isinstance(a, PERSIST_ACTIONS)]
        if persist:
            try:
                self.writer.write_batch(persist)
            except Exception as e:
                self._fail(e)
                return
        self._apply_all(actions, contain_errors=False)

    async def _executor(self) -> None:
        """While run() runs: write what is queued as one batch on the worker, then apply it in order.
        Steps queued meanwhile wait for the next batch (group commit: one fsync for all of them)."""
        assert self._work is not None and self._pool is not None
        while not self._stopped:
            if not self._queue:
                self._work.clear()
                await self._work.wait()
                continue
            actions, self._queue = self._queue, []
            persist: list[PersistAction] = [a for a in actions if isinstance(a, PERSIST_ACTIONS)]
            if persist:
                self._writing = self._pool.submit(self.writer.write_batch, persist)
                try:
                    await asyncio.wrap_future(self._writing)
                except Exception as e:
                    self._fail(e)
                    return
                self._writing = None
            # A bug in a listener (publish, leader change) is logged: the quorum itself is consistent.
            self._apply_all(actions, contain_errors=True)

    def _apply_all(self, actions: list[Action], *, contain_errors: bool) -> None:
        """The non-persist actions, in order; a run of commits is published once, at its end."""
        for action in [*actions, None]:
            if self._stopped:
                return
            if isinstance(action, PERSIST_ACTIONS):
                continue
            try:
                if not isinstance(action, CommitUpTo):
                    self._maybe_publish()
                if action is not None:
                    self._apply(action)
            except Exception:
                if not contain_errors:
                    raise
                logger.exception("metadata quorum: %s failed", type(action).__name__)

    def _fail(self, error: BaseException) -> None:
        """A persist failed after the core advanced: stop everything, answer the waiting writes with
        KAFKA_STORAGE_ERROR, and end the process (on_fatal) — Kafka's fatal fault handler does the same."""
        if self.failure is not None:
            return
        self.failure = error
        self._stopped = True
        self._queue.clear()
        logger.critical("FATAL: writing the metadata log %s failed after the Raft state advanced (%s: %s); "
                        "the quorum's state in memory and the disk disagree, so this node stops. Fix the disk "
                        "and restart it: it recovers from what the disk holds.",
                        self.directory, type(error).__name__, error)
        refused = MetadataWriteRefusedError(self.node_id, f"the metadata log failed: {error}")
        waiting, self._waiting = self._waiting, {}
        for pending in waiting.values():
            pending.fail(refused)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._on_fatal(error)
            return
        loop.call_later(FATAL_EXIT_DELAY_S, self._on_fatal, error)

    def _apply(self, action: Action) -> None:
        match action:
            case Send():
                self._send(action)
            case CommitUpTo():
                self._commit(action)
            case LoadSnapshot(snapshot=snapshot):
                self._unpublished = False  # the snapshot's image replaces whatever was not published yet
                logger.info("installed the leader's metadata snapshot up to offset %d (epoch %d)",
                            snapshot.snapshot_id.end_offset, snapshot.snapshot_id.epoch)
                self.image = image_from_snapshot(snapshot)
                self.applied_offset = snapshot.snapshot_id.end_offset
                self._last_snapshot_offset = snapshot.snapshot_id.end_offset
                self._log.update_high_watermark(min(self._log.log_end_offset, snapshot.snapshot_id.end_offset))
                if self._publish is not None:
                    self._publish(self.image)
            case BecomeLeader():
                # Kafka's maybeFireLeaderChange: the controller may act only once the image holds
                # every entry before this epoch's LeaderChange entry; until then it would decide on
                # a stale image (an empty one, after a restart).
                state = self.core.state
                self._leader_ready_offset = (state.epoch_start_offset + 1 if isinstance(state, Leader)
                                             else self.core.log.end_offset)
                self._leadership(False, None)
                self._maybe_activate()
            case BecomeFollower(leader_id=leader_id):
                self._leader_ready_offset = None
                self._leadership(False, leader_id)
            case _:
                raise AssertionError(f"{action!r} is a persist action: the writer carries it out")

    def _maybe_publish(self) -> None:
        if self._unpublished:
            self._unpublished = False
            if self._publish is not None:
                self._publish(self.image)

    def _commit(self, action: CommitUpTo) -> None:
        image = self.image
        for entry in action.entries:
            if entry.kind == EntryKind.DATA:
                image = image.apply(decode_records(entry.payload), entry.offset)
            elif entry.kind == EntryKind.KRAFT_VERSION:  # (KIP-853: the features' kraft.version)
                image = image.with_kraft_version(decode_kraft_version(entry.payload))
            waiting = self._waiting.pop(entry.offset, None)
            if waiting is not None:
                if waiting.epoch == entry.epoch:
                    self.commit_latency.observe(time.perf_counter() - waiting.proposed_s)
                    waiting.succeed(entry.offset)
                else:
                    waiting.fail(NotControllerError(self.leader_id, "the write was lost in a leader change"))
        if self._waiting:
            for offset in [o for o in self._waiting if o < action.high_watermark]:
                self._waiting.pop(offset).fail(
                    NotControllerError(self.leader_id, "the write was lost in a leader change"))
        self._log.update_high_watermark(min(self._log.log_end_offset, action.high_watermark))
        self.applied_offset = action.high_watermark
        self.image = image
        # Published once the batch's run of commits is applied (_maybe_publish): the broker's reaction to
        # an image walks every partition, so a batch of N commits costs one walk, not N. A new leader's
        # activation sees its image published first.
        self._unpublished = True
        if self._leader_ready_offset is not None:
            self._maybe_publish()
        self._maybe_activate()
        if action.high_watermark - self._last_snapshot_offset >= self._snapshot_every:
            self._last_snapshot_offset = action.high_watermark
            self._execute(self.core.step(TakeSnapshot(action.high_watermark, encode_records(image.to_records())),
                                         _now_ms()))

    def _maybe_activate(self) -> None:
        ready = self._leader_ready_offset
        if ready is not None and self.applied_offset >= ready and isinstance(self.core.state, Leader):
            self._leader_ready_offset = None
            self._leadership(True, self.node_id)

    def _leadership(self, leader: bool, leader_id: int | None) -> None:
        was = (self.is_leader, self.leader_id)
        self.is_leader, self.leader_id = leader, leader_id
        if not leader:
            for waiting in self._waiting.values():
                waiting.fail(NotControllerError(leader_id))
            self._waiting.clear()
        if (leader, leader_id) != was:
            logger.info("metadata quorum epoch %d: %s", self.core.epoch,
                        "this node is the active controller" if leader else f"leader is {leader_id}")
            if self._on_leader_change is not None:
                self._on_leader_change(leader, leader_id)

    # --- the network --------------------------------------------------------------------------------

    def _send(self, send: Send) -> None:
        if isinstance(send.message, _RESPONSES):
            future = self._inbound.get(send.correlation_id)
            if future is not None and not future.done():
                future.set_result(send.message)
            return
        endpoint = self.endpoint(send.destination)
        if endpoint is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not running yet (the constructor's tick); the core re-sends on its timers
        task = loop.create_task(self._request(send, endpoint))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, send: Send, endpoint: Endpoint) -> None:
        client = self._clients.get(send.destination)
        if client is None:
            client = self._clients[send.destination] = NodeClient(
                endpoint.host, endpoint.port, client_id=f"raft-client-{self.node_id}", security=self._security)
        own = self.endpoint(self.node_id)
        request = codec.encode_request(
            send.message, cluster_id=self.cluster_id, destination_id=send.destination,  # type: ignore[arg-type]
            leader_endpoint=(own.host, own.port) if own is not None else None)
        try:
            response = await client.request(request, timeout_s=self.core.config.request_timeout_ms / 1000)
            message = codec.decode_response(response)
        except (TimeoutError, NodeUnavailableError, codec.CodecError) as e:
            logger.debug("raft request to %d failed: %s", send.destination, e)
            return  # the core notices the missing response on its own timers
        if self._stopped:
            return
        if isinstance(message, FetchResponse) and message.error_code == 0 and message.high_watermark >= 0:
            if message.snapshot_id is None and message.diverging_epoch is None:
                self._leader_high_watermark = message.high_watermark
        self._execute(self.core.step(Received(send.destination, message, send.correlation_id), _now_ms()))
        self._kick()

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """The timer loop and the executor: tick the core whenever its next deadline passes, persist
        and execute what it asks. Runs until cancelled."""
        self._wake = asyncio.Event()
        self._work = asyncio.Event()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"metadata-log-{self.node_id}")
        self._running = True
        executor = asyncio.get_running_loop().create_task(self._executor())
        self._execute(self.core.step(Tick(), _now_ms()))
        try:
            while True:
                if self._stopped:
                    await asyncio.sleep(3600)  # failed: on_fatal ends the process; nothing to tick
                    continue
                delay_ms = self.core.next_deadline_ms() - _now_ms()
                if delay_ms > 0:
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)
                    except TimeoutError:
                        pass  # the core's deadline came: tick below
                self._execute(self.core.step(Tick(), _now_ms()))
        finally:
            self._stopped = True
            self._running = False
            executor.cancel()
            for task in list(self._tasks):
                task.cancel()
            if self._writing is not None:
                # The batch under way finishes (a thread cannot be interrupted) before the log is closed.
                concurrent.futures.wait([self._writing])
            self._pool.shutdown(wait=True)
            stopped = NotControllerError(None, "the metadata quorum stopped")
            waiting, self._waiting = self._waiting, {}
            for pending in waiting.values():
                pending.fail(stopped)
            for client in self._clients.values():
                await client.close()

    def resign(self) -> None:
        """Graceful shutdown: hand leadership over with EndQuorumEpoch (Kafka does it on shutdown)."""
        self._execute(self.core.step(Resign(), _now_ms()))


__all__ = [
    "Endpoint",
    "MetadataQuorum",
    "MetadataWriteRefusedError",
    "NotControllerError",
    "halt_process",
    "latest_snapshot",
    "read_quorum_state",
]
