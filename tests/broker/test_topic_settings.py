"""Broker.topic_settings: a topic's effective configs parsed once per (metadata image, broker config), the view
the acks=all paths read min.insync.replicas from. A topic override set by IncrementalAlterConfigs and a
dynamic broker default are both seen, and the produce path refuses acks=all by the parsed value (requests go
through broker.server.dispatch_frame on a broker in this process)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import TopicSpec
from samsa.broker.server import dispatch_frame
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import decode_response, encode_request, request_class
from samsa.kproto.records import encode_batch

SET, DELETE = 0, 1
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
PRODUCE_VERSION = 9
INCREMENTAL_ALTER_CONFIGS_VERSION = 1
T0_MS = 1_700_000_000_000
TIMEOUT_S = 30  # a bound on one request, never reached when it works


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(overrides={"offsets.topic.num.partitions": "1"}, data_dir=tmp_path / "data"))
    yield b
    b.close()


def create(broker: Broker, topic: str, configs: dict[str, str | None] | None = None) -> None:
    (result,) = broker.controller.create_topics([TopicSpec(topic, 1, 1, configs=configs or {})],
                                                validate_only=False).result()
    assert result.error_code == ErrorCode.none


def call(broker: Broker, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """One request through the server's dispatch, awaited if it has to wait; its decoded response."""

    async def answer() -> Any:
        frame = encode_request(build(request_class(api_key, version), values), correlation_id=7,
                               client_id="topic-settings-test")
        found = dispatch_frame(broker, frame[4:], "127.0.0.1", connection="127.0.0.1:40000")
        if inspect.isawaitable(found):
            found = await asyncio.wait_for(found, TIMEOUT_S)
        assert found is not None
        data = found if isinstance(found, bytes) else b"".join(bytes(p) for p in found)
        correlation, response = decode_response(api_key, version, data[4:])
        assert correlation == 7
        return response

    return asyncio.run(answer())


def alter(broker: Broker, resource_type: int, name: str, key: str, value: str | None) -> None:
    op = SET if value is not None else DELETE
    r = call(broker, 44, INCREMENTAL_ALTER_CONFIGS_VERSION, {"validate_only": False, "resources": [
        {"resource_type": resource_type, "resource_name": name,
         "configs": [{"name": key, "config_operation": op, "value": value}]}]})
    (answer,) = r.responses
    assert answer.error_code == ErrorCode.none, answer.error_message


def produce(broker: Broker, topic: str, acks: int) -> Any:
    records = encode_batch([(None, b"v", ())], timestamp_ms=T0_MS)
    r = call(broker, 0, PRODUCE_VERSION, {"transactional_id": None, "acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def test_a_topic_override_set_by_incremental_alter_configs_is_seen_parsed(broker: Broker) -> None:
    create(broker, "t")
    assert broker.topic_settings("t").min_insync_replicas == 1
    alter(broker, TOPIC_RESOURCE, "t", "min.insync.replicas", "3")
    settings = broker.topic_settings("t")
    assert settings.min_insync_replicas == 3
    assert settings.configs["min.insync.replicas"] == "3"  # the strings and the values agree
    assert broker.topic_config("t") is settings.configs
    assert settings.values["retention.ms"] == int(settings.configs["retention.ms"])
    alter(broker, TOPIC_RESOURCE, "t", "min.insync.replicas", None)
    assert broker.topic_settings("t").min_insync_replicas == 1


def test_a_dynamic_broker_default_is_seen_by_topics_without_an_override(broker: Broker) -> None:
    create(broker, "plain")
    create(broker, "own", {"min.insync.replicas": "1"})
    assert broker.topic_settings("plain").min_insync_replicas == 1
    alter(broker, BROKER_RESOURCE, "", "min.insync.replicas", "2")  # the cluster-wide default
    assert broker.topic_settings("plain").min_insync_replicas == 2
    assert broker.topic_settings("own").min_insync_replicas == 1  # the topic's override wins
    alter(broker, BROKER_RESOURCE, str(broker.node_id), "min.insync.replicas", "3")  # this broker's own
    assert broker.topic_settings("plain").min_insync_replicas == 3
    assert broker.topic_config("plain")["min.insync.replicas"] == "3"


def test_a_broker_config_change_under_the_same_image_rebuilds_the_cache(broker: Broker) -> None:
    """The image is set before the broker applies it (and so before self.config follows): a read in between
    fills the cache for that image with the old broker config. It must not outlive the config."""
    create(broker, "t")
    image = broker.image
    assert broker.topic_settings("t").min_insync_replicas == 1
    broker.config = broker.config.with_dynamic({"min.insync.replicas": "2"}, {})
    assert broker.image is image
    assert broker.topic_settings("t").min_insync_replicas == 2
    assert broker.topic_config("t")["min.insync.replicas"] == "2"


def test_acks_all_is_refused_with_not_enough_replicas_by_the_parsed_value(broker: Broker) -> None:
    """One broker, a topic of replication factor 1: its ISR is 1, so min.insync.replicas=2 refuses acks=all
    before anything is written (Kafka's Partition.appendRecordsToLeader), and acks=1 is taken."""
    create(broker, "strict", {"min.insync.replicas": "2"})
    partition = broker.replica_manager.get_partition("strict", 0)
    assert partition is not None
    r = produce(broker, "strict", acks=-1)
    assert r.error_code == ErrorCode.not_enough_replicas
    assert r.error_message == ("The size of the current ISR 1 is insufficient to satisfy the min.isr "
                               "requirement of 2")
    assert partition.log.log_end_offset == 0  # nothing was written
    assert produce(broker, "strict", acks=1).error_code == ErrorCode.none
    alter(broker, TOPIC_RESOURCE, "strict", "min.insync.replicas", "1")
    r = produce(broker, "strict", acks=-1)
    assert r.error_code == ErrorCode.none
    assert partition.log.log_end_offset == 2
    # A broker default of 2 refuses a topic without an override the same way.
    create(broker, "plain")
    alter(broker, BROKER_RESOURCE, "", "min.insync.replicas", "2")
    assert produce(broker, "plain", acks=-1).error_code == ErrorCode.not_enough_replicas


def _produce_idempotent(broker: Broker, topic: str, sequence: int, value: bytes) -> Any:
    records = encode_batch([(None, value, ())], timestamp_ms=T0_MS, producer_id=4000, producer_epoch=0,
                           base_sequence=sequence)
    r = call(broker, 0, PRODUCE_VERSION, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def test_a_sequence_after_one_refused_for_the_isr_is_refused_the_same_way_not_as_out_of_order(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chaos seeds 813923003, 498817000, 498817009: a leader refused a producer's pipelined sequence n with
    NOT_ENOUGH_REPLICAS, its ISR grew back, and n+1 came out of order; librdkafka then bumped its epoch and
    wrote again a batch the previous leader had written. n+1 is now refused as retriable too, and the
    producer's resend of n, n+1 in order is taken."""
    from samsa.broker.handlers import produce as handler

    create(broker, "t")
    assert _produce_idempotent(broker, "t", 0, b"s0").error_code == ErrorCode.none
    alter(broker, TOPIC_RESOURCE, "t", "min.insync.replicas", "2")  # the ISR (1) is short now
    assert _produce_idempotent(broker, "t", 1, b"s1").error_code == ErrorCode.not_enough_replicas
    alter(broker, TOPIC_RESOURCE, "t", "min.insync.replicas", "1")  # ... and enough again
    gap = _produce_idempotent(broker, "t", 2, b"s2")
    assert gap.error_code == ErrorCode.not_enough_replicas, gap
    assert "follows sequence 1" in gap.error_message
    first = _produce_idempotent(broker, "t", 1, b"s1")
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 1)
    second = _produce_idempotent(broker, "t", 2, b"s2")
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 2)
    # Once the refusal is older than REFUSED_GAP_MS, or after the gap was filled, a gap is out of order.
    assert _produce_idempotent(broker, "t", 4, b"s4").error_code == ErrorCode.out_of_order_sequence_number
    alter(broker, TOPIC_RESOURCE, "t", "min.insync.replicas", "2")
    assert _produce_idempotent(broker, "t", 3, b"s3").error_code == ErrorCode.not_enough_replicas
    alter(broker, TOPIC_RESOURCE, "t", "min.insync.replicas", "1")
    again = _produce_idempotent(broker, "t", 2, b"s2")  # a late retry of a batch before the refused one
    assert (again.error_code, again.base_offset) == (ErrorCode.none, 2)
    assert _produce_idempotent(broker, "t", 4, b"s4").error_code == ErrorCode.not_enough_replicas  # still a gap
    monkeypatch.setattr(handler, "REFUSED_GAP_MS", -1)
    assert _produce_idempotent(broker, "t", 4, b"s4").error_code == ErrorCode.out_of_order_sequence_number
