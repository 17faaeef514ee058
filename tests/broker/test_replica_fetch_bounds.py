"""The follower's Fetch asks for replica.fetch.response.max.bytes in all and replica.fetch.max.bytes per partition."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from samsa.broker.config import BrokerConfig
from samsa.broker.replica_fetcher import ReplicaFetcherManager
from samsa.broker.replica_manager import Partition
from samsa.storage.config import LogConfig
from samsa.storage.log import Log


def _request(tmp_path: Path, overrides: dict[str, str]) -> Any:
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=int(time.time() * 1000))
    follower = Partition("t", 0, "00000000-0000-0000-0000-000000000001", log, 1, 5, (1, 2), (1, 2), 0, node_id=2)
    broker = SimpleNamespace(config=BrokerConfig(overrides=overrides), node_id=2,
                             lifecycle=SimpleNamespace(broker_epoch=7))
    return ReplicaFetcherManager(broker)._request([follower])  # type: ignore[arg-type]


def test_follower_fetch_uses_kafkas_replica_fetch_defaults(tmp_path: Path) -> None:
    request = _request(tmp_path, {})
    assert request.max_bytes == 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    assert request.topics[0].partitions[0].partition_max_bytes == 1024 * 1024  # replica.fetch.max.bytes
    assert request.replica_state.replica_id == 2


def test_follower_fetch_sizes_follow_the_broker_config(tmp_path: Path) -> None:
    request = _request(tmp_path, {"replica.fetch.response.max.bytes": "300000", "replica.fetch.max.bytes": "70000"})
    assert request.max_bytes == 300000
    assert request.topics[0].partitions[0].partition_max_bytes == 70000
