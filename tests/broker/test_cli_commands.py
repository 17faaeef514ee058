"""The CLI's pure parts: addresses, offsets, input/output formats, read_committed filtering, Kafka error text,
and the routing client's retry loop (against a scripted fake, no broker)."""

from __future__ import annotations

import argparse
import io
import json
import re
from typing import Any

import pytest

from samsa.broker.cli.commands import client as routing
from samsa.broker.cli.commands.consume import Formatter, OffsetSpec, PartitionState, parse_offset, visible
from samsa.broker.cli.commands.errors import CliError, KafkaError, guarded, kafka_error_text
from samsa.broker.cli.commands.produce import LineParser, parse_json_line, partition_for_key, template_pattern
from samsa.broker.cli.commands.settings import Settings, parse_servers
from samsa.kproto.records import ControlType, Header, Record, decode_batches, encode_batch, encode_control_record


def test_servers_default_to_port_9092_and_refuse_what_is_not_host_port() -> None:
    assert parse_servers("localhost") == (("localhost", 9092),)
    assert parse_servers("a:1, b ,[::1]:3,[fe80::1]") == (("a", 1), ("b", 9092), ("::1", 3), ("fe80::1", 9092))
    for bad, said in [("h:x", "is not a number"), ("h:0", "out of range"), ("PLAINTEXT://h:1", "is not HOST:PORT"),
                      (" , ", "is empty"), (":9092", "is not HOST:PORT")]:
        with pytest.raises(CliError, match=said):
            parse_servers(bad)


def test_offsets_like_rpk() -> None:
    assert parse_offset("start") == parse_offset("earliest") == OffsetSpec("start")
    assert parse_offset("end") == OffsetSpec("end")
    assert parse_offset("42") == OffsetSpec("exact", 42)
    assert parse_offset("+3") == OffsetSpec("after_start", 3)
    assert parse_offset("-3") == OffsetSpec("before_end", 3)
    assert parse_offset("@1700000000000") == OffsetSpec("time", 1700000000000)
    assert parse_offset("@2023-11-14T22:13:20") == OffsetSpec("time", 1700000000000)
    assert parse_offset("@2023-11-14T23:13:20+01:00") == OffsetSpec("time", 1700000000000)
    for bad in ("beginning", "@tomorrow", "+x", "1.5", ""):
        with pytest.raises(CliError, match="is not an offset: use start"):
            parse_offset(bad)


def test_output_templates_and_json() -> None:
    rec = Record(offset=7, timestamp_ms=1700000000123, key=b"k", value=b"v\xff", headers=(Header("h", b"1"),
                                                                                          Header("n", None)))
    assert Formatter("%t|%p|%o|%d|%k|%v|%h|%%\\n")("t", 2, rec) == "t|2|7|1700000000123|k|v\ufffd|h=1,n=|%\n"
    assert Formatter("%T")("t", 0, rec) == "2023-11-14T22:13:20.123+00:00"
    assert json.loads(Formatter("json")("t", 2, rec)) == {
        "topic": "t", "partition": 2, "offset": 7, "timestamp": 1700000000123, "key": "k",
        "value": {"base64": "dv8="}, "headers": {"h": "1", "n": None}}
    with pytest.raises(CliError, match="has no %-token"):
        Formatter("plain")


def _args(**kw: Any) -> argparse.Namespace:
    base = {"format": "text", "key_separator": None, "header": None, "tombstone": False}
    return argparse.Namespace(**{**base, **kw})


def test_input_lines_text_separator_template_and_json() -> None:
    assert LineParser(_args()).parse(b"a:b\n", 1).value == b"a:b"
    rec = LineParser(_args(key_separator=":", header=["x=1"])).parse(b"a:b:c\r\n", 1)
    assert (rec.key, rec.value, rec.headers) == (b"a", b"b:c", (Header("x", b"1"),))
    rec = LineParser(_args(format="%k\\t%v %d")).parse(b"key\tsome value 99\n", 1)
    assert (rec.key, rec.value, rec.timestamp_ms) == (b"key", b"some value", 99)
    assert template_pattern("%p:%v").match("3:x") is not None
    with pytest.raises(CliError, match="does not match"):
        LineParser(_args(format="%k=%v")).parse(b"novalue\n", 4)
    rec = parse_json_line(b'{"key": null, "value": {"a": 1}, "headers": [["h", "x"]], "timestamp": 5}', 1)
    assert (rec.key, rec.value, rec.headers, rec.timestamp_ms) == (None, b'{"a":1}', (Header("h", b"x"),), 5)
    assert parse_json_line(b'{"value": {"base64": "AAE="}}', 1).value == b"\x00\x01"
    wrong = [(b"[1]", "a JSON list"), (b'{"valu": 1}', "unknown field"), (b'{"timestamp": "x"}', "milliseconds"),
             (b"{", "not JSON")]
    for bad, said in wrong:
        with pytest.raises(CliError, match=said):
            parse_json_line(bad, 3)
    assert LineParser(_args(tombstone=True)).parse(b"\n", 1).value is None


def test_input_template_headers_like_rpk() -> None:
    # rpk's syntax: %H the number of headers (%H{N}: always N), then %h{...} one header's format, %k its key
    # and %v its value, repeated that many times
    rec = LineParser(_args(format="%H %h{%k=%v,}%v", header=["x=9"])).parse(b"2 a=1,b=2,the value\n", 1)
    assert (rec.key, rec.value) == (None, b"the value")
    assert rec.headers == (Header("a", b"1"), Header("b", b"2"), Header("x", b"9"))  # -H ones come last
    # the count decides where the headers end, even when the value looks like one more
    rec = LineParser(_args(format="%H %h{%k=%v,}%v")).parse(b"1 a=1,b=2,\n", 1)
    assert (rec.headers, rec.value) == ((Header("a", b"1"),), b"b=2,")
    rec = LineParser(_args(format="%k %H %h{%k:%v;} %v")).parse(b"key 0  value\n", 1)
    assert (rec.key, rec.value, rec.headers) == (b"key", b"value", ())
    rec = LineParser(_args(format="%H{2}%h{ %k=%v }|%k|%v")).parse(b" a=  b=x=y |k|v\n", 1)
    assert (rec.key, rec.value, rec.headers) == (b"k", b"v", (Header("a", b""), Header("b", b"x=y")))
    with pytest.raises(CliError, match="with the 3 header"):
        LineParser(_args(format="%H %h{%k=%v,}%v")).parse(b"3 a=1,b=2,\n", 7)
    for bad, said in [("%h{%k=%v,}%v", "needs the number of headers before it"),
                      ("%H %h%v", "in braces"), ("%H %v", "counts the headers of a %h"),
                      ("%H %h{%k=%v %p,}%v", "not %p"), ("%H %h{%k,}%v", "holds %k"),
                      ("%H %h{%k=%v,} %H %h{%k=%v,}%v", "once each")]:
        with pytest.raises(CliError, match=re.escape(said)):
            template_pattern(bad)


def test_cluster_help_names_info_and_health(capsys: pytest.CaptureFixture[str]) -> None:
    from samsa.broker.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    listing = " ".join(capsys.readouterr().out.split())
    cluster = listing[listing.index("cluster info"):]  # the line of `cluster` in the list of commands
    assert "info, health" in cluster[:200] and "up, down" in cluster[:200]


def test_keys_land_where_the_java_client_puts_them() -> None:
    # Kafka's Utils.murmur2 test vectors (UtilsTest.testMurmur2) through the partitioner's toPositive % n
    assert partition_for_key(b"21", 997) == (-973932308 & 0x7FFFFFFF) % 997
    assert partition_for_key(b"foobar", 1000) == (-790332482 & 0x7FFFFFFF) % 1000


def _batches(data: bytes) -> list[tuple[Any, list[Record]]]:
    return list(decode_batches(data, max_decompressed_bytes=1 << 20))


def test_read_committed_skips_aborted_transactions_and_markers() -> None:
    aborted = encode_batch([(None, b"a", ())], base_offset=0, timestamp_ms=0, producer_id=7, producer_epoch=0,
                           base_sequence=0, is_transactional=True)
    key, value = encode_control_record(ControlType.ABORT, 0)
    marker = encode_batch([(key, value, ())], base_offset=1, timestamp_ms=0, producer_id=7, producer_epoch=0,
                          is_transactional=True, is_control=True)
    later = encode_batch([(None, b"c", ())], base_offset=2, timestamp_ms=0, producer_id=7, producer_epoch=0,
                         base_sequence=1, is_transactional=True)
    state = PartitionState(0, 0)
    state.aborted = [(0, 7)]
    seen = [r.value for h, recs in _batches(aborted + marker + later) for r in visible(state, h, recs, 1)]
    assert seen == [b"c"]  # aborted before its marker; committed after it
    state = PartitionState(0, 0)
    seen = [r.value for h, recs in _batches(aborted + marker + later) for r in visible(state, h, recs, 0)]
    assert seen == [b"a", b"c"]  # read_uncommitted sees both, never the marker


def test_kafka_errors_by_name_and_description() -> None:
    assert kafka_error_text(3) == ("UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition. "
                                   "Hint: check the name with `samsa topics list`, or create it with "
                                   "`samsa topics create NAME`.")
    assert kafka_error_text(6, "t-0").startswith("t-0: NOT_LEADER_OR_FOLLOWER: For requests intended only for the "
                                                 "leader, this error indicates that the broker is not the current")
    assert kafka_error_text(16, message="moved") == "NOT_COORDINATOR: This is not the correct coordinator. (moved)"
    assert kafka_error_text(100000).startswith("ERROR_100000: ")


def test_guard_turns_any_failure_into_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def boom(exc: BaseException) -> Any:
        def run(_: Any) -> int:
            raise exc
        return guarded(run)

    assert boom(KafkaError(36, "topic 'x'"))(None) == 1
    assert capsys.readouterr().err.startswith("error: topic 'x': TOPIC_ALREADY_EXISTS: ")
    assert boom(ZeroDivisionError("x"))(None) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected ZeroDivisionError: x (a bug in samsa" in err
    assert boom(KeyboardInterrupt())(None) == 130


class _FakeClient(routing.RoutingClient):
    """A RoutingClient whose metadata refreshes are counted and never touch the network."""

    def __init__(self, timeout_ms: int = 2000) -> None:
        super().__init__(Settings((("127.0.0.1", 1),), "test", timeout_ms))
        self.refreshes = 0

    def refresh(self, topics: Any = None) -> Any:
        self.refreshes += 1
        return None


def test_retrying_refreshes_metadata_and_backs_off_until_it_works(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(routing.time, "sleep", sleeps.append)
    client = _FakeClient()
    answers = iter([routing.Retry(6, "t-0"), routing.Retry(16, "g"), routing.Retry(14, "g"), "done"])

    def attempt() -> str:
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    assert client.retrying(attempt) == "done"
    assert sleeps == [0.1, 0.2, 0.4] and client.refreshes == 3


def test_retrying_gives_up_at_the_timeout_with_the_last_error_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(routing.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(routing.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    client = _FakeClient(timeout_ms=3000)

    def attempt() -> None:
        raise routing.Retry(5, "t-1")

    with pytest.raises(KafkaError, match=r"^t-1: LEADER_NOT_AVAILABLE: There is no leader for this topic-partition"
                                         r".*still failing after 3 s of retries") as e:
        client.retrying(attempt)
    assert e.value.code == 5 and 2.0 <= now[0] <= 3.0


def test_range_assignor_and_consumer_protocol_bytes() -> None:
    from samsa.broker.cli.commands.membership import assignment, range_assign, subscription
    from samsa.broker.group.consumer_protocol import assigned_partitions, subscribed_topics

    # Kafka's RangeAssignor: 3 partitions over 2 members: the first in member-id order gets one more
    got = range_assign({"b": {"t", "u"}, "a": {"t"}, "c": {"u"}}, {"t": 3, "u": 1, "v": 2})
    assert got == {"a": {"t": [0, 1]}, "b": {"t": [2], "u": [0]}, "c": {}}
    assert subscribed_topics(subscription(["t", "ü"])) == {"t", "ü"}
    assert assigned_partitions(assignment({"t": [0, 1], "u": [0]})) == [("t", [0, 1]), ("u", [0])]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from samsa.broker.cli.commands import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    for stream, expect_line in ((_Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(progress.sys, "stderr", stream)
        p = progress.Progress("produced")
        p.maybe_show(10, 1000)  # within the first second: nothing yet
        clock[0] += 1.5
        p.maybe_show(3000, 300_000)
        p.summary(3000, 300_000, 1.5, "to t")
        out = stream.getvalue()
        assert ("\rproduced 3000 records, 293.0 KB (2000 records/s)" in out) is expect_line
        assert "produced 10 records" not in out
        assert out.rstrip().endswith("produced 3000 records (293.0 KB) to t in 1.50 s: 2000 records/s, 195.3 KB/s")
