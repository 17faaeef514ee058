"""The pytest plugin's set-up cost: a session broker ready to serve, and a fresh topic per test.

Targets (issue 21): a session broker ready in < 0.5 s, a fresh topic in < 20 ms. The baseline in the same
run is the reference Apache Kafka from compat-tests/oracle (a JVM broker is what a test suite otherwise starts,
e.g. through testcontainers: its start and its CreateTopics, measured the same way).

    .venv/bin/python -m bench.pytest_fixtures [--starts 5] [--topics 50] [--no-kafka]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import describe
from samsa.broker.client import Connection
from samsa.broker.launcher import ServeOptions, free_port, start_serve

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "compat-tests"))


def _create_topic(conn: Connection, name: str) -> None:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 30_000, "validate_only": False})
    assert r.topics[0].error_code.value == 0, r.topics[0]


def _topic_ms(host: str, port: int, count: int, prefix: str) -> list[float]:
    """Each CreateTopics round trip as the plugin's samsa_topic makes it (one admin connection per session)."""
    out = []
    with Connection(host, port) as conn:
        for i in range(count):
            t0 = time.perf_counter()
            _create_topic(conn, f"{prefix}-{i}")
            out.append((time.perf_counter() - t0) * 1000)
    return out


def samsa_figures(starts: int, topics: int) -> dict[str, Any]:
    ready_s: list[float] = []
    topic_ms: list[float] = []
    for i in range(starts):
        with tempfile.TemporaryDirectory(prefix="samsa-fixture-bench-") as work:
            port = free_port()
            t0 = time.perf_counter()
            process = start_serve(ServeOptions(data_dir=Path(work) / "data", port=port), Path(work) / "samsa.log")
            try:
                process.wait_listening(60)
                with Connection("127.0.0.1", port):  # ApiVersions answered: ready to serve a test
                    ready_s.append(time.perf_counter() - t0)
                if i == 0:
                    topic_ms = _topic_ms("127.0.0.1", port, topics, "fresh")
            finally:
                process.stop()
    return {"session_ready_s": ready_s, "topic_ms": topic_ms}


def kafka_figures(topics: int) -> dict[str, Any]:
    import oracle_fixture

    t0 = time.perf_counter()
    cluster = oracle_fixture.start_kafka(1, poll_s=0.01)
    try:
        ready = time.perf_counter() - t0
        host, _, port = cluster.bootstrap.rpartition(":")
        return {"session_ready_s": [ready], "topic_ms": _topic_ms(host, int(port), topics, "fresh")}
    finally:
        cluster.stop()


def _summary(name: str, f: dict[str, Any]) -> dict[str, float]:
    ready, topic = f["session_ready_s"], f["topic_ms"]
    s = {"session_ready_median_s": statistics.median(ready), "session_ready_max_s": max(ready),
         "topic_median_ms": statistics.median(topic), "topic_p99_ms": sorted(topic)[int(0.99 * (len(topic) - 1))]}
    print(f"{name:6} session broker ready: median {s['session_ready_median_s']:.3f} s "
          f"(max {s['session_ready_max_s']:.3f} s over {len(ready)}); "
          f"fresh topic: median {s['topic_median_ms']:.1f} ms, p99 {s['topic_p99_ms']:.1f} ms over {len(topic)}")
    return s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka baseline")
    parser.add_argument("--smoke", action="store_true", help="2 starts, 10 topics, no Kafka")
    args = parser.parse_args(argv)
    if args.smoke:
        args.starts, args.topics, args.no_kafka = 2, 10, True
    print(describe())
    samsa = _summary("samsa", samsa_figures(args.starts, args.topics))
    result: dict[str, Any] = {"machine": describe(), "samsa": samsa}
    if not args.no_kafka:
        result["kafka"] = _summary("kafka", kafka_figures(args.topics))
        for key in ("session_ready_median_s", "topic_median_ms"):
            print(f"samsa / kafka {key}: {result['samsa'][key] / result['kafka'][key]:.2f}")
    targets = result["samsa"]["session_ready_median_s"] < 0.5 and result["samsa"]["topic_median_ms"] < 20
    print(f"targets (ready < 0.5 s, topic < 20 ms): {'met' if targets else 'NOT met'}")
    if not args.smoke:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"pytest-fixtures-{time.strftime('%Y%m%dT%H%M%S')}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
