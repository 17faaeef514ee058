"""`samsa produce`: stdin, line by line, into batches per partition (batch.size / linger.ms), each sent to
its partition's leader as it fills or lingers; never reads all of stdin first."""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import queue
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from samsa.broker.cli.commands.client import RETRIABLE, Retry, RoutingClient
from samsa.broker.cli.commands.errors import CliError, KafkaError, guarded
from samsa.broker.cli.commands.progress import Progress
from samsa.broker.cli.commands.settings import add_connection_options, settings_from_args
from samsa.kproto.records import Header, Record, encode_batch

BATCH_SIZE_BYTES = 16384  # Kafka's batch.size
LINGER_MS = 5  # Kafka's linger.ms (4.0 default)
MAX_QUEUED_LINES = 10000  # stdin read ahead of the sender, at most
COMPRESSION = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_EOF = object()


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (Utils.murmur2), so keys land where the Java client puts them."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail >= 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass(slots=True)
class InputRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int | None = None
    partition: int | None = None


# --- parsing input lines ---------------------------------------------------------------------------------

_TEMPLATE_FIELDS = {"%k": r"(?P<key>.*?)", "%v": r"(?P<value>.*)", "%t": r"(?P<topic>.*?)",
                    "%p": r"(?P<partition>\d+)", "%d": r"(?P<timestamp>-?\d+)"}
_TEMPLATE_TOKENS = re.compile(r"(%H\{\d+\}|%H|%h\{[^}]*\}|%h|%[kvtpd])")
# A line's regex spells out one copy of the %h{...} format per header; past this many, a line is refused.
MAX_TEMPLATE_HEADERS = 1000


def _unescape(template: str) -> str:
    return template.replace("\\t", "\t").replace("\\n", "\n")


def _one_header(spec: str, index: int | None) -> str:
    """The regex of one header of %h{spec}: its %k and %v as groups hk<index> / hv<index> (index None: not
    captured). Both end at their first possible delimiter, as rpk's reader reads up to the next literal."""
    out = []
    for piece in re.split(r"(%[kv])", spec):
        if piece in ("%k", "%v"):
            out.append(".*?" if index is None else f"(?P<h{piece[1]}{index}>.*?)")
        else:
            out.append(re.escape(piece))
    return "".join(out)


def _template_parts(template: str) -> list[str]:
    parts = _TEMPLATE_TOKENS.split(_unescape(template).rstrip("\n"))
    if "%v" not in parts:
        raise CliError(f"--format {template!r} has no %v: a template needs the value, e.g. '%k=%v'")
    counts = [i for i, p in enumerate(parts) if p.startswith("%H")]
    specs = [i for i, p in enumerate(parts) if p.startswith("%h")]
    example = "e.g. '%H %h{%k=%v,}%v' reads '2 a=1,b=2,value' (rpk's syntax)"
    if len(counts) > 1 or len(specs) > 1:
        raise CliError(f"--format {template!r}: %H and %h may appear once each; {example}")
    if specs and parts[specs[0]] == "%h":
        raise CliError(f"--format {template!r}: %h needs the format of one header in braces, %h{{%k=%v,}}; {example}")
    if specs and not (counts and counts[0] < specs[0]):
        raise CliError(f"--format {template!r}: %h needs the number of headers before it, %H (read from the "
                       f"line) or %H{{N}} (always N); {example}")
    if counts and not specs:
        raise CliError(f"--format {template!r}: %H counts the headers of a %h{{...}} that follows it; {example}")
    if specs:
        spec = parts[specs[0]][3:-1]
        unknown = sorted(set(re.findall(r"%.", spec)) - {"%k", "%v"})
        if unknown or "%k" not in spec or "%v" not in spec:
            raise CliError(f"--format {template!r}: a header's format %h{{...}} holds %k (its key) and %v (its "
                           f"value) and literal text{', not ' + ' '.join(unknown) if unknown else ''}; {example}")
    return parts


@functools.lru_cache(maxsize=64)
def template_pattern(template: str, headers: int | None = None) -> re.Pattern[str]:
    """rpk's input template: %k key, %v value, %p partition, %d timestamp (ms), %H the number of headers
    (%H{N}: always N) and %h{...} the headers, each in the format between the braces (%k its key, %v its
    value); the rest is literal. With %H and `headers` None, the headers are matched but not captured (the
    pass that reads the count); with `headers` given (or %H{N}), each header is captured (hk0, hv0, ...)."""
    parts = _template_parts(template)
    regex = []
    for p in parts:
        if p == "%H":
            regex.append(r"(?P<header_count>\d+)" if headers is None else f"(?P<header_count>0*{headers})")
        elif p.startswith("%H{"):
            headers = int(p[3:-1])  # %H{N} reads nothing: the count is the template's
            if headers > MAX_TEMPLATE_HEADERS:
                raise CliError(f"--format {template!r}: at most {MAX_TEMPLATE_HEADERS} headers a record")
        elif p.startswith("%h{"):
            spec = p[3:-1]
            regex.append(f"(?:{_one_header(spec, None)})*" if headers is None
                         else "".join(_one_header(spec, i) for i in range(headers)))
        else:
            regex.append(_TEMPLATE_FIELDS.get(p, re.escape(p)))
    return re.compile("".join(regex) + r"\Z", re.DOTALL)


def match_template(template: str, text: str, number: int) -> tuple[dict[str, str], tuple[Header, ...]]:
    """The fields of one input line read with `template`, and its headers (%H / %h)."""
    m = template_pattern(template).match(text)
    if m is None:
        raise CliError(f"stdin line {number} does not match --format {template!r}")
    fields = m.groupdict()
    if "header_count" in fields:  # %H: the count is on the line; read it again with that many headers
        count = int(fields["header_count"])
        if count > MAX_TEMPLATE_HEADERS:
            raise CliError(f"stdin line {number}: {count} headers; at most {MAX_TEMPLATE_HEADERS} a record")
        m = template_pattern(template, count).match(text)
        if m is None:
            raise CliError(f"stdin line {number} does not match --format {template!r} with the {count} "
                           "header(s) its %H says")
        fields = m.groupdict()
    headers = []
    for i in range(sum(1 for name in fields if name.startswith("hk"))):
        key = fields[f"hk{i}"]
        try:
            key.encode()
        except UnicodeEncodeError:
            raise CliError(f"stdin line {number}: header key {i + 1} is not UTF-8 (Kafka's header keys are "
                           "strings)") from None
        headers.append(Header(key, fields[f"hv{i}"].encode(errors="surrogateescape")))
    return fields, tuple(headers)


def _json_bytes(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and set(value) == {"base64"}:
        return base64.b64decode(value["base64"])
    return json.dumps(value, separators=(",", ":")).encode()  # an object or number: its JSON text


def parse_json_line(line: bytes, number: int) -> InputRecord:
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise CliError(f"stdin line {number}: not JSON ({e}); --format json takes one object per line like "
                       '{"key": "k", "value": "v", "headers": {"h": "x"}, "timestamp": 0}') from None
    if not isinstance(obj, dict):
        raise CliError(f"stdin line {number}: a JSON {type(obj).__name__}, expected an object with \"value\"")
    unknown = set(obj) - {"key", "value", "headers", "timestamp", "partition", "topic", "offset"}
    if unknown:
        raise CliError(f"stdin line {number}: unknown field(s) {', '.join(sorted(unknown))}; "
                       "use key, value, headers, timestamp, partition")
    raw_headers = obj.get("headers") or {}
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    try:
        headers = tuple(Header(str(k), _json_bytes(v, "header")) for k, v in pairs)
    except (TypeError, ValueError):
        raise CliError(f"stdin line {number}: headers must be an object or a list of [key, value]") from None
    ts = obj.get("timestamp")
    if ts is not None and not isinstance(ts, int):
        raise CliError(f"stdin line {number}: timestamp must be milliseconds since the epoch (an integer)")
    partition = obj.get("partition")
    if partition is not None and not isinstance(partition, int):
        raise CliError(f"stdin line {number}: partition must be an integer")
    return InputRecord(_json_bytes(obj.get("key"), "key"), _json_bytes(obj.get("value"), "value"), headers, ts,
                       partition)


class LineParser:
    def __init__(self, args: argparse.Namespace) -> None:
        self.format = args.format
        self.pattern = template_pattern(args.format) if args.format not in ("text", "json") else None
        self.separator = args.key_separator.encode() if args.key_separator else None
        self.headers = tuple(Header(k, v.encode()) for k, v in _header_options(args.header))
        self.null_value = args.tombstone

    def parse(self, line: bytes, number: int) -> InputRecord:
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if self.format == "json":
            rec = parse_json_line(line, number)
        elif self.pattern is not None:
            g, headers = match_template(self.format, line.decode(errors="surrogateescape"), number)
            rec = InputRecord(g["key"].encode(errors="surrogateescape") if "key" in g else None,
                              g["value"].encode(errors="surrogateescape"), headers,
                              timestamp_ms=int(g["timestamp"]) if g.get("timestamp") else None,
                              partition=int(g["partition"]) if g.get("partition") else None)
        elif self.separator is not None and self.separator in line:
            key, _, value = line.partition(self.separator)
            rec = InputRecord(key, value)
        else:
            rec = InputRecord(None, line)
        if self.null_value and rec.value == b"":
            rec.value = None
        if self.headers:
            rec.headers = rec.headers + self.headers
        return rec


def _header_options(items: list[str] | None) -> list[tuple[str, str]]:
    out = []
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise CliError(f"-H {item!r}: a header is KEY=VALUE (e.g. -H trace-id=42)")
        out.append((k, v))
    return out


# --- batching and sending --------------------------------------------------------------------------------


@dataclass(slots=True)
class Pending:
    records: list[InputRecord] = field(default_factory=list)
    size_bytes: int = 0  # keys, values and headers, plus a record's overhead (what batch.size is held against)
    payload_bytes: int = 0  # keys, values and headers (what the summary reports, as consume's does)
    first_ms: float = 0.0  # time.monotonic() (seconds) when the first record came


class Producer:
    def __init__(self, client: RoutingClient, topic: str, args: argparse.Namespace) -> None:
        self.client = client
        self.topic = topic
        self.acks = ACKS[args.acks]
        self.compression = COMPRESSION[args.compression]
        self.batch_size = args.batch_size
        self.linger_s: float = args.linger_ms / 1000
        self.fixed_partition = args.partition
        self.pending: dict[int, Pending] = {}
        self.partitions = len(client.topic(topic).partitions)
        if self.fixed_partition is not None and not 0 <= self.fixed_partition < self.partitions:
            raise CliError(f"--partition {self.fixed_partition}: topic {topic!r} has partitions "
                           f"0-{self.partitions - 1}")
        self.sticky = 0  # KIP-480's sticky partitioner for records without a key: one partition per batch
        self.records = 0
        self.bytes = 0

    def add(self, rec: InputRecord) -> None:
        if rec.partition is not None:
            p = rec.partition
            if not 0 <= p < self.partitions:
                raise CliError(f"partition {p}: topic {self.topic!r} has partitions 0-{self.partitions - 1}")
        elif self.fixed_partition is not None:
            p = self.fixed_partition
        elif rec.key is not None:
            p = partition_for_key(rec.key, self.partitions)
        else:
            p = self.sticky
        batch = self.pending.get(p)
        if batch is None:
            batch = self.pending[p] = Pending(first_ms=time.monotonic())
        batch.records.append(rec)
        size = len(rec.key or b"") + len(rec.value or b"") + sum(len(h.key) + len(h.value or b"") for h in rec.headers)
        batch.size_bytes += size + 8
        batch.payload_bytes += size
        if batch.size_bytes >= self.batch_size:
            self.flush([p])

    def next_deadline(self) -> float | None:
        if not self.pending:
            return None
        first: float = min(b.first_ms for b in self.pending.values())
        return first + self.linger_s

    def maybe_flush_lingered(self) -> None:
        now = time.monotonic()
        due = [p for p, b in self.pending.items() if b.first_ms + self.linger_s <= now]
        if due:
            self.flush(due)

    def flush(self, partitions: list[int] | None = None) -> None:
        chosen = {p: self.pending.pop(p) for p in (partitions or list(self.pending)) if p in self.pending}
        if not chosen:
            return
        if self.sticky in chosen and self.partitions > 1:
            self.sticky = (self.sticky + 1) % self.partitions
        encoded = {p: self._encode(b.records) for p, b in chosen.items()}
        remaining = dict(encoded)

        def attempt() -> None:
            by_leader: dict[int, list[int]] = {}
            for p in remaining:
                by_leader.setdefault(self.client.leader(self.topic, p), []).append(p)
            retry: Retry | None = None
            for leader, parts in by_leader.items():
                try:
                    self._send(leader, parts, remaining)
                except Retry as r:
                    retry = r
            if retry is not None:
                raise retry

        self.client.retrying(attempt, what=f"produce to {self.topic}")
        for b in chosen.values():
            self.records += len(b.records)
            self.bytes += b.payload_bytes

    def _encode(self, records: list[InputRecord]) -> bytes:
        now = int(time.time() * 1000)
        items = [Record(offset=i, timestamp_ms=now if r.timestamp_ms is None else r.timestamp_ms, key=r.key,
                        value=r.value, headers=r.headers) for i, r in enumerate(records)]
        return encode_batch(items, timestamp_ms=items[0].timestamp_ms, compression=self.compression)

    def _send(self, leader: int, parts: list[int], remaining: dict[int, bytes]) -> None:
        values = {"transactional_id": None, "acks": self.acks, "timeout": 30000, "topic_data": [
            {"name": self.topic, "partition_data": [{"index": p, "records": remaining[p]} for p in parts]}]}
        conn = self.client.node(leader)
        if self.acks == 0:
            try:
                conn.request(0, values, expect_response=False)
            except OSError:
                self.client.drop(leader)
                raise Retry(13, f"broker {leader}") from None
            for p in parts:
                remaining.pop(p)
            return
        r = self.client.request(conn, 0, values)
        retry: int | None = None
        for topic in r.responses:
            for pr in topic.partition_responses:
                code = pr.error_code.value
                if code == 0:
                    remaining.pop(pr.index, None)
                elif code in RETRIABLE:
                    retry = code
                else:
                    raise KafkaError(code, f"{self.topic}-{pr.index}", getattr(pr, "error_message", None)
                                     ) from None
        if retry is not None:
            raise Retry(retry, f"{self.topic}-{parts[0]}")


READ_CHUNK_BYTES = 1 << 16
MAX_LINE_BYTES = 64 << 20  # one input line (one record) at most; a broker refuses far less (message.max.bytes)
_TOO_LONG = object()


def _reader(fd: int, lines: queue.Queue[Any]) -> None:
    """Lines of `fd` into `lines`. os.read, not sys.stdin's buffered reader: a daemon thread blocked in that one
    holds its lock, and the interpreter aborts at exit (Ctrl-C on an open pipe) when it cannot take it."""
    pending: list[bytes] = []  # the pieces of a line not yet ended
    pending_bytes = 0
    try:
        while chunk := os.read(fd, READ_CHUNK_BYTES):
            *complete, rest = chunk.split(b"\n")
            for piece in complete:
                lines.put(b"".join([*pending, piece, b"\n"]))
                pending, pending_bytes = [], 0
            if rest:
                pending.append(rest)
                pending_bytes += len(rest)
                if pending_bytes > MAX_LINE_BYTES:
                    lines.put(_TOO_LONG)
                    return
        if pending:
            lines.put(b"".join(pending))
    finally:
        lines.put(_EOF)


@guarded
def cmd_produce(args: argparse.Namespace) -> int:
    if args.acks not in ACKS:
        raise CliError(f"--acks {args.acks!r}: use all (or -1), 1 or 0")
    parser = LineParser(args)
    started = time.monotonic()
    with RoutingClient(settings_from_args(args)) as client:
        producer = Producer(client, args.topic, args)
        lines: queue.Queue[Any] = queue.Queue(MAX_QUEUED_LINES)
        threading.Thread(target=_reader, args=(sys.stdin.fileno(), lines), daemon=True).start()
        progress = Progress("produced")
        number = 0
        try:
            while True:
                deadline = producer.next_deadline()
                try:
                    line = lines.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    producer.maybe_flush_lingered()
                    progress.maybe_show(producer.records, producer.bytes)
                    continue
                if line is _EOF:
                    break
                if line is _TOO_LONG:
                    raise CliError(f"stdin line {number + 1} is longer than {MAX_LINE_BYTES >> 20} MiB: one line is "
                                   "one record; is this the right input?")
                number += 1
                producer.add(parser.parse(line, number))
                producer.maybe_flush_lingered()
                progress.maybe_show(producer.records, producer.bytes)
            producer.flush()
        except KeyboardInterrupt:
            # Ctrl-C ends an interactive session, as kafka-console-producer's close(): send what was read (on
            # fresh connections: a request may have been cut mid-answer; that batch is not sent again)
            client.close()
            try:
                producer.flush()
            except CliError as e:
                raise CliError(f"{e} ({producer.records} record(s) were written before this)") from None
        except CliError as e:
            raise CliError(f"{e} ({producer.records} record(s) were written before this)") from None
        progress.summary(producer.records, producer.bytes, time.monotonic() - started, f"to {args.topic}")
    return 0


def add_commands(sub: Any, one_line: Any) -> None:
    p = one_line(sub.add_parser("produce", help="produce stdin, one record per line, to a topic"))
    p.add_argument("topic")
    p.add_argument("--partition", "-p", type=int, help="all records to this partition (default: by key, "
                   "else sticky per batch)")
    p.add_argument("--key-separator", "-k", help="split each line into key and value at this string")
    p.add_argument("--header", "-H", action="append", metavar="KEY=VALUE", help="a header on every record")
    p.add_argument("--acks", default="all", help="all (-1, default), 1 or 0")
    p.add_argument("--compression", "-z", choices=sorted(COMPRESSION), default="none")
    p.add_argument("--format", "-f", default="text",
                   help="text (default: one value per line), json (one object per line: key, value, headers, "
                        "timestamp, partition) or a template such as '%%k=%%v' (%%k key, %%v value, "
                        "%%p partition, %%d timestamp ms, %%H number of headers and %%h{%%k=%%v,} the headers "
                        "in that format, as rpk: '%%H %%h{%%k=%%v,}%%v' reads '2 a=1,b=2,value')")
    p.add_argument("--tombstone", action="store_true", help="an empty value is sent as null (a tombstone)")
    p.add_argument("--batch-size", type=int, default=BATCH_SIZE_BYTES, help=f"batch.size (default {BATCH_SIZE_BYTES})")
    p.add_argument("--linger-ms", type=int, default=LINGER_MS, help=f"linger.ms (default {LINGER_MS})")
    add_connection_options(p)
    p.set_defaults(func=cmd_produce)
