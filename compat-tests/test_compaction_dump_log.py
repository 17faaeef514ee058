"""Kafka's kafka-dump-log (the reference's DumpLogSegments) reads the segments Samsa's log cleaner wrote (issue 16).

A Samsa broker of its own (log.cleaner.backoff.ms=200, so that its cleaner wakes at once) gets the writes of
the differential compaction scenarios (differential/compaction.py: updates, tombstones kept then removed
after delete.retention.ms, committed and aborted transactions), each waited on until cleaned. Then the tool
reads every segment file of both topics with --print-data-log --deep-iteration: every batch valid, offsets
in order, and the records it prints -- offset, key, value, transaction markers -- exactly the records Samsa
serves to a fetch from offset 0. A batch holding a tombstone that a cleaning kept carries its delete horizon
(KIP-534) in Kafka's own encoding, so the tool prints it. The cleaned segments' offset and time indexes pass
the tool's checks too.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from differential import compaction
from differential.framework import Ctx, context
from oracle_fixture import QUICK_JVM_OPTS, run_kafka_tool
from samsa_fixture import SamsaProcess, start_samsa

from samsa.kproto.records import decode_batches

pytestmark = pytest.mark.samsa

DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*? isControl: (true|false) "
                   r"deleteHorizonMs: (\S+) position: (\d+) .*? isvalid: (true|false)$")
RECORD = re.compile(r"^\| offset: (\d+) CreateTime: \d+ keySize: (-?\d+) valueSize: (-?\d+) sequence: -?\d+ "
                    r"headerKeys: \[.*?\](?: key: (.*?))?(?: payload: (.*?))?(?: endTxnMarker: (\w+) .*)?$")

Served = tuple[int, str | None, str | None]  # offset, key (or the marker's kind), value


@pytest.fixture(scope="module")
def samsa() -> Iterator[SamsaProcess]:
    proc = start_samsa(extra_args=("--override", "log.cleaner.backoff.ms=200"))
    try:
        yield proc
    finally:
        proc.stop()


def _served(ctx: Ctx, topic: str) -> list[Served]:
    """Every record a fetch from offset 0 returns, markers as ("COMMIT"/"ABORT", None)."""
    c = ctx.connect()
    out: list[Served] = []
    offset = 0
    while True:
        p = ctx.fetch(c, topic, 0, offset)
        assert p.error_code.value == 0
        for h, recs in decode_batches(p.records or b"", max_decompressed_bytes=1 << 26):
            offset = max(offset, h.base_offset + h.last_offset_delta + 1)
            for r in recs:
                if h.attributes & 0x20:  # control record key: version int16, type int16 (0 abort, 1 commit)
                    out.append((r.offset, "ABORT" if (r.key or b"")[2:4] == b"\x00\x00" else "COMMIT", None))
                else:
                    out.append((r.offset, None if r.key is None else r.key.decode(),
                                None if r.value is None else r.value.decode()))
        if offset >= p.high_watermark:
            return out


def _dump(files: list[Path], *args: str) -> str:
    r = run_kafka_tool(DUMP_LOG, "--files", ",".join(map(str, files)), *args, jvm_opts=QUICK_JVM_OPTS,
                       timeout=120, check=False)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert "Exception" not in r.stderr and "Exception" not in r.stdout, r.stderr[-3000:]
    return r.stdout


def test_kafka_dump_log_reads_cleaned_segments(samsa: SamsaProcess) -> None:
    topics = []
    for name in ("compaction_latest_values_and_tombstones", "compaction_aborted_transactions"):
        with context("samsa", samsa.bootstrap, f"dump-{name}", int(time.time() * 1000)) as ctx:
            getattr(compaction, name)(ctx)  # returns once the cleaner has cleaned the topic
            topics.append(ctx.topic())
    with context("samsa", samsa.bootstrap, "dump", int(time.time() * 1000)) as ctx:
        for topic in topics:
            logs = sorted((samsa.data_dir / f"{topic}-0").glob("*.log"))
            assert len(logs) >= 2, logs  # cleaned segments and the active one
            out = _dump(logs, "--print-data-log", "--deep-iteration")
            dumped: list[Served] = []
            horizons: list[str] = []
            for line in out.splitlines():
                if line.startswith("baseOffset:"):
                    b = BATCH.match(line)
                    assert b and b.group(7) == "true", line
                    horizons.append(b.group(5))
                elif line.startswith("| offset:"):
                    m = RECORD.match(line)
                    assert m, line
                    if m.group(6):
                        dumped.append((int(m.group(1)), m.group(6), None))
                    else:
                        assert int(m.group(3)) == -1 or m.group(5) is not None, line
                        dumped.append((int(m.group(1)), m.group(4), None if int(m.group(3)) == -1 else m.group(5)))
                        if int(m.group(3)) == -1:
                            # a kept tombstone's batch was stamped by the cleaning that kept it (KIP-534)
                            assert horizons[-1].startswith("OptionalLong["), (topic, line, horizons[-1])
            served = _served(ctx, topic)
            assert dumped == served, (topic, out[-3000:])
            assert [o for o, _, _ in dumped] == sorted({o for o, _, _ in dumped})
            # the cleaned segments' offset and time indexes, checked by the tool against the log
            cleaned = logs[:-1]
            idx = _dump([p.with_suffix(s) for p in cleaned for s in (".index", ".timeindex")])
            assert "mismatch" not in idx.lower() and "not found" not in idx, idx[-3000:]
            sanity = _dump([p.with_suffix(".index") for p in cleaned], "--index-sanity-check")
            # (an index with no entry -- a segment under index.interval.bytes -- is "empty", as on Kafka)
            assert sanity.count("passed sanity check") + sanity.count("is empty.") == len(cleaned), sanity
