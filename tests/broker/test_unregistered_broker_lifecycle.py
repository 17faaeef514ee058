"""A running broker whose registration was removed (UnregisterBroker) stays unregistered until it restarts,
as Kafka 4.4's BrokerLifecycleManager: the controller answers its heartbeats STALE_BROKER_EPOCH ("No broker
registration found for broker id N") and the broker goes on heartbeating with the epoch it has, never
registering again (the Kafka controller's replies and the broker's retry are in ClusterControlManager.checkBrokerEpoch
and BrokerLifecycleManager$BrokerHeartbeatResponseEvent)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from samsa.broker.config import BrokerConfig
from samsa.broker.controller import Controller
from samsa.broker.lifecycle import BrokerLifecycle
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.quorum import Endpoint, MetadataQuorum
from samsa.kproto.errors import ErrorCode
from samsa.storage.log import Log

HEARTBEATS = 5


def test_an_unregistered_broker_heartbeats_on_and_never_registers_again(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "__cluster_metadata-0", METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
    quorum = MetadataQuorum(node_id=1, cluster_id="c", voters={1: Endpoint("127.0.0.1", 0)}, log=log)
    controller = Controller(BrokerConfig(overrides={"node.id": "1", "broker.heartbeat.interval.ms": "1"},
                                         data_dir=tmp_path), quorum)
    registrations: list[int] = []
    errors: list[ErrorCode] = []

    def register(*args: Any) -> Any:
        registrations.append(args[0])
        return controller.register_broker(*args)

    def heartbeat(*args: Any) -> Any:
        error, pending = controller.heartbeat(*args)
        errors.append(error)
        if len(errors) >= HEARTBEATS:
            done.set()
        return error, pending

    done = asyncio.Event()
    config = BrokerConfig(overrides={"node.id": "2", "broker.heartbeat.interval.ms": "1",
                                     "listeners": "PLAINTEXT://127.0.0.1:9092"}, data_dir=tmp_path)
    broker = SimpleNamespace(
        node_id=2, incarnation_id="inc-2", roles=frozenset({"broker"}), single_voter=False, config=config,
        quorum=quorum, is_active_controller=True,
        controller=SimpleNamespace(register_broker=register, heartbeat=heartbeat))
    lifecycle = BrokerLifecycle(broker)

    async def scenario() -> None:
        task = asyncio.create_task(lifecycle.run())
        try:
            while 2 not in controller.image.brokers:  # registered at its first pass
                await asyncio.sleep(0.001)
            epoch = lifecycle.broker_epoch
            error, pending = controller.unregister_broker(2)
            assert error == ErrorCode.none and pending is not None
            errors.clear()
            done.clear()
            await asyncio.wait_for(done.wait(), 30)
            assert lifecycle.broker_epoch == epoch  # it heartbeats with the epoch it has
        finally:
            task.cancel()

    asyncio.run(scenario())
    assert registrations == [2]  # once, when it started; never after its registration was removed
    assert set(errors) == {ErrorCode.stale_broker_epoch}
    assert 2 not in controller.image.brokers
    log.close()
