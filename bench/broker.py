"""Single-broker throughput: confluent-kafka produce/consume of 1 KiB records, small-request rate.

Prints records/s, MB/s and the broker's CPU use, so every figure is also given per broker core.
The side-by-side comparison with Apache Kafka is bench/compare (issue 8).

    .venv/bin/python -m bench.broker [--records N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.machine import cpu_seconds, describe, rss_mib
from samsa.broker.launcher import LaunchError, ServeOptions, free_port, start_serve

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


class Broker:
    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.served = start_serve(ServeOptions(data_dir=data_dir, port=self.port, log_level="WARNING"),
                                  data_dir.parent / f"samsa-{self.port}.log", cwd=REPO)
        self.proc = self.served.popen
        try:
            self.served.wait_listening(30)
        except LaunchError:
            self.stop()
            raise

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.served.stop(20)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False,
                  "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "compression.type": "none"})
    payload = os.urandom(size)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    while seen < records and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    c.close()
    if seen < records:
        raise RuntimeError(f"consumed {seen} of {records}")
    return elapsed


def small_requests(bootstrap: str, topic: str, seconds: float, connections: int) -> int:
    from samsa.broker.client import Connection
    from samsa.kproto.records import encode_batch

    host, _, port = bootstrap.rpartition(":")
    counts = [0] * connections
    stop_at = time.monotonic() + seconds

    def worker(i: int) -> None:
        with Connection(host, int(port)) as conn:
            batch = encode_batch([(None, b"x" * 100, ())], timestamp_ms=int(time.time() * 1000))
            while time.monotonic() < stop_at:
                r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": i % 4, "records": batch}]}]})
                assert r.responses[0].partition_responses[0].error_code.value == 0
                counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="tiny run that only checks the harness works")
    args = parser.parse_args(argv)
    if args.smoke:
        args.records = 2000
    machine = describe()
    print(f"machine: {machine}")
    results: dict[str, Any] = {"machine": machine, "records": args.records, "record_bytes": args.size}
    with tempfile.TemporaryDirectory(prefix="samsa-bench-") as tmp:
        broker = Broker(Path(tmp) / "data")
        try:
            idle_rss = rss_mib(broker.proc.pid)
            for acks in ("1", "all"):
                topic = f"bench-acks{acks}"
                create_topic(broker.bootstrap, topic, args.partitions)
                cpu0 = cpu_seconds(broker.proc.pid)
                elapsed = produce(broker.bootstrap, topic, args.records, args.size, acks)
                cpu = cpu_seconds(broker.proc.pid) - cpu0
                rate = args.records / elapsed
                mb = rate * args.size / 1e6
                results[f"produce_acks{acks}"] = {"records_per_s": rate, "mb_per_s": mb, "broker_cpu_s": cpu,
                                                  "mb_per_s_per_core": mb / max(cpu / elapsed, 1e-9)}
                print(f"produce acks={acks}: {rate:,.0f} records/s, {mb:.1f} MB/s, broker used "
                      f"{cpu / elapsed:.2f} cores -> {mb / max(cpu / elapsed, 1e-9):.1f} MB/s per core")
            cpu0 = cpu_seconds(broker.proc.pid)
            elapsed = consume(broker.bootstrap, "bench-acks1", args.partitions, args.records)
            cpu = cpu_seconds(broker.proc.pid) - cpu0
            rate = args.records / elapsed
            mb = rate * args.size / 1e6
            results["consume"] = {"records_per_s": rate, "mb_per_s": mb, "broker_cpu_s": cpu,
                                  "mb_per_s_per_core": mb / max(cpu / elapsed, 1e-9)}
            print(f"consume: {rate:,.0f} records/s, {mb:.1f} MB/s, broker used {cpu / elapsed:.2f} cores "
                  f"-> {mb / max(cpu / elapsed, 1e-9):.1f} MB/s per core")
            seconds = 1.0 if args.smoke else 5.0
            cpu0 = cpu_seconds(broker.proc.pid)
            count = small_requests(broker.bootstrap, "bench-acks1", seconds, 4)
            cpu = cpu_seconds(broker.proc.pid) - cpu0
            results["small_produce"] = {"requests_per_s": count / seconds,
                                        "requests_per_s_per_core": count / max(cpu, 1e-9)}
            print(f"small produce (1 record, acks=1, 4 connections, one request in flight each): "
                  f"{count / seconds:,.0f} requests/s, {count / max(cpu, 1e-9):,.0f} per broker core-second")
            results["rss_mib"] = {"idle": idle_rss, "after_load": rss_mib(broker.proc.pid)}
            print(f"broker RSS: idle {idle_rss:.0f} MiB, after load {rss_mib(broker.proc.pid):.0f} MiB")
        finally:
            broker.stop()
    if not args.smoke:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"broker-{time.strftime('%Y%m%dT%H%M%S')}.json"
        out.write_text(json.dumps(results, indent=2))
        print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
