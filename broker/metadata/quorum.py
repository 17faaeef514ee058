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

Persist before you send (raft.events): actions run in order, synchronously, and the persist actions
fsync before the next action runs, so a vote is granted or an offset acknowledged only once durable.
Metadata writes are rare and small, so this happens on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import MetadataRecord, decode_records, encode_records
from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.kproto.checksum import crc32c
from samsa.raft import codec
from samsa.raft.core import RaftCore
from samsa.raft.events import (
    Action,
    AdvanceLogStartOffset,
    Appended,
    AppendToLog,
    BecomeFollower,
    BecomeLeader,
    Busy,
    CommitUpTo,
    LoadSnapshot,
    PersistQuorumState,
    PersistSnapshot,
    Received,
    Resign,
    Send,
    TakeSnapshot,
    Tick,
    TruncateLog,
)
from samsa.raft.log import EntryKind, LogEntry, Snapshot, SnapshotId
from samsa.raft.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    RaftRequest,
    VoteResponse,
)
from samsa.raft.quorum_state import Leader, QuorumConfig
from samsa.storage.log import Log

logger = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
SNAPSHOT_SUFFIX = ".checkpoint"
_SNAPSHOT_MAGIC = b"SAMSASNP"
_SNAPSHOT_HEADER = struct.Struct(">8sI")  # magic, crc32c of the data
_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)
# Kafka: metadata.log.max.record.bytes.between.snapshots (20 MiB); we count entries, which are small.
SNAPSHOT_EVERY_ENTRIES = 10_000
READ_CHUNK_BYTES = 8 * 1024 * 1024


class NotControllerError(Exception):
    """This node is not (or stopped being) the active controller; `leader_id` is the new one if known."""

    def __init__(self, leader_id: int | None, message: str = "this node is not the active controller") -> None:
        super().__init__(message)
        self.leader_id = leader_id


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


# --- quorum-state (Kafka's file, JSON) ------------------------------------------------------------


def read_quorum_state(directory: Path) -> PersistQuorumState | None:
    path = directory / QUORUM_STATE_FILE
    try:
        body = json.loads(path.read_text())
        leader = int(body.get("leaderId", -1))
        voted = int(body.get("votedId", -1))
        return PersistQuorumState(int(body["leaderEpoch"]), None if voted < 0 else voted,
                                  None if leader < 0 else leader)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        # Written atomically (tmp + rename), so damage means a foreign edit: refuse to guess an epoch.
        raise SystemExit(f"{path} is damaged ({e}); refusing to start with an unknown quorum epoch") from e


def write_quorum_state(directory: Path, state: PersistQuorumState, voters: frozenset[int]) -> None:
    body = {
        "clusterId": "",
        "leaderId": -1 if state.leader_id is None else state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": -1 if state.voted_id is None else state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in sorted(voters)],
        "data_version": 0,
    }
    _write_durably(directory / QUORUM_STATE_FILE, json.dumps(body).encode())


# --- snapshots: <end offset>-<epoch>.checkpoint -----------------------------------------------------


def _snapshot_path(directory: Path, sid: SnapshotId) -> Path:
    return directory / f"{sid.end_offset:020d}-{sid.epoch:010d}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: Path, snapshot: Snapshot) -> None:
    header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, crc32c(snapshot.data))
    _write_durably(_snapshot_path(directory, snapshot.snapshot_id), header + snapshot.data)


def delete_snapshots_below(directory: Path, sid: SnapshotId) -> None:
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        found = _parse_snapshot_name(path)
        if found is not None and found < sid:
            path.unlink(missing_ok=True)


def _parse_snapshot_name(path: Path) -> SnapshotId | None:
    stem = path.name[: -len(SNAPSHOT_SUFFIX)]
    offset, sep, epoch = stem.partition("-")
    if not sep or not offset.isdigit() or not epoch.isdigit():
        return None
    return SnapshotId(int(offset), int(epoch))


def latest_snapshot(directory: Path) -> Snapshot | None:
    """The newest snapshot with a valid checksum (a damaged one is skipped, and older ones tried)."""
    found = sorted(
        ((sid, p) for p in directory.glob("*" + SNAPSHOT_SUFFIX) if (sid := _parse_snapshot_name(p)) is not None),
        reverse=True,
    )
    for sid, path in found:
        raw = path.read_bytes()
        if len(raw) >= _SNAPSHOT_HEADER.size:
            magic, crc = _SNAPSHOT_HEADER.unpack_from(raw)
            data = raw[_SNAPSHOT_HEADER.size:]
            if magic == _SNAPSHOT_MAGIC and crc32c(data) == crc:
                return Snapshot(sid, data)
        logger.error("metadata snapshot %s is damaged; ignoring it", path)
    return None


def read_entries(log: Log, start: int) -> list[LogEntry]:
    entries: list[LogEntry] = []
    offset = start
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes=READ_CHUNK_BYTES, max_offset=None).read_bytes()
        if not data:
            break
        chunk = [e for e in codec.decode_entries(data) if e.offset >= offset]
        if not chunk:
            break
        entries += chunk
        offset = chunk[-1].offset + 1
    return entries


def image_from_snapshot(snapshot: Snapshot | None) -> MetadataImage:
    if snapshot is None:
        return MetadataImage()
    return MetadataImage().apply(decode_records(snapshot.data), snapshot.snapshot_id.end_offset - 1)


def provisional_image(snapshot: Snapshot | None, entries: Sequence[LogEntry]) -> MetadataImage:
    """Everything on local disk applied, committed or not: only for opening logs before catching up."""
    image = image_from_snapshot(snapshot)
    for entry in entries:
        if entry.kind == EntryKind.DATA:
            image = image.apply(decode_records(entry.payload), entry.offset)
    return image


class _PendingWrite:
    __slots__ = ("epoch", "error", "future", "offset")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.offset: int | None = None
        self.error: NotControllerError | None = None
        self.future: asyncio.Future[int] | None = None

    def succeed(self, offset: int) -> None:
        self.offset = offset
        if self.future is not None and not self.future.done():
            self.future.set_result(offset)

    def fail(self, error: NotControllerError) -> None:
        self.error = error
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)


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
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = dict(voters)
        self._log = log
        self.directory = log.directory
        self._publish = publish
        self._on_leader_change = on_leader_change
        self._snapshot_every = snapshot_every_entries
        quorum_config = config or QuorumConfig(voters=frozenset(voters))
        assert quorum_config.voters == frozenset(voters)
        snapshot = latest_snapshot(self.directory)
        start = snapshot.snapshot_id.end_offset if snapshot is not None else log.log_start_offset
        entries = read_entries(log, max(start, log.log_start_offset)) if log.log_end_offset > start else []
        self.image = image_from_snapshot(snapshot)
        self.provisional_image = provisional_image(snapshot, entries)
        self._last_snapshot_offset = snapshot.snapshot_id.end_offset if snapshot is not None else 0
        state = read_quorum_state(self.directory)
        self.core = RaftCore(node_id, quorum_config, rng or random.Random(), _now_ms(), quorum_state=state,
                             snapshot=snapshot, entries=entries)
        # offset of the last entry of a write -> the write, until its commit (or loss)
        self._waiting: dict[int, _PendingWrite] = {}
        self._inbound: dict[int, asyncio.Future[Any]] = {}
        self._next_inbound_cid = 1 << 40  # the core's own correlation ids count up from 0
        self._clients: dict[int, NodeClient] = {}
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
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

    # --- writes -----------------------------------------------------------------------------------

    def write_nowait(self, records: Sequence[MetadataRecord]) -> asyncio.Future[int] | int:
        """Propose `records` as one entry. Returns the committed offset when the commit happened at once
        (a one-voter quorum), else a future of it. Raises NotControllerError when this node cannot write."""
        if not self.is_leader:
            # Also while a new leader's image catches up with its epoch start (see _leadership).
            raise NotControllerError(self.leader_id if self.leader_id != self.node_id else None)
        result, actions = self.core.propose([encode_records(records)], _now_ms())
        if not isinstance(result, Appended):
            if isinstance(result, Busy):
                raise NotControllerError(self.node_id, f"{result.uncommitted_count} metadata entries await commit")
            raise NotControllerError(result.leader_id)
        pending = _PendingWrite(result.epoch)
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
            # A parked fetch is answered within fetch_max_wait_ms; anything else at once.
            return await asyncio.wait_for(future, self.core.config.request_timeout_ms / 1000)
        finally:
            self._inbound.pop(cid, None)

    # --- the action executor ----------------------------------------------------------------------

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case PersistQuorumState():
                    write_quorum_state(self.directory, action, self.core.config.voters)
                case AppendToLog(entries=entries):
                    self._log.append_as_follower(codec.encode_entries(entries, timestamp_ms=_now_ms()),
                                                 now_ms=_now_ms())
                    self._log.flush()
                case TruncateLog(offset=offset):
                    self._log.truncate_to(offset)
                    self._log.flush()
                case PersistSnapshot(snapshot=snapshot):
                    write_snapshot(self.directory, snapshot)
                case AdvanceLogStartOffset(log_start_offset=offset):
                    self._advance_log_start(offset)
                case Send():
                    self._send(action)
                case CommitUpTo():
                    self._commit(action)
                case LoadSnapshot(snapshot=snapshot):
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

    def _advance_log_start(self, offset: int) -> None:
        log = self._log
        if offset >= log.log_end_offset:
            log.truncate_fully_and_start_at(offset)
        else:
            log.update_high_watermark(max(log.high_watermark, min(offset, log.log_end_offset)))
            log.maybe_increment_log_start_offset(offset)
        snapshot = self.core.log.snapshot
        if snapshot is not None:
            delete_snapshots_below(self.directory, snapshot.snapshot_id)

    def _commit(self, action: CommitUpTo) -> None:
        image = self.image
        for entry in action.entries:
            if entry.kind == EntryKind.DATA:
                image = image.apply(decode_records(entry.payload), entry.offset)
            waiting = self._waiting.pop(entry.offset, None)
            if waiting is not None:
                if waiting.epoch == entry.epoch:
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
        if self._publish is not None:
            self._publish(image)
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
        endpoint = self.voters.get(send.destination)
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
                endpoint.host, endpoint.port, client_id=f"raft-client-{self.node_id}")
        own = self.voters.get(self.node_id)
        request = codec.encode_request(
            send.message, cluster_id=self.cluster_id, destination_id=send.destination,  # type: ignore[arg-type]
            leader_endpoint=(own.host, own.port) if own is not None else None)
        try:
            response = await client.request(request, timeout_s=self.core.config.request_timeout_ms / 1000)
            message = codec.decode_response(response)
        except (TimeoutError, NodeUnavailableError, codec.CodecError) as e:
            logger.debug("raft request to %d failed: %s", send.destination, e)
            return  # the core notices the missing response on its own timers
        if isinstance(message, FetchResponse) and message.error_code == 0 and message.high_watermark >= 0:
            if message.snapshot_id is None and message.diverging_epoch is None:
                self._leader_high_watermark = message.high_watermark
        self._execute(self.core.step(Received(send.destination, message, send.correlation_id), _now_ms()))
        self._kick()

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """The timer loop: tick the core whenever its next deadline passes. Runs until cancelled."""
        self._wake = asyncio.Event()
        self._execute(self.core.step(Tick(), _now_ms()))
        try:
            while True:
                delay_ms = self.core.next_deadline_ms() - _now_ms()
                if delay_ms > 0:
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)
                    except TimeoutError:
                        pass  # the core's deadline came: tick below
                self._execute(self.core.step(Tick(), _now_ms()))
        finally:
            for task in list(self._tasks):
                task.cancel()
            for client in self._clients.values():
                await client.close()

    def resign(self) -> None:
        """Graceful shutdown: hand leadership over with EndQuorumEpoch (Kafka does it on shutdown)."""
        self._execute(self.core.step(Resign(), _now_ms()))


__all__ = ["Endpoint", "MetadataQuorum", "NotControllerError", "latest_snapshot", "read_quorum_state"]
