"""Malformed-batch corpus for the differential test (issue 15 part 1): the hand-made probes of
tests/fuzz/record_corpus.py and a seeded run of its record-level mutator, each produced to Kafka 4.1.2 and
to Samsa; the outcome is each case's error code (and record_errors indexes) and that nothing was written.

Not registered with ``@scenario`` (test_malformed_batches.py runs it), so scenarios.py's list is unchanged.
Left out, because Samsa is stricter there by design (storage/validator.py): batches whose offset deltas
are not 0..n-1, which Kafka stores (uncompressed) or rewrites (compressed).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from differential.framework import Ctx, err
from samsa.kproto.batch import CorruptBatchError
from samsa.kproto.records import decode_batch_records

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
        probes[probe.name] = _outcome(ctx.produce(c, topic, 0, probe.build(ctx.t0), version=9))
    out["probes"] = probes
    fuzzed = []
    for data, to_compacted in _fuzz_corpus(ctx.t0):
        fuzzed.append(_outcome(ctx.produce(c, compacted if to_compacted else plain, 0, data, version=9)))
    out["fuzzed"] = fuzzed
    out["accepted_fuzzed"] = sum(1 for f in fuzzed if f["error"] == "NONE")
    out["high_watermarks"] = [ctx.fetch(c, t, 0, 0).high_watermark for t in (plain, compacted)]
    return out
