"""Malformed-batch corpus for the differential test (issue 15 part 1): the hand-made probes of
tests/fuzz/record_corpus.py and a seeded run of its record-level mutator, each produced to Kafka 4.1.2 and
to Samsa; the outcome is each case's error code (and record_errors indexes) and that nothing was written.

Not registered with ``@scenario`` (test_malformed_batches.py runs it), so scenarios.py's list is unchanged.
Where Kafka 4.1.2 answers differently by accident, the case's outcome is its category on both sides, not
the code (measured against 4.1.2; Samsa keeps the clearer answer):

* offset deltas not 0..n-1: Kafka stores an uncompressed batch as it came and rewrites a compressed one;
  Samsa refuses (INVALID_RECORD) -- left out of the corpus.
* a compressed batch whose record fields do not fill the record's declared length: Kafka ACCEPTS it (its
  in-place path reads records with DefaultRecord.readPartiallyFrom, which never compares the two), and a
  consumer then fails on it; Samsa refuses (INVALID_RECORD).
* a varint longer than 5 bytes as a record's length: Kafka UNKNOWN_SERVER_ERROR (the IllegalArgumentException
  of ByteUtils.readVarint is thrown outside DefaultRecord.readFrom's try); Samsa INVALID_RECORD.
* an undecodable compressed payload: Kafka UNKNOWN_SERVER_ERROR (KafkaException); Samsa CORRUPT_MESSAGE.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from differential.framework import Ctx, err
from samsa.kproto.batch import CorruptBatchError
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import decode_batch_records
from samsa.storage.validator import LogValidatorConfig, ValidationFailure, validate_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "fuzz"))
import record_corpus

FUZZ_CASES = 300
FUZZ_SEED = 1515


def _offsets_not_contiguous(data: bytes) -> bool:
    try:
        records = decode_batch_records(data, max_decompressed_bytes=64 << 20, verify_crc=False)
    except CorruptBatchError:
        return False
    return [r.offset for r in records] != list(range(len(records)))


def _known_difference(data: bytes) -> str | None:
    """The category above of a batch where Kafka's answer is a known quirk, from the bytes alone."""
    config = LogValidatorConfig.from_topic_config("t-0", _CONFIG, 64 << 20)
    result = validate_batch(data, config, int.from_bytes(data[27:35], "big"))
    if not isinstance(result, ValidationFailure) or result.message is None:
        return None
    if "varint longer than" in result.message:
        return "overlong varint: Kafka UNKNOWN_SERVER_ERROR"
    if data[22] & 7 and result.message.startswith("Invalid record size: expected to read"):
        return "compressed record shorter/longer than its length: Kafka accepts"
    if result.error_code == ErrorCode.corrupt_message:
        return "undecodable payload: Kafka UNKNOWN_SERVER_ERROR"
    return None


_CONFIG = {"max.message.bytes": "1048588", "cleanup.policy": "delete", "message.timestamp.type": "CreateTime",
           "message.timestamp.before.max.ms": str(2**63 - 1), "message.timestamp.after.max.ms": str(2**63 - 1),
           "compression.type": "producer"}


def _fuzz_corpus(t0: int) -> list[tuple[bytes, bool]]:
    """(batch, for the compacted topic) for FUZZ_CASES mutated batches; the same bytes in both runs."""
    rng = random.Random(FUZZ_SEED)
    seeds = []
    for _ in range(16):
        n = rng.randrange(1, 5)
        parts = []
        for i in range(n):
            headers = tuple((b"h", rng.randbytes(2)) for _ in range(rng.randrange(2)))
            parts.append(record_corpus.record(i, rng.choice([None, b"k%d" % i]), rng.randbytes(rng.randrange(40)),
                                              headers=headers))
        seeds.append((b"".join(parts), n))
    out = []
    while len(out) < FUZZ_CASES:
        section, n = rng.choice(seeds)
        mutated = bytearray(section)
        for _ in range(rng.randrange(1, 3)):
            mutated = record_corpus.mutate(rng, mutated)
        data = record_corpus.batch(bytes(mutated), n, timestamp_ms=t0, codec=rng.choice((0, 0, 0, 4)))
        if _offsets_not_contiguous(data):
            continue
        out.append((data, rng.random() < 0.3))
    return out


def _outcome(p: Any) -> dict[str, Any]:
    return {"error": err(p), "record_errors": sorted(e.batch_index for e in p.record_errors)}


def malformed_batches(ctx: Ctx) -> Any:
    c = ctx.connect()
    plain, compacted = ctx.topic("plain"), ctx.topic("compacted")
    out: dict[str, Any] = {
        "create": [err(ctx.create_topic(c, plain, 1, {"message.timestamp.before.max.ms": str(7 * 24 * 3600 * 1000)})),
                   err(ctx.create_topic(c, compacted, 1, {"cleanup.policy": "compact"}))],
    }
    probes = {}
    for probe in record_corpus.PROBES:
        if probe.kafka_accepts:
            continue
        topic = compacted if probe.compacted else plain
        answer = _outcome(ctx.produce(c, topic, 0, probe.build(ctx.t0), version=9))
        probes[probe.name] = answer if probe.kafka_answers is None else "known difference"
    out["probes"] = probes
    fuzzed = []
    for data, to_compacted in _fuzz_corpus(ctx.t0):
        answer = _outcome(ctx.produce(c, compacted if to_compacted else plain, 0, data, version=9))
        known = _known_difference(data)
        fuzzed.append(answer if known is None else known)
    out["fuzzed"] = fuzzed
    out["known_differences"] = sum(1 for f in fuzzed if isinstance(f, str))
    out["accepted_fuzzed"] = sum(1 for f in fuzzed if isinstance(f, dict) and f["error"] == "NONE(0)")
    # (No high watermarks: Kafka's log also holds the batches it accepts by the quirk above.)
    return out
