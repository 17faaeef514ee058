"""`samsa serve --config server.properties` honours Kafka's broker keys; SIGTERM shuts down cleanly."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def test_server_properties_keys_apply(samsa_factory: Any, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        "num.partitions=4\n"
        "auto.create.topics.enable=false\n"
        "log.retention.hours=2\n"
        "log.segment.bytes=1048576\n"
        "message.max.bytes=5000\n"
    )
    s = samsa_factory(extra_args=("--config", str(props)))
    s.start()
    with s.connect() as conn:
        r = conn.request(3, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": True,
                             "include_topic_authorized_operations": False})
        assert r.topics[0].error_code.value == 3  # auto-creation is off
        r = conn.request(19, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                          "assignments": (), "configs": ()}], "timeout": 1000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0 and r.topics[0].num_partitions == 4
        r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": False})
        configs = {c.name: c for c in r.results[0].configs}
        assert configs["retention.ms"].value == str(2 * 3600 * 1000)
        assert configs["retention.ms"].config_source == 4  # STATIC_BROKER_CONFIG
        assert configs["segment.bytes"].value == "1048576"
        assert configs["max.message.bytes"].value == "5000"
        assert configs["cleanup.policy"].config_source == 5  # DEFAULT_CONFIG


def test_sigterm_shuts_down_cleanly_and_checkpoints(samsa_factory: Any) -> None:
    from samsa.kproto.records import encode_batch

    s = samsa_factory()
    s.start()
    with s.connect() as conn:
        conn.request(19, {"topics": [{"name": "ck", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": False})
        batch = encode_batch([(None, b"x", ())], timestamp_ms=int(time.time() * 1000))
        conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 1000,
                         "topic_data": [{"name": "ck", "partition_data": [{"index": 0, "records": batch}]}]})
    started = time.monotonic()
    assert s.stop() == 0
    assert time.monotonic() - started < 15
    text = (s.data_dir / "replication-offset-checkpoint").read_text().split("\n")
    assert "ck 0 1" in text
    assert (s.data_dir / "recovery-point-offset-checkpoint").exists()
    assert "clean" in s.log_tail().lower() or "shut down" in s.log_tail().lower()
