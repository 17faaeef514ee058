"""A confluent-kafka (librdkafka) group member (see member_common.py for the contract)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, TopicPartition
from member_common import SESSION_MS, Stop, args, emit


def main() -> None:
    bootstrap, topic, group, instance = args()
    stop = Stop()
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 1000,
        "client.id": f"confluent-{group}", "group.protocol": "classic",
    }
    if instance:
        config["group.instance.id"] = instance
    consumer = Consumer(config)

    def on_assign(c: Any, partitions: list[TopicPartition]) -> None:
        emit("assigned", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([topic], on_assign=on_assign)
    while not stop:
        messages = consumer.consume(num_messages=500, timeout=0.2)
        last: dict[int, int] = {}
        for m in messages:
            if m.error():
                continue
            emit("record", p=m.partition(), o=m.offset())
            last[m.partition()] = m.offset()
        if last:
            consumer.commit(offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()], asynchronous=False)
            emit("committed", offsets={str(p): o + 1 for p, o in last.items()})
    consumer.close()


if __name__ == "__main__":
    main()
