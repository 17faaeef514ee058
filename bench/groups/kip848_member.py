"""A confluent-kafka (librdkafka) group member for bench/kip848.py, with either group protocol.

    kip848_member.py BOOTSTRAP TOPIC GROUP PROTOCOL SESSION_MS HEARTBEAT_MS

PROTOCOL is `consumer` (KIP-848: the session timeout and heartbeat interval are the broker's
group.consumer.* settings, so SESSION_MS and HEARTBEAT_MS are not sent) or `classic` (session.timeout.ms
and heartbeat.interval.ms are the member's, the client's default eager assignors range,roundrobin).
Prints one JSON object per line on stdout (the monotonic clock is the same for every process of the
machine, so the bench compares its own times with these):

    {"event": "subscribed", "t": 12.3}                    right after subscribe()
    {"event": "owned", "t": 12.9, "partitions": [0, 3]}  after every assign, revoke or loss
    {"event": "polled", "t": 13.0, "p": 0}               a batch held records of partition p

SIGTERM closes the consumer (it leaves the group); the program ends by itself after 300 s.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

LIFETIME_S = 300.0


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def main() -> None:
    bootstrap, topic, group, protocol, session_ms, heartbeat_ms = sys.argv[1:7]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                              "auto.offset.reset": "latest", "enable.auto.commit": True,
                              "auto.commit.interval.ms": 1000, "fetch.wait.max.ms": 100}
    if protocol == "classic":
        config.update({"session.timeout.ms": int(session_ms), "heartbeat.interval.ms": int(heartbeat_ms)})
    consumer = Consumer(config)
    owned: set[int] = set()

    def on_assign(_c: Any, partitions: list[TopicPartition]) -> None:
        owned.update(tp.partition for tp in partitions)
        emit("owned", partitions=sorted(owned))

    def on_revoke(_c: Any, partitions: list[TopicPartition]) -> None:
        owned.difference_update(tp.partition for tp in partitions)
        emit("owned", partitions=sorted(owned))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    emit("subscribed")
    deadline = time.monotonic() + LIFETIME_S
    while not stop.is_set() and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=500, timeout=0.05)
        for p in sorted({m.partition() for m in batch if not m.error()}):
            emit("polled", p=p)
    consumer.close()


if __name__ == "__main__":
    main()
