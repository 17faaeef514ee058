"""Controller registrations (KIP-919) and UnregisterController (key 94), as the active controller decides them.

Kafka's controllers each register themselves with the active controller (ControllerRegistrationManager sends
ControllerRegistration, ClusterControlManager writes a RegisterControllerRecord) and register again as soon as
they see their registration removed; DescribeCluster on the controller listener lists the registered ones.
Samsa's controllers need no RPC for it: the active controller writes the RegisterControllerRecord of itself (its
incarnation, its controller listener) and of every voter that has fetched from it since it became active or since
that voter was unregistered (under its directory id). So a running controller that is unregistered is registered
again at its next fetch, as Kafka's re-registers, and a stopped one stays unregistered, as in Kafka.

UnregisterController (Kafka's QuorumController.unregisterController, ClusterControlManager.unregisterController):
the active controller cannot unregister itself (INVALID_REQUEST), metadata.version must be 4.4-IV2 or later
(UNSUPPORTED_VERSION), an id without a registration is CONTROLLER_ID_NOT_REGISTERED; otherwise an
UnregisterControllerRecord removes it. Whether it is still a voter does not matter (Kafka does not check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.controller_types import ControllerCore, Pending
from samsa.broker.metadata.features import METADATA_VERSION
from samsa.broker.metadata.records import MetadataRecord, RegisterControllerRecord, UnregisterControllerRecord
from samsa.kproto.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.broker.metadata.quorum import MetadataQuorum

CONTROLLER_ID_NOT_REGISTERED = 136  # Kafka 4.4's Errors.CONTROLLER_ID_NOT_REGISTERED (kio 0.6.5 predates it)
CONTROLLER_UNREGISTRATION_LEVEL = 33  # metadata.version 4.4-IV2 (MetadataVersion.isControllerUnregistrationSupported)
CONTROLLER_LISTENER = "CONTROLLER"


class ControllerRegistrations:
    def __init__(self, core: ControllerCore, quorum: MetadataQuorum, node_id: int) -> None:
        self._core = core
        self._quorum = quorum
        self.node_id = node_id
        # raft-clock ms before which a voter's fetches do not register it: when this node became active,
        # or when the voter was unregistered (a fetch it sent before then is no sign it still runs)
        self._active_since_ms: int | None = None
        self._unregistered_at_ms: dict[int, int] = {}

    def maybe_register_controllers(self, incarnation_id: str) -> Pending[None] | None:
        """Called periodically: register this controller and every running voter that lacks a registration
        (or whose endpoint changed)."""
        if not self._core.active:
            self._active_since_ms = None
            self._unregistered_at_ms.clear()
            return None
        now_ms = self._quorum.core.now_ms
        if self._active_since_ms is None:
            self._active_since_ms = now_ms
        described = self._quorum.describe()
        if described.error_code != ErrorCode.none:
            return None
        voters = self._quorum.voters
        image = self._core.image
        records: list[MetadataRecord] = []
        for replica in described.current_voters:
            endpoint = voters.get(replica.replica_id)
            if endpoint is None:
                continue
            if replica.replica_id == self.node_id:
                incarnation = incarnation_id
            else:
                since_ms = max(self._active_since_ms, self._unregistered_at_ms.get(replica.replica_id, -1))
                if replica.last_fetch_timestamp <= since_ms:
                    continue  # not heard from since: it may not be running
                incarnation = str(replica.replica_directory_id)
            listeners = f"{CONTROLLER_LISTENER}://{endpoint.host}:{endpoint.port}"
            current = image.controllers.get(replica.replica_id)
            if current is None or current.listeners != listeners or (
                    replica.replica_id == self.node_id and current.incarnation_id != incarnation):
                records.append(RegisterControllerRecord(replica.replica_id, incarnation, listeners))
        if not records:
            return None
        return self._core.commit(None, records)

    def unregister_controller(self, controller_id: int) -> tuple[int, str | None, Pending[None] | None]:
        """UnregisterController: (error code, error message, the pending commit)."""
        self._core.require_active()
        if controller_id == self.node_id:
            return ErrorCode.invalid_request, "Controller cannot unregister itself while it is active.", None
        image = self._core.image
        if image.feature_level(METADATA_VERSION) < CONTROLLER_UNREGISTRATION_LEVEL:
            return (ErrorCode.unsupported_version,
                    "The current MetadataVersion is too old to support controller unregistration.", None)
        if controller_id not in image.controllers:
            return CONTROLLER_ID_NOT_REGISTERED, f"Controller ID {controller_id} is not currently registered.", None
        self._unregistered_at_ms[controller_id] = self._quorum.core.now_ms
        return ErrorCode.none, None, self._core.commit(None, [UnregisterControllerRecord(controller_id)])
