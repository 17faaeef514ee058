"""Load-generator processes (confluent-kafka / librdkafka), started by the scenarios.

    python -m bench.compare.worker produce '{"bootstrap": ..., "topic": ..., "records": N, "size": B, ...}'
    python -m bench.compare.worker e2e-produce '{... "rate": R, "seconds": S}'
    python -m bench.compare.worker e2e-consume '{... "expect": N, "timeout": S}'

Protocol with the parent: the worker prints ``ready`` once its client is connected, waits for a line
on stdin (``go``), does its work and prints one JSON line with its figures. Times are
``time.monotonic()`` (CLOCK_MONOTONIC is system-wide on Linux, so processes can be compared).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _ready_then_wait() -> None:
    print("ready", flush=True)
    if not sys.stdin.readline():
        sys.exit(3)  # the parent went away


def produce(a: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": a["bootstrap"], "acks": str(a.get("acks", "1")), "enable.idempotence": False,
            "compression.type": "none", "log_level": 3, **a.get("config", {})}
    p = Producer(conf)
    p.list_topics(a["topic"], timeout=30)
    payload = os.urandom(a["size"])
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    topic, n = a["topic"], a["records"]
    _ready_then_wait()
    start = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(a.get("flush_timeout", 600))
    end = time.monotonic()
    return {"records": n, "start": start, "end": end, "errors": len(errors), "first_error": errors[:1],
            "undelivered": left}


def e2e_produce(a: dict[str, Any]) -> dict[str, Any]:
    """Produce ``rate`` records/s for ``seconds``, each carrying its send time (monotonic ns) in front."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": a["bootstrap"], "acks": str(a.get("acks", "1")), "enable.idempotence": False,
                  "linger.ms": 0, "compression.type": "none", "log_level": 3})
    p.list_topics(a["topic"], timeout=30)
    pad = os.urandom(max(0, a["size"] - 8))
    n = int(a["rate"] * a["seconds"])
    interval = 1.0 / a["rate"]
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    _ready_then_wait()
    start = time.monotonic()
    late = 0
    for i in range(n):
        due = start + i * interval
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        elif now - due > 0.01:
            late += 1
        p.produce(a["topic"], time.monotonic_ns().to_bytes(8, "big") + pad, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(60)
    return {"records": n, "start": start, "end": time.monotonic(), "errors": len(errors), "first_error": errors[:1],
            "undelivered": left, "late_sends": late}


def e2e_consume(a: dict[str, Any]) -> dict[str, Any]:
    """Assign partition 0 from offset 0 (no group); record now - send time for every record."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": "bench-e2e-unused", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "log_level": 3, **a.get("config", {})})
    c.assign([TopicPartition(a["topic"], 0, 0)])
    c.consume(100, 1.0)  # connect and start fetching before the producer starts
    _ready_then_wait()
    lat_ms: list[float] = []
    deadline = time.monotonic() + a["timeout"]
    while len(lat_ms) < a["expect"] and time.monotonic() < deadline:
        for m in c.consume(1000, 0.2):
            if m.error() is None:
                now = time.monotonic_ns()
                lat_ms.append((now - int.from_bytes(m.value()[:8], "big")) / 1e6)
    c.close()
    return {"received": len(lat_ms), "latencies_ms": [round(x, 3) for x in lat_ms]}


def main(argv: list[str]) -> int:
    mode, args = argv[0], json.loads(argv[1])
    fn = {"produce": produce, "e2e-produce": e2e_produce, "e2e-consume": e2e_consume}[mode]
    print(json.dumps(fn(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
