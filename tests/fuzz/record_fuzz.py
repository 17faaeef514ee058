"""A record-level mutation fuzzer of the produce path, against a running broker.

Each case takes a valid batch, mutates its records section (bit flips, interesting varints, cuts, inserts,
long continuation runs, duplicated slices), frames it again with a consistent header (count, lastOffsetDelta,
CRC32C), maybe compresses it, and produces it. The oracle of "well-formed" is samsa's record decoder (the
Record-building walk, a separate implementation from the scan the broker validates with) plus the
LogValidator rules (offset deltas 0..n-1, keys on a compacted topic, timestamps within
message.timestamp.after.max.ms). kafka-python's DefaultRecordBatch is asked too, for information only: it
refuses what Kafka accepts (header keys that are not UTF-8, which Java decodes leniently; some records with
attribute bits set), so its disagreements are counted, not failed. Counted:

    crashes            a closed connection, a timeout, an error code outside {0, 2, 32, 87}, a dead broker,
                       or another client failing to produce and read back (checked every LIVENESS_EVERY cases)
    accepted_malformed the broker said 0 to a batch an oracle refuses
    refused_valid      the broker refused a batch both oracles accept (not a failure: reported)

    make fuzz                                         # an hour (FUZZ_SECONDS=3600), a fresh broker
    .venv/bin/python tests/fuzz/record_fuzz.py --seconds 300 --seed 7
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_corpus

from samsa.broker.client import Connection
from samsa.kproto.batch import CorruptBatchError
from samsa.kproto.compression import compress
from samsa.kproto.records import decode_batch_records, decode_batches, encode_batch

LIVENESS_EVERY = 200
ALLOWED_CODES = {0, 2, 32, 87}
AFTER_MAX_MS = 3_600_000  # the broker default of message.timestamp.after.max.ms
# Seeds are a few KiB; the oracle's bound keeps kproto.compression's retry-with-a-larger-buffer loop cheap on
# corrupt streams (the broker's own bound is samsa.max.decompressed.batch.bytes, 64 MiB).
ORACLE_MAX_DECOMPRESSED_BYTES = 4 << 20
# The broker's RSS may grow by this much over a run (page-cache-backed segments, allocator slack) and no more: a
# leak per refused batch would pass it within minutes.
MAX_RSS_GROWTH_MIB = 256.0


@dataclass
class FuzzStats:
    cases: int = 0
    accepted: int = 0
    refused: int = 0
    crashes: int = 0
    accepted_malformed: int = 0
    refused_valid: int = 0
    kafka_python_disagrees: int = 0
    codes: dict[int, int] = field(default_factory=dict)
    max_rss_mib: float = 0.0
    first_rss_mib: float = 0.0
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)  # hex of failing cases (a few)


def _seed_records(rng: random.Random) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [(rng.choice([b"k%d" % i, rng.randbytes(rng.randrange(0, 12))]),
             rng.choice([None, rng.randbytes(rng.randrange(0, 300))]),
             [(f"h{j}", rng.choice([None, rng.randbytes(rng.randrange(0, 8))])) for j in range(rng.randrange(3))])
            for i in range(rng.randrange(1, 8))]


def _kafka_python_accepts(data: bytes) -> bool | None:
    try:
        from kafka.record.default_records import DefaultRecordBatch
    except ImportError:
        return None
    codec = data[22] & 7
    if codec not in (0, 1):
        return None
    try:
        list(DefaultRecordBatch(bytearray(data)))
    except Exception:
        return False
    return True


def well_formed(data: bytes, *, compacted: bool, now_ms: int) -> bool:
    """The decoder and LogValidator's rules; a few seconds of slack on timestamps for the round trip."""
    try:
        records = decode_batch_records(data, max_decompressed_bytes=ORACLE_MAX_DECOMPRESSED_BYTES)
    except CorruptBatchError:
        return False
    if [r.offset for r in records] != list(range(len(records))) or not records:
        return False
    if compacted and any(r.key is None for r in records):
        return False
    return all(r.timestamp_ms - now_ms <= AFTER_MAX_MS - 5_000 for r in records)


def _frame(rng: random.Random, section: bytes, count: int, now_ms: int) -> bytes:
    codec = rng.choice((0, 0, 0, 0, 1, 2, 3, 4))
    body = compress(codec, section) if codec else section
    if codec and rng.random() < 0.1:  # damage the compressed stream itself (the decompressors' turn)
        body = bytes(record_corpus.mutate(rng, bytearray(body)))
    return record_corpus.batch(body, count, timestamp_ms=now_ms, codec=codec, precompressed=True)


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _produce(conn: Connection, topic: str, data: bytes) -> Any:
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": data}]}]},
                     version=9)
    return r.responses[0].partition_responses[0]


def _still_serves(host: str, port: int, n: int) -> bool:
    marker = b"alive-%d" % n
    try:
        with Connection(host, port, timeout_s=30) as other:
            p = _produce(other, "fuzz-alive", encode_batch([(b"k", marker, ())], timestamp_ms=int(time.time() * 1000)))
            if p.error_code.value != 0:
                return False
            f = other.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                  "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                  "topics": [{"topic": "fuzz-alive", "partitions": [
                                      {"partition": 0, "fetch_offset": p.base_offset,
                                       "partition_max_bytes": 1 << 20}]}],
                                  "forgotten_topics_data": (), "rack_id": ""}, version=12)
            got = [r.value for _, rs in decode_batches(f.responses[0].partitions[0].records,
                                                       max_decompressed_bytes=1 << 20) for r in rs]
            return got[:1] == [marker]
    except Exception:  # (a closed connection, a timeout, a garbled answer: not serving)
        return False


def _create_topics(conn: Connection) -> None:
    conn.request(19, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": (),
         "configs": [{"name": "cleanup.policy", "value": policy}]}
        for name, policy in (("fuzz", "delete"), ("fuzz-compacted", "compact"), ("fuzz-alive", "delete"))],
        "timeout": 10000, "validate_only": False})


def run(host: str, port: int, pid: int, *, seconds: float, max_cases: int | None, seed: int,
        progress_every_s: float = 0.0) -> FuzzStats:
    rng = random.Random(seed)
    stats = FuzzStats(first_rss_mib=_rss_mib(pid))
    start = time.monotonic()
    last_progress = start
    seeds = [encode_batch(_seed_records(rng), timestamp_ms=0) for _ in range(64)]
    conn = Connection(host, port, timeout_s=30)
    _create_topics(conn)
    try:
        while time.monotonic() - start < seconds and (max_cases is None or stats.cases < max_cases):
            now = int(time.time() * 1000)
            origin = rng.choice(seeds)
            section = bytearray(origin[61:])
            for _ in range(rng.randrange(1, 4)):
                section = record_corpus.mutate(rng, section)
            count = int.from_bytes(origin[57:61], "big") + rng.choice((0, 0, 0, 0, 0, 1, -1))
            data = _frame(rng, bytes(section), max(count, 1), now)
            compacted = rng.random() < 0.25
            topic = "fuzz-compacted" if compacted else "fuzz"
            stats.cases += 1
            try:
                answer = _produce(conn, topic, data)
                code = answer.error_code.value
            except Exception as e:  # a closed connection or a timeout: the broker failed this client
                stats.crashes += 1
                if len(stats.examples) < 5:
                    stats.examples.append(f"crash {type(e).__name__}: {data.hex()}")
                conn.close()
                conn = Connection(host, port, timeout_s=30)
                continue
            stats.codes[code] = stats.codes.get(code, 0) + 1
            if code not in ALLOWED_CODES:
                stats.crashes += 1
                if len(stats.examples) < 5:
                    stats.examples.append(f"code {code}: {data.hex()}")
            good = well_formed(data, compacted=compacted, now_ms=now)
            if _kafka_python_accepts(data) not in (None, good or code == 32):
                stats.kafka_python_disagrees += 1
            if code == 0:
                stats.accepted += 1
                if not good:
                    stats.accepted_malformed += 1
                    if len(stats.examples) < 5:
                        stats.examples.append(f"accepted malformed ({topic}): {data.hex()}")
            else:
                stats.refused += 1
                if good and code != 32:
                    stats.refused_valid += 1
            if stats.cases % LIVENESS_EVERY == 0:
                if not _still_serves(host, port, stats.cases):
                    stats.crashes += 1
                stats.max_rss_mib = max(stats.max_rss_mib, _rss_mib(pid))
            if progress_every_s and time.monotonic() - last_progress > progress_every_s:
                last_progress = time.monotonic()
                print(f"{stats.cases} cases, {stats.crashes} crashes, {stats.accepted_malformed} accepted malformed, "
                      f"rss {_rss_mib(pid):.0f} MiB", flush=True)
    finally:
        conn.close()
    if not _still_serves(host, port, -1):
        stats.crashes += 1
    stats.max_rss_mib = max(stats.max_rss_mib, _rss_mib(pid))
    stats.seconds = round(time.monotonic() - start, 1)
    return stats


def _broker_fixtures() -> Any:
    spec = importlib.util.spec_from_file_location("_samsa_broker_fixtures",
                                                  Path(__file__).resolve().parents[1] / "broker" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=3600.0)
    p.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--max-rss-growth-mib", type=float, default=MAX_RSS_GROWTH_MIB,
                   help="fail when the broker's RSS grows by more than this over the run")
    p.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    fixtures = _broker_fixtures()
    with tempfile.TemporaryDirectory(prefix="samsa-fuzz-") as tmp:
        # Small segments and retention, so an hour of accepted batches does not fill the disk.
        server = fixtures.SamsaProcess(Path(tmp) / "data", fixtures.free_port(), (
            "--override", "log.segment.bytes=8388608", "--override", "log.retention.bytes=33554432"))
        server.start()
        try:
            print(f"fuzzing samsa PID {server.proc.pid} on {server.bootstrap}, seed {args.seed}, "
                  f"{args.seconds:.0f} s", flush=True)
            stats = run("127.0.0.1", server.port, server.proc.pid, seconds=args.seconds, max_cases=args.cases,
                        seed=args.seed, progress_every_s=60)
            alive = server.proc.poll() is None
        finally:
            server.stop()
    rss_growth_mib = stats.max_rss_mib - stats.first_rss_mib
    rss_bounded = rss_growth_mib <= args.max_rss_growth_mib
    figures = {**asdict(stats), "seed": args.seed, "broker_alive_at_end": alive,
               "rss_growth_mib": round(rss_growth_mib, 1), "max_rss_growth_mib": args.max_rss_growth_mib,
               "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(figures, flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if stats.crashes == 0 and stats.accepted_malformed == 0 and alive and rss_bounded else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
