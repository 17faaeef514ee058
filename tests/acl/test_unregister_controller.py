"""UnregisterController v0 under ACLs: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED and nothing changes;
the active controller cannot unregister itself; an id without a registration is CONTROLLER_ID_NOT_REGISTERED
(136) with Kafka's message; a registered controller's registration is removed (the image no longer lists it)."""

from __future__ import annotations

from samsa.broker.broker import Broker
from samsa.broker.controller_registrations import CONTROLLER_ID_NOT_REGISTERED
from samsa.broker.metadata.records import RegisterControllerRecord
from samsa.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from samsa.kproto.errors import ErrorCode
from tests.acl.harness import ALICE, MALLORY, allow, call


def _unregister(broker: Broker, controller_id: int, principal: str) -> tuple[int, str | None]:
    r = call(broker, 94, 0, {"controller_id": controller_id}, principal=principal)
    return int(r.error_code), r.error_message


def test_unregister_controller_needs_alter_on_the_cluster(broker: Broker) -> None:
    allow(broker, ALICE, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    broker.quorum.write_nowait([RegisterControllerRecord(2, "dir-2", "CONTROLLER://127.0.0.1:9094")])
    assert 2 in broker.image.controllers
    assert _unregister(broker, 2, MALLORY) == (ErrorCode.cluster_authorization_failed, None)
    assert 2 in broker.image.controllers
    assert _unregister(broker, broker.node_id, ALICE) == (
        ErrorCode.invalid_request, "Controller cannot unregister itself while it is active.")
    assert _unregister(broker, 42, ALICE) == (CONTROLLER_ID_NOT_REGISTERED,
                                              "Controller ID 42 is not currently registered.")
    assert _unregister(broker, 2, ALICE) == (ErrorCode.none, None)
    assert 2 not in broker.image.controllers
