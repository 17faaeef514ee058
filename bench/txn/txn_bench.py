"""Producer throughput: plain vs idempotent vs transactional, Samsa vs the reference Apache Kafka, one run.

    .venv/bin/python bench/txn/txn_bench.py [--records 30000] [--txn-size 1000] [--reps 2] [--no-kafka]

One confluent-kafka producer, acks=all, 100-byte values, one topic of 3 partitions, linger.ms=5.
Modes: plain (enable.idempotence=false), idempotent, transactional (a transaction every --txn-size
records, each committed: AddPartitionsToTxn + EndTxn + markers on every partition).  The figure is
records per second from the first produce() to the last delivery (the last commit for transactions),
best of --reps.  Prints each figure, the ratio to plain on the same broker, the Samsa/Kafka ratio, and
the machine; writes bench/results/txn-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "compat-tests"))

from confluent_kafka import Producer  # noqa: E402
from oracle_fixture import kafka_cluster  # noqa: E402
from samsa_fixture import samsa_broker  # noqa: E402

from bench.machine import describe  # noqa: E402
from samsa.broker.client import Connection  # noqa: E402

PARTITIONS = 3
VALUE = b"x" * 100
MODES = ("plain", "idempotent", "transactional")


def create_topic(bootstrap: str, topic: str) -> None:
    host, _, port = bootstrap.rpartition(":")
    with Connection(host, int(port)) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": PARTITIONS, "replication_factor": 1}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0, r


def run_mode(bootstrap: str, mode: str, records: int, txn_size: int) -> float:
    topic = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                            "enable.idempotence": mode != "plain", "queue.buffering.max.messages": 200_000}
    if mode == "transactional":
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    failed: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    if mode == "transactional":
        p.init_transactions(30)
    started = time.monotonic()
    for start in range(0, records, txn_size):
        if mode == "transactional":
            p.begin_transaction()
        for i in range(start, min(start + txn_size, records)):
            while True:
                try:
                    p.produce(topic, VALUE, partition=i % PARTITIONS, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        if mode == "transactional":
            p.commit_transaction(60)
    assert p.flush(120) == 0
    elapsed = time.monotonic() - started
    assert not failed, failed[:3]
    return records / elapsed


def run_target(name: str, bootstrap: str, args: argparse.Namespace) -> dict[str, float]:
    best: dict[str, float] = {}
    for rep in range(args.reps):
        for mode in MODES:
            rate = run_mode(bootstrap, mode, args.records, args.txn_size)
            print(f"{name:6} {mode:14} rep {rep + 1}: {rate:10.0f} records/s", flush=True)
            best[mode] = max(best.get(mode, 0.0), rate)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--txn-size", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--no-kafka", action="store_true", help="Samsa only")
    args = parser.parse_args()
    machine = describe()
    print(f"machine: {machine}; load average {os.getloadavg()}", flush=True)
    results: dict[str, dict[str, float]] = {}
    with samsa_broker(ready_timeout=90.0) as s:
        results["samsa"] = run_target("samsa", s.bootstrap, args)
    if not args.no_kafka:
        with kafka_cluster(1) as c:
            results["kafka"] = run_target("kafka", c.bootstrap, args)
    print(f"\nbest of {args.reps}, {args.records} records of {len(VALUE)} bytes, transactions of {args.txn_size}:")
    for name, figures in results.items():
        plain = figures["plain"]
        print(f"{name:6} " + "  ".join(f"{m} {figures[m]:8.0f}/s ({figures[m] / plain:.2f}x plain)" for m in MODES))
    if "kafka" in results:
        print("samsa/kafka: " + "  ".join(f"{m} {results['samsa'][m] / results['kafka'][m]:.2f}" for m in MODES))
    print(f"load average at the end {os.getloadavg()}")
    out = REPO / "bench" / "results" / f"txn-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "records": args.records, "txn_size": args.txn_size,
                               "value_bytes": len(VALUE), "reps": args.reps, "best_records_per_s": results,
                               "load_average_end": os.getloadavg()}, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
