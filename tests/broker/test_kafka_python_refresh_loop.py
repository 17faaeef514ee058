"""The chaos harness's workaround for a kafka-python 3.0.12 bug (tests/chaos/harness.py revive_metadata_refresh):
a metadata refresh that fails with an OSError (ConnectionResetError, as when a killed broker resets a connection
being set up) ends the client's refresh loop for good, so it never learns of a moved leader again. These tests
pin the bug (so the workaround can go once kafka-python fixes it: the first test then fails) and check that the
workaround brings refreshes back, with a real producer against a real broker."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from kafka import KafkaProducer  # type: ignore[import-untyped]
from kafka.future import Future  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `import chaos.harness` from tests/
from chaos.harness import revive_metadata_refresh

WAIT_S = 10.0


def _refreshed_since(cluster: Any, since_ms: float, wait_s: float) -> bool:
    """Whether a metadata refresh succeeds after `since_ms`, asking for one and polling up to `wait_s`."""
    cluster.request_update()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if cluster._last_successful_refresh_ms > since_ms:
            return True
        time.sleep(0.05)
    return False


def _producer_with_one_reset(bootstrap: str) -> tuple[Any, Any]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, metadata_max_age_ms=500)
    producer.send("refresh-loop", b"x").get(timeout=WAIT_S)
    cluster = producer._metadata
    manager = cluster._manager
    send = manager.send
    failed = []

    def send_failing_once(request: Any, node_id: Any = None, **kwargs: Any) -> Any:
        if not failed:
            failed.append(request)
            return Future().failure(ConnectionResetError(104, "Connection reset by peer"))
        return send(request, node_id, **kwargs)

    manager.send = send_failing_once
    cluster.request_update()
    deadline = time.monotonic() + WAIT_S
    while not failed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert failed, "no metadata refresh was attempted"
    return producer, cluster


def test_kafka_python_refresh_loop_ends_on_a_connection_reset(samsa: Any) -> None:
    producer, cluster = _producer_with_one_reset(samsa.bootstrap)
    try:
        since = cluster._last_successful_refresh_ms
        # metadata_max_age_ms is 0.5 s and an update is asked for: a live loop refreshes at once
        assert not _refreshed_since(cluster, since, wait_s=3.0), \
            "kafka-python refreshed after the reset: its bug is fixed, and revive_metadata_refresh can go"
        assert cluster._refresh_loop_future.is_done
    finally:
        producer.close(timeout=2)


def test_revive_metadata_refresh_restarts_the_loop(samsa: Any) -> None:
    producer, cluster = _producer_with_one_reset(samsa.bootstrap)
    try:
        deadline = time.monotonic() + WAIT_S
        while not cluster._refresh_loop_future.is_done and time.monotonic() < deadline:
            time.sleep(0.05)
        since = cluster._last_successful_refresh_ms
        assert revive_metadata_refresh(cluster)
        assert _refreshed_since(cluster, since, wait_s=WAIT_S)
        assert not revive_metadata_refresh(cluster)  # a live loop is left alone
    finally:
        producer.close(timeout=2)
