"""An aiokafka group member (see member_common.py for the contract)."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import OffsetAndMetadata
from member_common import SESSION_MS, Stop, args, emit


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    async def on_partitions_revoked(self, revoked: object) -> None:
        pass

    async def on_partitions_assigned(self, assigned: object) -> None:
        emit("assigned", partitions=sorted(tp.partition for tp in assigned))  # type: ignore[attr-defined]


async def main() -> None:
    bootstrap, topic, group, instance = args()
    stop = Stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
                                client_id=f"aiokafka-{group}")
    consumer.subscribe([topic], listener=Listener())
    await consumer.start()
    try:
        while not stop:
            batches = await consumer.getmany(timeout_ms=200)
            offsets = {}
            for tp, records in batches.items():
                for r in records:
                    emit("record", p=tp.partition, o=r.offset)
                offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "")
            if offsets:
                await consumer.commit(offsets)
                emit("committed", offsets={str(tp.partition): o.offset for tp, o in offsets.items()})
    finally:
        await consumer.stop()


if __name__ == "__main__":
    asyncio.run(main())
