"""UnregisterBroker v0 under ACLs: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED and nothing changes;
an id without a registration is BROKER_ID_NOT_REGISTERED with Kafka's message; a registered broker's
registration is removed (the image no longer lists it)."""

from __future__ import annotations

from samsa.broker.broker import Broker
from samsa.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from samsa.kproto.errors import ErrorCode
from tests.acl.harness import ALICE, MALLORY, allow, call


def _unregister(broker: Broker, broker_id: int, principal: str) -> tuple[ErrorCode, str | None]:
    r = call(broker, 64, 0, {"broker_id": broker_id}, principal=principal)
    return r.error_code, r.error_message


def test_unregister_broker_needs_alter_on_the_cluster(broker: Broker) -> None:
    allow(broker, ALICE, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    node = broker.node_id
    assert node in broker.image.brokers
    assert _unregister(broker, node, MALLORY) == (ErrorCode.cluster_authorization_failed, None)
    assert node in broker.image.brokers
    assert _unregister(broker, 42, ALICE) == (ErrorCode.broker_id_not_registered,
                                              "Broker ID 42 is not currently registered")
    assert _unregister(broker, node, ALICE) == (ErrorCode.none, None)
    assert node not in broker.image.brokers
