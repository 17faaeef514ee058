"""A confluent-kafka consumer (group.protocol=consumer by default), run as a child process by the KIP-848 tests.

argv: bootstrap group topic out_path [group_protocol: consumer (default) or classic] [group.instance.id]. Each
record is
committed (synchronously) before it is written to out_path as "topic partition offset value"; assignment
changes are written as "assign ..."/"revoke ...". A record whose commit fails (STALE_MEMBER_EPOCH while an
epoch bump is in flight, as with Kafka) is read again. SIGTERM closes the consumer (it leaves the group,
member epoch -1); SIGKILL leaves it to the session timeout.
"""

from __future__ import annotations

import logging
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

RUN_S = 240.0


def main() -> None:
    bootstrap, group, topic, out_path = sys.argv[1:5]
    protocol = sys.argv[5] if len(sys.argv) > 5 else "consumer"
    instance = sys.argv[6] if len(sys.argv) > 6 else None
    stop = False

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    out = open(out_path, "a", buffering=1)

    def on_assign(_c: Consumer, parts: list[TopicPartition]) -> None:
        out.write("assign " + " ".join(str(p.partition) for p in parts) + "\n")

    def on_revoke(_c: Consumer, parts: list[TopicPartition]) -> None:
        out.write("revoke " + " ".join(str(p.partition) for p in parts) + "\n")

    debug = logging.getLogger("rdkafka")
    debug.addHandler(logging.FileHandler(out_path + ".debug"))
    debug.setLevel(logging.DEBUG)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "debug": "cgrp"}
    if instance:
        config["group.instance.id"] = instance
    consumer = Consumer(config, logger=debug)
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    deadline = time.monotonic() + RUN_S
    while not stop and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                out.write(f"error {msg.error()}\n")
            continue
        try:
            consumer.commit(message=msg, asynchronous=False)
        except Exception as e:
            out.write(f"commit-failed {msg.partition()} {msg.offset()} {e}\n")
            # Read it again (if the partition is still ours; else its next owner starts at the commit).
            try:
                consumer.seek(TopicPartition(msg.topic(), msg.partition(), msg.offset()))
            except Exception as seek_error:
                out.write(f"seek-failed {msg.partition()} {seek_error}\n")
            continue
        out.write(f"record {msg.partition()} {msg.offset()} {msg.value().decode()}\n")
    consumer.close()
    out.write("closed\n")


if __name__ == "__main__":
    main()
