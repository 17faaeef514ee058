"""DescribeCluster (key 60) v0-v2 against a real `samsa serve`, and v2's fenced brokers (KIP-1073) from an image."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.broker.handlers.describe_cluster import _brokers
from samsa.broker.metadata.image import BrokerImage, MetadataImage
from samsa.kproto.errors import ErrorCode


def describe(conn: Connection, version: int, **values: Any) -> Any:
    return conn.request(60, {"include_cluster_authorized_operations": False, **values}, version=version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_each_version_lists_this_broker(samsa: Any, conn: Connection, version: int) -> None:
    r = describe(conn, version)
    assert r.error_code == ErrorCode.none and r.cluster_id
    assert [(b.broker_id, b.host, b.port) for b in r.brokers] == [(1, "127.0.0.1", samsa.port)]
    if version >= 1:
        assert r.endpoint_type == 1
    if version >= 2:
        assert r.brokers[0].is_fenced is False


def test_v1_and_v2_refuse_controller_endpoints(conn: Connection) -> None:
    for version in (1, 2):
        r = describe(conn, version, endpoint_type=2)
        assert r.error_code == ErrorCode.unsupported_endpoint_type and r.brokers == ()


def test_v2_include_fenced_brokers_lists_this_broker_unfenced(conn: Connection) -> None:
    r = describe(conn, 2, include_fenced_brokers=True)
    assert r.error_code == ErrorCode.none
    assert [(b.broker_id, b.is_fenced) for b in r.brokers] == [(1, False)]


def _fake_broker(*brokers: BrokerImage, broker_epoch: int = -1) -> Any:
    image = MetadataImage(brokers={b.broker_id: b for b in brokers})
    return SimpleNamespace(image=image, node_id=1, lifecycle=SimpleNamespace(broker_epoch=broker_epoch),
                           config=SimpleNamespace(advertised_host="127.0.0.1", advertised_port=9092))


def test_fenced_brokers_are_listed_only_when_asked() -> None:
    broker = _fake_broker(BrokerImage(2, 7, "b", "h2", 9093, "r2", fenced=True),
                          BrokerImage(1, 5, "a", "h1", 9092, None, fenced=False))
    assert [(b["broker_id"], b["is_fenced"]) for b in _brokers(broker, include_fenced=False)] == [(1, False)]
    assert [(b["broker_id"], b["host"], b["rack"], b["is_fenced"]) for b in _brokers(broker, include_fenced=True)] == [
        (1, "h1", None, False), (2, "h2", "r2", True)]
    alone = _fake_broker()  # before this broker's registration lands: itself
    assert [(b["broker_id"], b["is_fenced"]) for b in _brokers(alone, include_fenced=True)] == [(1, False)]
    unregistered = _fake_broker(broker_epoch=5)  # registered, then unregistered (UnregisterBroker): none, as Kafka
    assert _brokers(unregistered, include_fenced=True) == []


def test_cluster_authorized_operations_are_kafkas_seven(conn: Connection) -> None:
    """CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE (8096), in
    DescribeCluster and Metadata alike; WRITE is not a cluster operation."""
    expected = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    assert expected == 8096
    for version in (0, 1, 2):
        r = conn.request(60, {"include_cluster_authorized_operations": True}, version=version)
        assert r.cluster_authorized_operations == expected
    for version in (8, 9, 10):
        r = conn.request(3, {"topics": [], "allow_auto_topic_creation": False,
                             "include_cluster_authorized_operations": True}, version=version)
        assert r.cluster_authorized_operations == expected
