"""`samsa consume`: fetch from each partition's leader, print records by a template or as JSON lines, tell on
stderr when the end is reached; optionally start from and commit to a consumer group's offsets."""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from samsa.broker.cli.commands.client import RETRIABLE, Retry, RoutingClient
from samsa.broker.cli.commands.errors import CliError, KafkaError, check, guarded
from samsa.broker.cli.commands.membership import GroupMember
from samsa.broker.cli.commands.progress import Progress
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args
from samsa.kproto.records import ControlType, Record, decode_batches, decode_control_record

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20  # max.partition.fetch.bytes
FETCH_MAX_BYTES = 50 << 20  # fetch.max.bytes
MAX_DECOMPRESSED_BYTES = 64 << 20
OFFSET_FETCH_MAX_VERSION = 7  # v8 batches groups; one group is all a CLI asks about
OFFSET_HELP = "start|end|N|+N|-N|@TIMESTAMP"


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    kind: str  # "start", "end", "exact", "after_start", "before_end", "time", "group"
    value: int = 0


def parse_offset(text: str) -> OffsetSpec:
    """rpk's -o: start (oldest), end (newest), N, +N (N after the start), -N (N before the end), @TIMESTAMP
    (ms since the epoch, or an ISO 8601 date-time, UTC unless it says otherwise)."""
    t = text.strip()
    if t in ("start", "oldest", "earliest"):
        return OffsetSpec("start")
    if t in ("end", "newest", "latest"):
        return OffsetSpec("end")
    try:
        if t.startswith("@"):
            stamp = t[1:]
            if stamp.lstrip("-").isdigit():
                return OffsetSpec("time", int(stamp))
            when = datetime.datetime.fromisoformat(stamp)
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            return OffsetSpec("time", int(when.timestamp() * 1000))
        if t.startswith("+"):
            return OffsetSpec("after_start", int(t[1:]))
        if t.startswith("-"):
            return OffsetSpec("before_end", int(t[1:]))
        n = int(t)
        if n < 0:
            raise ValueError
        return OffsetSpec("exact", n)
    except ValueError:
        raise CliError(f"--offset {text!r} is not an offset: use {OFFSET_HELP} (e.g. -o start, -o -10, "
                       "-o @2026-12-01T08:00:00)") from None


# --- output ------------------------------------------------------------------------------------------------


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode(errors="replace")


def _json_field(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


class Formatter:
    """rpk's output template tokens: %t topic, %p partition, %o offset, %d timestamp (ms), %k key, %v value,
    %h headers (k=v,...), %T timestamp as ISO 8601, %% a percent sign; \\n and \\t as usual. Or json."""

    def __init__(self, template: str) -> None:
        self.json = template == "json"
        self.template = template.replace("\\n", "\n").replace("\\t", "\t")
        if not self.json and "%" not in self.template:
            raise CliError(f"--format {template!r} has no %-token: e.g. '%k %v\\n', or json")

    def __call__(self, topic: str, partition: int, rec: Record) -> str:
        if self.json:
            return json.dumps({"topic": topic, "partition": partition, "offset": rec.offset,
                               "timestamp": rec.timestamp_ms, "key": _json_field(rec.key),
                               "value": _json_field(rec.value),
                               "headers": {h.key: _json_field(h.value) for h in rec.headers}},
                              separators=(",", ":")) + "\n"
        out: list[str] = []
        i, t = 0, self.template
        while i < len(t):
            c = t[i]
            if c != "%" or i + 1 == len(t):
                out.append(c)
                i += 1
                continue
            token = t[i + 1]
            i += 2
            if token == "t":
                out.append(topic)
            elif token == "p":
                out.append(str(partition))
            elif token == "o":
                out.append(str(rec.offset))
            elif token == "d":
                out.append(str(rec.timestamp_ms))
            elif token == "T":
                out.append(datetime.datetime.fromtimestamp(rec.timestamp_ms / 1000, datetime.UTC)
                           .isoformat(timespec="milliseconds"))
            elif token == "k":
                out.append(_text(rec.key))
            elif token == "v":
                out.append(_text(rec.value))
            elif token == "h":
                out.append(",".join(f"{h.key}={_text(h.value)}" for h in rec.headers))
            elif token == "%":
                out.append("%")
            else:
                out.append("%" + token)
        return "".join(out)


# --- positions ---------------------------------------------------------------------------------------------


def list_offsets(client: RoutingClient, topic: str, partitions: list[int], timestamp: int,
                 isolation: int = READ_UNCOMMITTED) -> dict[int, int]:
    """ListOffsets, each partition asked of its leader."""
    out: dict[int, int] = {}

    def attempt() -> None:
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            if p not in out:
                by_leader.setdefault(client.leader(topic, p), []).append(p)
        for leader, parts in by_leader.items():
            r = client.request_node(leader, 2, {"replica_id": -1, "isolation_level": isolation, "timeout": 30000,
                                                "topics": [{"name": topic, "partitions": [
                                                    {"partition_index": p, "timestamp": timestamp,
                                                     "current_leader_epoch": -1} for p in parts]}]})
            for pr in r.topics[0].partitions:
                code = pr.error_code.value
                if code in RETRIABLE:
                    raise Retry(code, f"{topic}-{pr.partition_index}")
                check(code, f"ListOffsets {topic}-{pr.partition_index}")
                out[pr.partition_index] = pr.offset

    client.retrying(attempt, what=f"ListOffsets {topic}")
    return out


def group_offsets(client: RoutingClient, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    version = min(client.version(9), OFFSET_FETCH_MAX_VERSION)
    r = client.group_request(group, 9, {"group_id": group, "topics": [{"name": topic, "partition_indexes":
                                                                       partitions}], "require_stable": True},
                             error_of=lambda r: r.error_code.value, version=version)
    check(r.error_code, f"group {group!r}")
    return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions
            if t.name == topic and p.committed_offset >= 0}


def start_positions(client: RoutingClient, topic: str, partitions: list[int], spec: OffsetSpec,
                    group: str | None, isolation: int) -> dict[int, int]:
    start = list_offsets(client, topic, partitions, EARLIEST)
    end = list_offsets(client, topic, partitions, LATEST, isolation)
    committed = group_offsets(client, group, topic, partitions) if group else {}
    out: dict[int, int] = {}
    for p in partitions:
        if p in committed:  # a group's committed offset wins; the spec is for partitions without one
            out[p] = committed[p]
            continue
        kind = "start" if spec.kind == "group" else spec.kind
        if kind == "start":
            out[p] = start[p]
        elif kind == "end":
            out[p] = end[p]
        elif kind == "exact":
            out[p] = spec.value
        elif kind == "after_start":
            out[p] = start[p] + spec.value
        elif kind == "before_end":
            out[p] = end[p] - spec.value
        else:
            out[p] = -1
        if kind in ("after_start", "before_end"):  # rpk's relative offsets stop at the log's ends
            out[p] = max(start[p], min(out[p], end[p]))
    if spec.kind == "time":
        by_time = list_offsets(client, topic, partitions, spec.value)
        out.update({p: o if o >= 0 else end[p] for p, o in by_time.items() if p not in committed})
    return out


# --- fetching ----------------------------------------------------------------------------------------------


class PartitionState:
    def __init__(self, partition: int, position: int) -> None:
        self.partition = partition
        self.position = position
        self.end: int | None = None  # high watermark (last stable offset for read_committed) last seen
        self.aborted: list[tuple[int, int]] = []  # (first_offset, producer_id) still ahead
        self.aborting: set[int] = set()

    @property
    def at_end(self) -> bool:
        return self.end is not None and self.position >= self.end


def visible(state: PartitionState, header: Any, records: list[Record], isolation: int) -> list[Record]:
    """Records a read_committed consumer may see, as Kafka's Fetcher filters aborted transactions: a
    transactional batch of a producer whose aborted transaction has begun is skipped until its ABORT marker."""
    if header.is_control:
        if isolation == READ_COMMITTED and records:
            control = decode_control_record(records[0])
            if control.type == ControlType.ABORT:
                state.aborting.discard(header.producer_id)
        return []
    if isolation != READ_COMMITTED or not header.is_transactional:
        return records
    while state.aborted and state.aborted[0][0] <= header.last_offset:
        state.aborting.add(state.aborted.pop(0)[1])
    return [] if header.producer_id in state.aborting else records


class Consumer:
    def __init__(self, client: RoutingClient, topic: str, positions: dict[int, int], isolation: int) -> None:
        self.client = client
        self.topic = topic
        self.isolation = isolation
        self.states = {p: PartitionState(p, o) for p, o in positions.items()}
        self.topic_id = client.topic(topic).topic_id

    def poll(self, max_wait_ms: int) -> list[tuple[int, Record | None, int]]:
        """One Fetch per leader; the records in offset order per partition."""
        out: list[tuple[int, Record | None, int]] = []

        def attempt() -> None:
            by_leader: dict[int, list[int]] = {}
            for p in self.states:
                by_leader.setdefault(self.client.leader(self.topic, p), []).append(p)
            retry: Retry | None = None
            # only the last leader waits: each request holds the loop for up to max_wait_ms
            for i, (leader, parts) in enumerate(by_leader.items()):
                try:
                    out.extend(self._fetch(leader, parts, max_wait_ms if i == len(by_leader) - 1 else 0))
                except Retry as r:
                    retry = r
            if retry is not None:
                raise retry

        self.client.retrying(attempt, what=f"fetch from {self.topic}")
        return out

    def _fetch(self, leader: int, parts: list[int], max_wait_ms: int) -> list[tuple[int, Record | None, int]]:
        conn = self.client.node(leader)
        version = self.client.version(1, conn)
        partitions = [{"partition": p, "fetch_offset": self.states[p].position, "partition_max_bytes":
                       PARTITION_MAX_BYTES, "current_leader_epoch": -1, "log_start_offset": -1} for p in parts]
        topic = {"topic_id": self.topic_id, "partitions": partitions} if version >= 13 else {
            "topic": self.topic, "partitions": partitions}
        r = self.client.request(conn, 1, {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1,
                                          "max_bytes": FETCH_MAX_BYTES, "isolation_level": self.isolation,
                                          "session_id": 0, "session_epoch": -1, "topics": [topic],
                                          "forgotten_topics_data": (), "rack_id": ""}, version=version)
        if r.error_code.value != 0:
            check(r.error_code, f"fetch from broker {leader}")
        out: list[tuple[int, Record | None, int]] = []
        retry: int | None = None
        for t in r.responses:
            for pr in t.partitions:
                state = self.states[pr.partition_index]
                code = pr.error_code.value
                if code in RETRIABLE:
                    retry = code
                    continue
                if code == 1:
                    raise KafkaError(code, f"{self.topic}-{state.partition} offset {state.position}",
                                     f"the log holds {pr.log_start_offset} to {pr.high_watermark}; "
                                     "use -o start or -o end")
                check(code, f"{self.topic}-{state.partition}")
                state.end = pr.last_stable_offset if self.isolation == READ_COMMITTED and \
                    pr.last_stable_offset >= 0 else pr.high_watermark
                # Kafka's Fetcher: the aborted transactions are per response (they overlap its range)
                state.aborted = sorted((a.first_offset, a.producer_id) for a in pr.aborted_transactions or ())
                state.aborting = set()
                position = state.position
                for header, records in decode_batches(pr.records or b"", max_decompressed_bytes=
                                                      MAX_DECOMPRESSED_BYTES, allow_partial_tail=True):
                    for rec in visible(state, header, records, self.isolation):
                        if rec.offset >= position:
                            out.append((state.partition, rec, rec.offset + 1))
                    if header.next_offset > position:
                        position = header.next_offset
                        out.append((state.partition, None, position))
        if retry is not None:
            raise Retry(retry, f"{self.topic}")
        return out

    def at_end(self) -> bool:
        return all(s.at_end for s in self.states.values())


def _record_bytes(rec: Record) -> int:
    return len(rec.key or b"") + len(rec.value or b"") + sum(len(h.key) + len(h.value or b"") for h in rec.headers)


class Session:
    """What one consume run reads: its partitions (all, -p, or a group's assignment) and where it is in them."""

    def __init__(self, client: RoutingClient, args: argparse.Namespace, spec: OffsetSpec, isolation: int) -> None:
        self.client = client
        self.args = args
        self.spec = spec
        self.isolation = isolation
        self.info = client.topic(args.topic)  # never created: Metadata with allow_auto_topic_creation false
        self.member = GroupMember(client, args.group, args.topic) if args.group else None
        self.consumer = self._start(self._partitions())

    def _partitions(self) -> list[int]:
        if self.member is not None:
            return self.member.join()
        partitions = sorted(self.info.partitions) if not self.args.partition else sorted(set(self.args.partition))
        for p in partitions:
            if p not in self.info.partitions:
                raise CliError(f"--partition {p}: topic {self.args.topic!r} has partitions "
                               f"0-{len(self.info.partitions) - 1}")
        return partitions

    def _start(self, partitions: list[int]) -> Consumer:
        positions = start_positions(self.client, self.args.topic, partitions, self.spec, self.args.group,
                                    self.isolation) if partitions else {}
        self.committed = dict(positions)
        return Consumer(self.client, self.args.topic, positions, self.isolation)

    def positions(self) -> dict[int, int]:
        return {p: s.position for p, s in self.consumer.states.items()}

    def maybe_commit(self) -> None:
        if self.member is not None and self.positions() != self.committed:
            if self.member.commit(self.positions()):
                self.committed = self.positions()

    def maybe_rebalance(self) -> bool:
        """Heartbeat; on a rebalance commit what was read, rejoin and start the new assignment. True if it did."""
        if self.member is None or not self.member.maybe_heartbeat():
            return False
        self.maybe_commit()
        self.consumer = self._start(self.member.join())
        return True

    def close(self) -> None:
        if self.member is not None:
            self.maybe_commit()
            self.member.leave()


@guarded
def cmd_consume(args: argparse.Namespace) -> int:
    if args.group and args.partition:
        raise CliError("--partition and --group: a group member reads the partitions the group assigns it; "
                       "drop one of them")
    spec = parse_offset(args.offset) if args.offset is not None else OffsetSpec("group" if args.group else "start")
    isolation = READ_COMMITTED if args.isolation == "read_committed" else READ_UNCOMMITTED
    formatter = Formatter("%k\\t%v\\n" if args.print_key and args.format is None else args.format or "%v\\n")
    started = time.monotonic()
    progress = Progress("consumed")
    with RoutingClient(settings_from_args(args)) as client:
        session = Session(client, args, spec, isolation)
        seen = size = 0
        told_end = False
        deadline = None if args.timeout_ms is None else time.monotonic() + args.timeout_ms / 1000
        write = sys.stdout.write
        finished = False
        try:
            while args.max_messages is None or seen < args.max_messages:
                if session.maybe_rebalance():
                    told_end = False
                consumer = session.consumer
                if not consumer.states:
                    time.sleep(MAX_WAIT_MS / 1000)  # a member the group assigned nothing
                for partition, rec, next_position in consumer.poll(MAX_WAIT_MS) if consumer.states else ():
                    state = consumer.states[partition]
                    state.position = max(state.position, next_position)
                    if rec is None:
                        continue
                    write(formatter(args.topic, partition, rec))
                    seen += 1
                    size += _record_bytes(rec)
                    if args.max_messages is not None and seen >= args.max_messages:
                        break
                sys.stdout.flush()
                progress.maybe_show(seen, size)
                session.maybe_commit()
                if consumer.at_end() and not told_end:
                    ends = ", ".join(f"{p}:{s.position}" for p, s in sorted(consumer.states.items())) or "none assigned"
                    if not args.follow:
                        print(f"reached the end of {args.topic} (partition:offset {ends})", file=sys.stderr)
                        break
                    print(f"at the end of {args.topic} (partition:offset {ends}); following, Ctrl-C to stop",
                          file=sys.stderr)
                    told_end = True
                if deadline is not None and time.monotonic() > deadline:
                    print(f"stopped after --timeout-ms {args.timeout_ms}", file=sys.stderr)
                    break
            finished = True
        except KeyboardInterrupt:
            finished = True
            client.close()  # a request may have been cut mid-answer: leave and commit on fresh connections
        finally:
            try:
                session.close()
            except CliError:
                if finished:
                    raise  # else the error that stopped the loop is the one to tell
        progress.summary(seen, size, time.monotonic() - started, f"from {args.topic}")
    return 0


def add_commands(sub: Any, one_line: Any) -> None:
    p = one_line(sub.add_parser("consume", help="print a topic's records (never creates the topic)"))
    p.add_argument("topic")
    p.add_argument("--partition", "-p", type=int, action="append", help="only this partition (repeatable)")
    p.add_argument("--offset", "-o", default=None, metavar=OFFSET_HELP,
                   help="where to start: start (default), end, N, +N after the start, -N before the end, "
                        "@TIMESTAMP (ms or ISO 8601); with -g, only where the group has no committed offset")
    p.add_argument("--group", "-g", help="join this consumer group: read the partitions it assigns, from its "
                   "committed offsets, and commit as it goes")
    p.add_argument("--follow", "-f", action="store_true", help="keep waiting for new records at the end")
    p.add_argument("--isolation", choices=["read_uncommitted", "read_committed"], default="read_uncommitted")
    p.add_argument("--format", default=None,
                   help="json, or a template: %%t topic, %%p partition, %%o offset, %%d timestamp ms, "
                        "%%T ISO time, %%k key, %%v value, %%h headers (default '%%v\\n')")
    p.add_argument("--max-messages", "-n", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, default=None, help="stop after this long, at the end or not")
    p.add_argument("--print-key", action="store_true", help="the same as --format '%%k\\t%%v\\n'")
    add_connection_options(p)
    p.set_defaults(func=cmd_consume)
