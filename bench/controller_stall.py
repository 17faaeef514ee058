"""Another client's Metadata latency while one connection sends a large controller request (issue 15).

One `samsa serve`; client A sends a CreateTopics of N partitions (or a DeleteTopics of that topic with
--delete); client B asks Metadata for a small topic every 10 ms from before the request until every
log of the topic exists on disk (or is gone), plus one second. Prints A's answer time and error, the
time until the logs were all created, and B's latency p50 / p99 / max.

    .venv/bin/python -m bench.controller_stall [--partitions N] [--delete]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.broker import Broker
from bench.machine import describe
from samsa.broker.client import Connection


def _create(conn: Connection, name: str, partitions: int) -> Any:
    return conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                         "assignments": (), "configs": ()}], "timeout": 600_000,
                             "validate_only": False}).topics[0]


def _dirs(data_dir: Path, topic: str) -> int:
    return sum(1 for p in data_dir.iterdir() if p.name.startswith(f"{topic}-") and p.name[len(topic) + 1:].isdigit())


def run(partitions: int, delete: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="controller-stall-") as tmp:
        data_dir = Path(tmp) / "data"
        broker = Broker(data_dir)
        try:
            a = Connection("127.0.0.1", broker.port, timeout_s=600)
            b = Connection("127.0.0.1", broker.port, timeout_s=600)
            assert _create(b, "small", 1).error_code.value == 0
            if delete:
                assert _create(a, "big", partitions).error_code.value == 0
                while _dirs(data_dir, "big") < partitions:
                    time.sleep(0.1)
            answer: dict[str, Any] = {}

            def send() -> None:
                started = time.monotonic()
                if delete:
                    r = a.request(20, {"topic_names": ["big"], "timeout": 600_000}, version=4).responses[0]
                else:
                    r = _create(a, "big", partitions)
                answer["s"] = time.monotonic() - started
                answer["error"] = r.error_code.name

            latencies_ms: list[float] = []
            thread = threading.Thread(target=send)
            started = time.monotonic()
            thread.start()
            settled_at: float | None = None
            while settled_at is None or time.monotonic() < settled_at + 1.0:
                t0 = time.monotonic()
                b.request(3, {"topics": [{"name": "small"}], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})
                latencies_ms.append((time.monotonic() - t0) * 1000)
                if settled_at is None and "s" in answer:
                    done = _dirs(data_dir, "big") == (0 if delete else partitions) or answer["error"] != "none"
                    if done:
                        settled_at = time.monotonic()
                time.sleep(0.01)
            thread.join()
            latencies_ms.sort()
            return {
                "partitions": partitions, "operation": "DeleteTopics" if delete else "CreateTopics",
                "answer_s": round(answer["s"], 3), "error": answer["error"],
                "logs_settled_s": round((settled_at or started) - started, 3),
                "other_metadata_samples": len(latencies_ms),
                "other_metadata_p50_ms": round(statistics.median(latencies_ms), 1),
                "other_metadata_p99_ms": round(latencies_ms[max(0, int(len(latencies_ms) * 0.99) - 1)], 1),
                "other_metadata_max_ms": round(latencies_ms[-1], 1),
            }
        finally:
            broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=9_999)
    parser.add_argument("--delete", action="store_true")
    args = parser.parse_args(argv)
    print(describe())
    print(run(args.partitions, args.delete))
    return 0


if __name__ == "__main__":
    sys.exit(main())
