"""The metadata quorum driver's persistence, in process: off the event loop, batched, before anything is
sent or committed; and a failed metadata-log write never leaves the Raft core and the disk disagreeing.

A one-voter quorum on a FaultyFileIO (storage/file_io.py): it reports a made-up free-disk figure and can
fail fsync, and every fsync is recorded with the thread that made it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest

from samsa.broker.metadata import raft_disk
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.quorum import Endpoint, MetadataQuorum, MetadataWriteRefusedError, read_quorum_state
from samsa.broker.metadata.records import ConfigRecord, ProducerIdsRecord, RemoveTopicRecord, TopicRecord
from samsa.kproto.errors import ErrorCode
from samsa.raft.events import PersistQuorumState
from samsa.raft.messages import VoteRequest, VoteResponse
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.errors import KafkaStorageError
from samsa.storage.file_io import FaultyFileIO
from samsa.storage.log import Log

RESERVE_BYTES = 1_000_000


class RecordingIO(FaultyFileIO):
    """Records ("fsync", thread) for every fsync, so a test can see where and in which order they ran."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, threading.Thread]] = []

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        self.events.append(("fsync", threading.current_thread()))


class Node:
    """One voter over its own log, guard and fatal-fault recorder; `reopen` is a process restart."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.io = RecordingIO()
        self.fatal: list[BaseException] = []
        self.log, self.guard, self.quorum = self._open()

    def _open(self) -> tuple[Log, DiskSpaceGuard, MetadataQuorum]:
        # recheck_interval_ms=0: every check reads the (made-up) free-disk figure, not the 1 s estimate
        guard = DiskSpaceGuard(self.io, self.directory.parent, RESERVE_BYTES, recheck_interval_ms=0)
        log = Log.open(self.directory, METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000), file_io=self.io,
                       disk_guard=guard)
        quorum = MetadataQuorum(node_id=1, cluster_id="c", voters={1: Endpoint("127.0.0.1", 0)}, log=log,
                                disk_guard=guard, on_fatal=self.fatal.append)
        return log, guard, quorum

    def reopen(self) -> None:
        self.log.close()
        self.io = RecordingIO()
        self.log, self.guard, self.quorum = self._open()


@pytest.fixture
def node(tmp_path: Path) -> Node:
    (tmp_path / "data").mkdir()
    return Node(tmp_path / "data" / "__cluster_metadata-0")


async def _serving(quorum: MetadataQuorum) -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(quorum.run())
    await asyncio.sleep(0)  # run() starts its executor
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- off the loop, batched, persist before commit ---------------------------------------------------------


def test_while_serving_writes_are_fsynced_on_the_worker_thread_and_committed_after(node: Node) -> None:
    async def scenario() -> None:
        task = await _serving(node.quorum)
        loop_thread = threading.current_thread()
        node.io.events.clear()
        future = node.quorum.write_nowait([TopicRecord("a", "id-a")])
        assert isinstance(future, asyncio.Future)  # not committed yet: its fsync has not run
        assert "a" not in node.quorum.image.topics_by_name
        future.add_done_callback(lambda _: node.io.events.append(("commit", threading.current_thread())))
        assert await asyncio.wait_for(future, 30) >= 0
        kinds = [kind for kind, _ in node.io.events]
        assert "fsync" in kinds and kinds.index("fsync") < kinds.index("commit")
        assert all(thread is not loop_thread for kind, thread in node.io.events if kind == "fsync")
        assert node.quorum.image.topics_by_name["a"].topic_id == "id-a"
        await _stop(task)

    asyncio.run(scenario())
    node.reopen()
    assert node.quorum.image.topics_by_name["a"].topic_id == "id-a"


def test_writes_proposed_together_share_one_log_fsync(node: Node) -> None:
    async def scenario() -> None:
        task = await _serving(node.quorum)
        await asyncio.sleep(0.05)
        flushes_before = node.quorum.writer.log_flushes
        published: list[set[str]] = []
        node.quorum.set_listeners(lambda image: published.append(set(image.topics_by_name)), lambda *_: None)
        # No await between them: the executor finds all ten steps queued and writes them as one batch.
        futures = [node.quorum.write_nowait([TopicRecord(f"t{i}", f"id{i}")]) for i in range(10)]
        offsets = [await asyncio.wait_for(f, 30) for f in futures if isinstance(f, asyncio.Future)]
        assert len(offsets) == 10 and offsets == sorted(offsets)
        assert node.quorum.writer.log_flushes - flushes_before == 1
        # ... and the broker is shown the image once, with all ten (its reaction walks every partition).
        assert published == [{f"t{i}" for i in range(10)}]
        await _stop(task)

    asyncio.run(scenario())
    node.reopen()
    assert {f"t{i}" for i in range(10)} <= set(node.quorum.image.topics_by_name)


# --- issue 15 part 2: the free-disk reserve and failed writes ----------------------------------------------


def test_under_the_reserve_a_creating_write_is_refused_before_the_core_advances(node: Node) -> None:
    quorum = node.quorum
    quorum.write_nowait([TopicRecord("keep", "id-keep"), TopicRecord("doomed", "id-doomed")])
    end_before, log_end_before = quorum.core.log.end_offset, node.log.log_end_offset
    node.io.free_bytes = RESERVE_BYTES // 2
    for records in ([TopicRecord("new", "id-new")], [ProducerIdsRecord(1, 0, 2000)]):
        with pytest.raises(MetadataWriteRefusedError) as refused:
            quorum.write_nowait(records)
        assert refused.value.error_code == ErrorCode.kafka_storage_error
        assert "samsa.min.free.disk.bytes" in str(refused.value)
    assert (quorum.core.log.end_offset, node.log.log_end_offset) == (end_before, log_end_before)
    # Deletes and config changes still go through, below the reserve (the metadata log is exempt).
    assert isinstance(quorum.write_nowait([RemoveTopicRecord("id-doomed")]), int)
    assert isinstance(quorum.write_nowait([ConfigRecord(2, "keep", "retention.ms", "1")]), int)
    assert "doomed" not in quorum.image.topics_by_name
    # Data appends on the same guard are still refused meanwhile.
    with pytest.raises(KafkaStorageError):
        node.guard.check(100, int(time.time() * 1000))
    # Disk freed: creating works again, and the core and the log agree across a restart.
    node.io.free_bytes = None
    assert isinstance(quorum.write_nowait([TopicRecord("new", "id-new")]), int)
    assert quorum.core.log.end_offset == node.log.log_end_offset
    node.reopen()
    assert set(node.quorum.image.topics_by_name) == {"keep", "new"}
    assert node.quorum.image.topic_configs("keep") == {"retention.ms": "1"}
    assert isinstance(node.quorum.write_nowait([TopicRecord("after", "id-after")]), int)


def test_a_quorum_opened_under_the_reserve_elects_itself_and_deletes(node: Node) -> None:
    node.quorum.write_nowait([TopicRecord("doomed", "id-doomed")])
    node.io.free_bytes = 0
    node.log.close()
    node.log, node.guard, node.quorum = node._open()  # the same io: the disk is still full
    quorum = node.quorum
    assert quorum.is_leader and quorum.epoch == 2  # its LeaderChange entry was written below the reserve
    assert isinstance(quorum.write_nowait([RemoveTopicRecord("id-doomed")]), int)
    with pytest.raises(MetadataWriteRefusedError):
        quorum.write_nowait([TopicRecord("new", "id-new")])
    assert node.fatal == []


def test_an_fsync_failure_after_the_core_advanced_is_fatal_and_answered(node: Node,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        task = await _serving(node.quorum)
        assert await asyncio.wait_for(node.quorum.write([TopicRecord("a", "id-a")]), 30) >= 0
        node.io.fail_fsync = True
        future = node.quorum.write_nowait([TopicRecord("b", "id-b")])
        assert isinstance(future, asyncio.Future)
        with pytest.raises(MetadataWriteRefusedError) as failed:
            await asyncio.wait_for(future, 30)
        assert failed.value.error_code == ErrorCode.kafka_storage_error
        # Nothing after the failed batch ran: no commit, and every later write is refused at once.
        assert "b" not in node.quorum.image.topics_by_name
        with pytest.raises(MetadataWriteRefusedError):
            node.quorum.write_nowait([RemoveTopicRecord("id-a")])
        await asyncio.sleep(0.5)  # the fatal handler runs once the answers had time to go out
        assert len(node.fatal) == 1 and isinstance(node.fatal[0], KafkaStorageError)
        await _stop(task)

    with caplog.at_level(logging.CRITICAL, logger="samsa.broker.metadata.quorum"):
        asyncio.run(scenario())
    assert any("FATAL: writing the metadata log" in r.getMessage() for r in caplog.records)
    # A restart recovers from what the disk holds, and the quorum writes again.
    node.reopen()
    assert node.quorum.is_leader and "a" in node.quorum.image.topics_by_name
    assert isinstance(node.quorum.write_nowait([TopicRecord("c", "id-c")]), int)
    assert node.quorum.core.log.end_offset == node.log.log_end_offset


def test_a_vote_is_granted_only_once_the_quorum_state_is_durable_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "__cluster_metadata-0"
    log = Log.open(directory, METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
    written: list[tuple[int, int | None, threading.Thread]] = []
    real_write = raft_disk.write_quorum_state

    def recording_write(d: Path, state: PersistQuorumState, voters: frozenset[int]) -> None:
        real_write(d, state, voters)
        written.append((state.epoch, state.voted_id, threading.current_thread()))

    monkeypatch.setattr(raft_disk, "write_quorum_state", recording_write)
    # Voters 2 and 3 are never reachable: only the vote request below reaches node 1.
    voters = {n: Endpoint("127.0.0.1", 1) for n in (1, 2, 3)}
    quorum = MetadataQuorum(node_id=1, cluster_id="c", voters=voters, log=log)

    async def scenario() -> None:
        task = await _serving(quorum)
        answer = await quorum._answer(2, VoteRequest(replica_id=2, replica_epoch=50, last_offset_epoch=0,
                                                     last_offset=0, pre_vote=False))
        assert isinstance(answer, VoteResponse) and answer.vote_granted
        # When the grant is answered, the vote is on disk, written by the driver's thread.
        state = read_quorum_state(directory)
        assert state is not None and (state.epoch, state.voted_id) == (50, 2)
        assert (50, 2) in [(epoch, voted) for epoch, voted, _ in written]
        assert all(thread is not threading.current_thread() for *_, thread in written)
        await _stop(task)

    asyncio.run(scenario())
    log.close()
