"""ObservabilityBroker: what the metrics collectors and the health checks read of their broker.

A typing.Protocol like GroupBroker, TxnBroker and LifecycleBroker: the observability services take this
narrow view, not the whole Broker (samsa.broker.broker.Broker is one), so they can be built over a fake
in a test and their imports do not reach back into the broker module. Everything here is read, at
scrape or health-check time; nothing is called that changes the broker.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio

    from samsa.broker.config import BrokerConfig
    from samsa.broker.connection import KafkaConnection
    from samsa.broker.group.service import GroupService
    from samsa.broker.lifecycle import BrokerLifecycle
    from samsa.broker.log_cleaner import LogCleaner
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.metadata.quorum import MetadataQuorum
    from samsa.broker.observability.request_metrics import RequestMetrics
    from samsa.broker.replica_manager import ReplicaManager
    from samsa.broker.topic_settings import TopicSettings
    from samsa.storage.log_manager import LogManager

__all__ = ["ObservabilityBroker"]


class ObservabilityBroker(Protocol):
    """The broker state /metrics and /health/ready report on."""

    @property
    def node_id(self) -> int: ...
    @property
    def roles(self) -> frozenset[str]: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def ready(self) -> asyncio.Event: ...  # the image has caught up: clients may be served
    @property
    def image(self) -> MetadataImage: ...
    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def is_active_controller(self) -> bool: ...
    @property
    def lifecycle(self) -> BrokerLifecycle: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def log_cleaner(self) -> LogCleaner: ...
    @property
    def groups(self) -> GroupService: ...
    @property
    def request_metrics(self) -> RequestMetrics: ...
    @property
    def connections(self) -> Collection[KafkaConnection]: ...
    def topic_settings(self, topic: str) -> TopicSettings: ...
