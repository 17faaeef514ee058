"""Transcript tests of the Raft core (etcd-raft's datadriven style): tests/raft/testdata/*.txt.

Each file is a sequence of blocks:

    <command> [args]
    ----
    <expected output>

separated by blank lines; lines starting with # are comments. SAMSA_REWRITE=1 rewrites the expected
output from what the core does now (review the diff before committing it!).

Commands:
    cluster voters=1,2,3 [observers=4] [snapshot_chunk_bytes=N] ...   fresh nodes at time 0
    timeout <n>         advance the clock to n's election (or fetch) timeout and tick n only
    tick <ms>           advance the clock by ms and tick every node whose deadline has come
    run <ms> [verbose]  tick and deliver in 10 ms steps (fetch chatter elided unless verbose)
    deliver [from=a] [to=b]   deliver the queued messages (one round; answers are queued)
    drop [from=a] [to=b]      drop the queued messages
    stabilize           deliver until no message is queued (output elided unless `stabilize verbose`)
    propose <n> <payload>...  client append on n
    resign <n> / snapshot <n> <end_offset> / crash <n> / restart <n>
    vote|prevote <from> <to> epoch=E last=O@L   deliver a hand-made VoteRequest (its answer is printed)
    isolate <n> / cut <a> <b> / heal   (messages of an isolated node or a cut link are dropped)
    state               one line per node: role, epoch, leader, high watermark, log
    describe <n>        n's answer to DescribeQuorum
"""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import pytest

from samsa.raft.core import RaftCore
from samsa.raft.events import (
    Action,
    AdvanceLogStartOffset,
    Appended,
    AppendToLog,
    BecomeFollower,
    BecomeLeader,
    CommitUpTo,
    Input,
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
from samsa.raft.log import EntryKind, LogEntry, Snapshot
from samsa.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from samsa.raft.quorum_state import Follower, QuorumConfig

TESTDATA = Path(__file__).parent / "testdata"


def _entries(entries: tuple[LogEntry, ...] | list[LogEntry]) -> str:
    def one(e: LogEntry) -> str:
        text = "LC" if e.kind == EntryKind.LEADER_CHANGE else e.payload.decode()
        return f"{e.offset}@{e.epoch}:{text}"

    return "[" + " ".join(one(e) for e in entries) + "]"


def _leader(leader_id: int) -> str:
    return "-" if leader_id == -1 else str(leader_id)


def _error(code: ErrorCode) -> str:
    return "" if code == ErrorCode.none else f" {code.name.upper()}"


def _chatter(line: str) -> bool:
    """Steady-state fetch traffic, left out of `run` output unless verbose."""
    return ": Fetch epoch=" in line or "records=[]" in line or "(dropped" in line


def format_message(m: RaftMessage) -> str:
    match m:
        case VoteRequest():
            kind = "PreVote" if m.pre_vote else "Vote"
            return f"{kind} epoch={m.replica_epoch} last={m.last_offset}@{m.last_offset_epoch}"
        case VoteResponse():
            verdict = "granted" if m.vote_granted else "rejected"
            return f"VoteResponse {verdict} epoch={m.leader_epoch} leader={_leader(m.leader_id)}{_error(m.error_code)}"
        case BeginQuorumEpochRequest():
            return f"BeginQuorumEpoch epoch={m.leader_epoch}"
        case EndQuorumEpochRequest():
            return f"EndQuorumEpoch epoch={m.leader_epoch} preferred={list(m.preferred_candidates)}"
        case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
            name = type(m).__name__
            return f"{name} epoch={m.leader_epoch} leader={_leader(m.leader_id)}{_error(m.error_code)}"
        case FetchRequest():
            return f"Fetch epoch={m.current_leader_epoch} offset={m.fetch_offset} last_epoch={m.last_fetched_epoch}"
        case FetchResponse():
            text = f"FetchResponse epoch={m.leader_epoch} leader={_leader(m.leader_id)}{_error(m.error_code)}"
            if m.error_code == ErrorCode.none:
                text += f" hw={m.high_watermark}"
                if m.diverging_epoch is not None:
                    text += f" diverging={m.diverging_epoch.end_offset}@{m.diverging_epoch.epoch}"
                elif m.snapshot_id is not None:
                    text += f" snapshot={m.snapshot_id.end_offset}@{m.snapshot_id.epoch}"
                else:
                    text += f" records={_entries(m.records)}"
            return text
        case FetchSnapshotRequest():
            sid = m.snapshot_id
            return f"FetchSnapshot epoch={m.current_leader_epoch} id={sid.end_offset}@{sid.epoch} position={m.position}"
        case FetchSnapshotResponse():
            text = f"FetchSnapshotResponse epoch={m.leader_epoch}{_error(m.error_code)}"
            if m.error_code == ErrorCode.none:
                text += f" position={m.position} size={m.size} chunk={m.unaligned_records!r}"
            return text
    raise AssertionError(m)


def format_action(node: int, a: Action) -> str:
    match a:
        case Send():
            return f"n{node} -> n{a.destination}: {format_message(a.message)}"
        case PersistQuorumState():
            return f"n{node}: persist epoch={a.epoch} voted={a.voted_id or '-'} leader={a.leader_id or '-'}"
        case AppendToLog():
            return f"n{node}: append {_entries(a.entries)}"
        case TruncateLog():
            return f"n{node}: truncate to {a.offset}"
        case PersistSnapshot():
            sid = a.snapshot.snapshot_id
            return f"n{node}: persist snapshot {sid.end_offset}@{sid.epoch} {a.snapshot.data!r}"
        case AdvanceLogStartOffset():
            return f"n{node}: log start {a.log_start_offset}"
        case CommitUpTo():
            return f"n{node}: commit hw={a.high_watermark} {_entries(a.entries)}"
        case LoadSnapshot():
            return f"n{node}: load snapshot {a.snapshot.snapshot_id.end_offset}"
        case BecomeLeader():
            return f"n{node}: BECOME LEADER epoch={a.epoch}"
        case BecomeFollower():
            return f"n{node}: become follower epoch={a.epoch} leader={a.leader_id or '-'}"
    raise AssertionError(a)


@dataclasses.dataclass
class _Disk:
    quorum: PersistQuorumState | None = None
    entries: list[LogEntry] = dataclasses.field(default_factory=list)
    snapshot: Snapshot | None = None


class Harness:
    def __init__(self) -> None:
        self.now_ms = 0
        self.config: QuorumConfig | None = None
        self.nodes: dict[int, RaftCore | None] = {}
        self.disks: dict[int, _Disk] = {}
        self.queue: list[tuple[int, Send]] = []
        self.isolated: set[int] = set()
        self.cuts: set[frozenset[int]] = set()

    def run(self, command: str, args: list[str]) -> list[str]:
        kv = dict(a.split("=", 1) for a in args if "=" in a)
        positional = [a for a in args if "=" not in a]
        out: list[str] = []
        match command:
            case "cluster":
                voters = frozenset(int(v) for v in kv.pop("voters").split(","))
                observers = [int(v) for v in kv.pop("observers").split(",")] if "observers" in kv else []
                self.config = QuorumConfig(voters=voters, **{k: int(v) for k, v in kv.items()})  # type: ignore[arg-type]
                for n in sorted(voters) + observers:
                    self.disks[n] = _Disk()
                    self._start(n)
            case "timeout":
                n = int(positional[0])
                s = self._core(n).state
                deadline = s.fetch_deadline_ms if isinstance(s, Follower) else getattr(s, "election_deadline_ms", 0)
                self.now_ms = max(self.now_ms, deadline)
                out += self._step(n, Tick())
            case "tick":
                self.now_ms += int(positional[0])
                for n, core in sorted(self.nodes.items()):
                    if core is not None and core.next_deadline_ms() <= self.now_ms:
                        out += self._step(n, Tick())
            case "run":
                # A healthy network with no latency: every 10 ms, tick due nodes and deliver until quiet.
                verbose = "verbose" in positional
                for _ in range(int(positional[0]) // 10):
                    self.now_ms += 10
                    lines: list[str] = []
                    for n, core in sorted(self.nodes.items()):
                        if core is not None and core.next_deadline_ms() <= self.now_ms:
                            lines += self._step(n, Tick())
                    lines += self.run("stabilize", ["verbose"])[: -len(self.nodes)]
                    out += [f"{self.now_ms}ms {line}" for line in lines if verbose or not _chatter(line)]
                out += self._state()
            case "deliver" | "drop":
                src = int(kv["from"]) if "from" in kv else None
                dst = int(kv["to"]) if "to" in kv else None
                chosen = [
                    (s, m)
                    for s, m in self.queue
                    if (src is None or s == src) and (dst is None or m.destination == dst)
                ]
                self.queue = [q for q in self.queue if q not in chosen]
                if command == "deliver":
                    for s, m in chosen:
                        out += self._deliver(s, m)
            case "stabilize":
                for _ in range(1000):
                    if not self.queue:
                        break
                    chosen, self.queue = self.queue, []
                    for s, m in chosen:
                        lines = self._deliver(s, m)
                        out += lines if "verbose" in positional else []
                else:
                    raise AssertionError("no quiescence after 1000 rounds")
                out += self._state()
            case "propose":
                n = int(positional[0])
                payloads = [p.encode() for p in positional[1:]]
                result, actions = self._core(n).propose(payloads, self.now_ms)
                out.append(f"n{n}: {self._result(result)}")
                out += self._execute(n, actions)
            case "vote" | "prevote":
                # vote <from> <to> epoch=E last=O@L: deliver a VoteRequest as if <from> had sent it.
                src, dst = int(positional[0]), int(positional[1])
                offset, last_epoch = (int(x) for x in kv["last"].split("@"))
                req = VoteRequest(src, int(kv["epoch"]), last_epoch, offset, pre_vote=command == "prevote")
                out += self._step(dst, Received(src, req, correlation_id=-1))
                self.queue = [(s, m) for s, m in self.queue if m.correlation_id != -1]
            case "resign":
                out += self._step(int(positional[0]), Resign())
            case "snapshot":
                n, end = int(positional[0]), int(positional[1])
                out += self._step(n, TakeSnapshot(end, f"image@{end}".encode()))
            case "crash":
                self.nodes[int(positional[0])] = None
                self.queue = [(s, m) for s, m in self.queue if s != int(positional[0])]
            case "restart":
                self._start(int(positional[0]))
                out += self._state()
            case "isolate":
                self.isolated.add(int(positional[0]))
            case "cut":
                self.cuts.add(frozenset(int(p) for p in positional))
            case "heal":
                self.isolated.clear()
                self.cuts.clear()
            case "state":
                out += self._state()
            case "describe":
                d = self._core(int(positional[0])).describe_quorum()
                head = f"leader={_leader(d.leader_id)} epoch={d.leader_epoch} hw={d.high_watermark}"
                out.append(head + _error(d.error_code))
                for kind, replicas in (("voter", d.current_voters), ("observer", d.observers)):
                    out += [
                        f"  {kind} {r.replica_id}: log_end={r.log_end_offset} last_fetch={r.last_fetch_timestamp} "
                        f"caught_up={r.last_caught_up_timestamp}"
                        for r in replicas
                    ]
            case _:
                raise AssertionError(f"unknown command {command}")
        return out

    @staticmethod
    def _result(result: object) -> str:
        if isinstance(result, Appended):
            return f"appended {result.base_offset}..{result.last_offset} epoch={result.epoch}"
        return repr(result)

    def _start(self, n: int) -> None:
        assert self.config is not None
        d = self.disks[n]
        self.nodes[n] = RaftCore(
            n,
            self.config,
            random.Random(n),
            self.now_ms,
            quorum_state=d.quorum,
            snapshot=d.snapshot,
            entries=list(d.entries),
        )

    def _core(self, n: int) -> RaftCore:
        core = self.nodes[n]
        assert core is not None, f"n{n} is down"
        return core

    def _deliver(self, source: int, send: Send) -> list[str]:
        dest = send.destination
        cut = frozenset((source, dest)) in self.cuts
        if cut or source in self.isolated or dest in self.isolated or self.nodes.get(dest) is None:
            return [f"(dropped n{source} -> n{dest}: {format_message(send.message)})"]
        return self._step(dest, Received(source, send.message, send.correlation_id))

    def _step(self, n: int, event: Input) -> list[str]:
        return self._execute(n, self._core(n).step(event, self.now_ms))

    def _execute(self, n: int, actions: list[Action]) -> list[str]:
        disk = self.disks[n]
        for a in actions:
            match a:
                case Send():
                    self.queue.append((n, a))
                case PersistQuorumState():
                    disk.quorum = a
                case AppendToLog():
                    disk.entries.extend(a.entries)
                case TruncateLog():
                    disk.entries = [e for e in disk.entries if e.offset < a.offset]
                case PersistSnapshot():
                    disk.snapshot = a.snapshot
                case AdvanceLogStartOffset():
                    disk.entries = [e for e in disk.entries if e.offset >= a.log_start_offset]
                case _:
                    pass
        return [format_action(n, a) for a in actions]

    def _state(self) -> list[str]:
        lines = []
        for n, core in sorted(self.nodes.items()):
            if core is None:
                lines.append(f"n{n}: down")
                continue
            s = core.state
            role = type(s).__name__
            leader = s.leader_id if isinstance(s, Follower) else core.leader_id
            start = f" start={core.log.log_start_offset}" if core.log.log_start_offset else ""
            lines.append(
                f"n{n}: {role} epoch={s.epoch} leader={leader or '-'} hw={core.high_watermark}{start} "
                f"log={_entries(list(core.log.entries))}"
            )
        return lines


def _parse(text: str) -> list[tuple[str, str, list[str]]]:
    """Blocks of (command line, comment lines before it, expected output lines)."""
    blocks: list[tuple[str, str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    comments: list[str] = []
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            comments.append(line)
            i += 1
            continue
        assert lines[i + 1] == "----", f"line {i + 2}: expected ---- after {line!r}"
        i += 2
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        blocks.append((line, "\n".join(comments).strip("\n"), expected))
        comments = []
    return blocks


def _render(blocks: list[tuple[str, str, list[str]]]) -> str:
    parts = []
    for command, comments, output in blocks:
        head = f"{comments}\n" if comments else ""
        parts.append(head + command + "\n----\n" + "".join(line + "\n" for line in output))
    return "\n".join(parts)


@pytest.mark.parametrize("path", sorted(TESTDATA.glob("*.txt")), ids=lambda p: p.stem)
def test_transcript(path: Path) -> None:
    blocks = _parse(path.read_text())
    harness = Harness()
    actual: list[tuple[str, str, list[str]]] = []
    for command, comments, expected in blocks:
        words = command.split()
        output = harness.run(words[0], words[1:])
        actual.append((command, comments, output))
        if not os.environ.get("SAMSA_REWRITE"):
            assert output == expected, (
                f"{path.name}: `{command}`\n--- expected\n" + "\n".join(expected) + "\n--- actual\n" + "\n".join(output)
            )
    if os.environ.get("SAMSA_REWRITE"):
        path.write_text(_render(actual))
