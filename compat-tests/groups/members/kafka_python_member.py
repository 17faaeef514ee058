"""A kafka-python group member (see member_common.py for the contract)."""

from __future__ import annotations

import logging
import os

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata
from member_common import SESSION_MS, Stop, args, emit


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked: object) -> None:
        pass

    def on_partitions_assigned(self, assigned: object) -> None:
        emit("assigned", partitions=sorted(tp.partition for tp in assigned))  # type: ignore[attr-defined]


def main() -> None:
    if os.environ.get("MEMBER_DEBUG"):  # kafka-python's own debug log on stderr, to read a stalled member
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
    bootstrap, topic, group, instance = args()
    stop = Stop()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
                             client_id=f"kafka-python-{group}",
                             # kafka-python may join before its first metadata for the topic arrives and, as
                             # leader, assign nothing; it rejoins on the next metadata refresh (default 5 min)
                             metadata_max_age_ms=5000)
    # Fetch the topic's metadata before joining, so a leader never computes an assignment without it
    # (seen against Apache Kafka 4.1.2 as well as Samsa: the leader handed one member nothing).
    for _ in range(100):
        if consumer.partitions_for_topic(topic):
            break
        stop.event.wait(0.1)
    consumer.subscribe([topic], listener=Listener())
    while not stop:
        batches = consumer.poll(timeout_ms=200)
        offsets = {}
        for tp, records in batches.items():
            for r in records:
                emit("record", p=tp.partition, o=r.offset)
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        if offsets:
            consumer.commit(offsets)
            emit("committed", offsets={str(tp.partition): o.offset for tp, o in offsets.items()})
    consumer.close()


if __name__ == "__main__":
    main()
