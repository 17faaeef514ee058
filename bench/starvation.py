"""Another client's latency while one connection sends worst-case valid produce batches, Samsa vs Kafka (issue 15).

Per broker (`samsa serve` and the reference Apache Kafka from compat-tests/oracle, defaults, one node) and per case:
client A sends worst-case batches back to back (Produce acks=1, one in flight) to a 1-partition topic for
--seconds; client B meanwhile loops a Metadata request and a small acks=1 produce to another topic, 10 ms
apart, timing each round trip. Cases: `idle` (no load, the baseline), `zstd-1M-empty` (one valid zstd batch
of 1,000,000 empty records, 763 KB at the default zstd level) and `plain-1MiB` (uncompressed 100-byte
records filling a 1 MiB batch).
Prints B's p50 / p99 / max per request type and A's accepted batches and error codes.

    .venv/bin/python -m bench.starvation [--seconds 20] [--smoke] [--no-kafka]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.machine import describe
from samsa.broker.client import Connection
from samsa.broker.launcher import ServeOptions, free_port, start_serve
from samsa.kproto.records import encode_batch

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "compat-tests"))
MAX_BATCH = 1 << 20  # under the default message.max.bytes (1048588) of both brokers
PRODUCE_VERSION = 9


def zstd_empty_batch() -> bytes:
    """1,000,000 records with null key, null value and no headers, zstd (codec 4)."""
    return encode_batch([(None, None, ())] * 1_000_000, timestamp_ms=int(time.time() * 1000), compression=4)


def plain_full_batch() -> bytes:
    """As many uncompressed 100-byte records as fit in MAX_BATCH."""
    now = int(time.time() * 1000)
    n = MAX_BATCH // 108
    while len(batch := encode_batch([(None, b"x" * 100, ())] * n, timestamp_ms=now)) > MAX_BATCH:
        n -= 200
    return batch


CASES: dict[str, Callable[[], bytes] | None] = {
    "idle": None, "zstd-1M-empty": zstd_empty_batch, "plain-1MiB": plain_full_batch}


def _produce(conn: Connection, topic: str, records: bytes) -> int:
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 30_000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]},
                     version=PRODUCE_VERSION)
    return int(r.responses[0].partition_responses[0].error_code.value)


def _metadata(conn: Connection, topic: str) -> None:
    conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                     "include_topic_authorized_operations": False})


def _create_topic(conn: Connection, name: str) -> None:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 30_000, "validate_only": False})
    assert r.topics[0].error_code.value in (0, 36), r.topics[0]  # 36: TOPIC_ALREADY_EXISTS
    small = encode_batch([(b"k", b"ready", ())], timestamp_ms=int(time.time() * 1000))
    deadline = time.monotonic() + 30
    while (code := _produce(conn, name, small)) != 0:  # Kafka's leader may need a moment
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name}: produce error {code}")
        time.sleep(0.1)


def _summary(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    s = sorted(ms)
    return {"count": len(s), "p50_ms": round(s[len(s) // 2], 1),
            "p99_ms": round(s[int(0.99 * (len(s) - 1))], 1), "max_ms": round(s[-1], 1)}


def run_case(host: str, port: int, case: str, seconds: float) -> dict[str, Any]:
    make = CASES[case]
    batch = make() if make else b""
    topic_a, topic_b = f"starve-{case}", f"other-{case}"
    with Connection(host, port, timeout_s=120) as a, Connection(host, port, timeout_s=120) as b:
        _create_topic(a, topic_a)
        _create_topic(b, topic_b)
        codes: collections.Counter[str] = collections.Counter()
        a_ms: list[float] = []
        done = threading.Event()

        def load() -> None:
            deadline = time.monotonic() + seconds
            try:
                while make is not None and time.monotonic() < deadline:
                    t0 = time.monotonic()
                    try:
                        codes[str(_produce(a, topic_a, batch))] += 1
                    except Exception as e:  # a closed connection is a finding, not a crash of the bench
                        codes[type(e).__name__] += 1
                        break
                    a_ms.append((time.monotonic() - t0) * 1000)
                if make is None:
                    time.sleep(seconds)
            finally:
                done.set()

        sender = threading.Thread(target=load, daemon=True)
        meta_ms: list[float] = []
        produce_ms: list[float] = []
        small = encode_batch([(b"k", b"v" * 10, ())], timestamp_ms=int(time.time() * 1000))
        started = time.monotonic()
        sender.start()
        while not done.is_set():
            t0 = time.monotonic()
            _metadata(b, topic_b)
            t1 = time.monotonic()
            code = _produce(b, topic_b, small)
            t2 = time.monotonic()
            assert code == 0, f"the other client's produce got error {code}"
            meta_ms.append((t1 - t0) * 1000)
            produce_ms.append((t2 - t1) * 1000)
            time.sleep(0.01)
        elapsed = time.monotonic() - started
        sender.join(60)
    accepted = codes.get("0", 0)
    return {"case": case, "batch_bytes": len(batch), "elapsed_s": round(elapsed, 2),
            "batches_sent": sum(codes.values()), "batches_accepted": accepted, "error_codes": dict(codes),
            "batch_round_trip": _summary(a_ms), "other_metadata": _summary(meta_ms),
            "other_produce": _summary(produce_ms)}


def _print(broker: str, r: dict[str, Any]) -> None:
    m, p = r["other_metadata"], r["other_produce"]
    load = (f"{r['batches_accepted']}/{r['batches_sent']} batches of {r['batch_bytes']} B accepted, "
            f"error codes {r['error_codes']}, batch round trip p50 {r['batch_round_trip']['p50_ms']} ms"
            if r["batch_bytes"] else "no load")
    print(f"{broker:5} {r['case']:14} other Metadata p50 {m['p50_ms']} / p99 {m['p99_ms']} / max {m['max_ms']} ms "
          f"(n={m['count']}); other Produce p50 {p['p50_ms']} / p99 {p['p99_ms']} / max {p['max_ms']} ms; {load}",
          flush=True)


@contextmanager
def samsa_broker() -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory(prefix="starvation-") as work:
        port = free_port()
        process = start_serve(ServeOptions(data_dir=Path(work) / "data", port=port), Path(work) / "samsa.log")
        try:
            process.wait_listening(60)
            yield "127.0.0.1", port
        finally:
            process.stop()


@contextmanager
def kafka_broker() -> Iterator[tuple[str, int]]:
    import oracle_fixture

    cluster = oracle_fixture.start_kafka(1, heap="1g")
    try:
        host, _, port = cluster.bootstrap.rpartition(":")
        yield host, int(port)
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="load time per case")
    parser.add_argument("--smoke", action="store_true", help="2 s per case, no JSON")
    parser.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka baseline")
    args = parser.parse_args(argv)
    seconds = 2.0 if args.smoke else args.seconds
    machine = describe()
    print(machine, flush=True)
    result: dict[str, Any] = {"machine": machine, "seconds": seconds}
    brokers = {"samsa": samsa_broker} | ({} if args.no_kafka else {"kafka": kafka_broker})
    for name, start in brokers.items():
        with start() as (host, port):
            result[name] = []
            for case in CASES:
                r = run_case(host, port, case, min(seconds, 5.0) if case == "idle" else seconds)
                result[name].append(r)
                _print(name, r)
    if not args.smoke:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"starvation-{time.strftime('%Y%m%dT%H%M%S')}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
