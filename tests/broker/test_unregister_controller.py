"""UnregisterController (key 94) on the active controller, in process (a one-voter quorum): Kafka 4.4's answers
(QuorumController.unregisterController, ClusterControlManager.unregisterController) and the records it writes."""

from __future__ import annotations

import time
from pathlib import Path

from samsa.broker.config import BrokerConfig
from samsa.broker.controller import Controller
from samsa.broker.controller_registrations import CONTROLLER_ID_NOT_REGISTERED
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.quorum import Endpoint, MetadataQuorum
from samsa.broker.metadata.records import (
    FeatureLevelRecord,
    RegisterControllerRecord,
    UnregisterControllerRecord,
    decode_records,
    encode_records,
)
from samsa.kproto.errors import ErrorCode
from samsa.storage.log import Log


def _controller(directory: Path) -> tuple[Log, Controller]:
    log = Log.open(directory / "__cluster_metadata-0", METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
    quorum = MetadataQuorum(node_id=1, cluster_id="c", voters={1: Endpoint("127.0.0.1", 9093)}, log=log)
    return log, Controller(BrokerConfig(overrides={"node.id": "1"}, data_dir=directory), quorum)


def test_the_active_controller_registers_itself(tmp_path: Path) -> None:
    log, controller = _controller(tmp_path)
    pending = controller.registrations.maybe_register_controllers("inc-1")
    assert pending is not None and pending.done
    assert controller.image.controllers == {1: RegisterControllerRecord(1, "inc-1", "CONTROLLER://127.0.0.1:9093")}
    assert controller.registrations.maybe_register_controllers("inc-1") is None  # once
    log.close()


def test_unregister_controller_answers_and_records(tmp_path: Path) -> None:
    log, controller = _controller(tmp_path)
    controller.registrations.maybe_register_controllers("inc-1")
    controller._quorum.write_nowait([RegisterControllerRecord(2, "dir-2", "CONTROLLER://127.0.0.1:9094")])
    unregister = controller.registrations.unregister_controller

    assert unregister(1) == (ErrorCode.invalid_request, "Controller cannot unregister itself while it is active.",
                             None)
    assert unregister(42) == (CONTROLLER_ID_NOT_REGISTERED, "Controller ID 42 is not currently registered.", None)

    error, message, pending = unregister(2)
    assert (error, message) == (ErrorCode.none, None) and pending is not None and pending.done
    assert set(controller.image.controllers) == {1}
    assert unregister(2)[0] == CONTROLLER_ID_NOT_REGISTERED  # once only
    # Not heard from since it was unregistered: the active controller does not register it again.
    assert controller.registrations.maybe_register_controllers("inc-1") is None
    log.close()

    # The removal is in the log: a restart replays it.
    log, controller = _controller(tmp_path)
    assert set(controller.image.controllers) == {1}
    assert set(controller.image.apply(controller.image.to_records(), 0).controllers) == {1}
    log.close()


def test_an_older_metadata_version_cannot_unregister_controllers(tmp_path: Path) -> None:
    log, controller = _controller(tmp_path)
    controller._quorum.write_nowait([RegisterControllerRecord(2, "dir-2", "CONTROLLER://127.0.0.1:9094"),
                                     FeatureLevelRecord("metadata.version", 32)])  # 4.4-IV1
    assert controller.registrations.unregister_controller(2) == (
        ErrorCode.unsupported_version, "The current MetadataVersion is too old to support controller unregistration.",
        None)
    log.close()


def test_the_records_round_trip() -> None:
    records = [RegisterControllerRecord(3, "inc", "CONTROLLER://h:1"), UnregisterControllerRecord(3)]
    assert decode_records(encode_records(records)) == records
