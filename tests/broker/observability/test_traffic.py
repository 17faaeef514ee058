"""Traffic counters against what was actually sent through the request path (broker.server.dispatch_frame on a
broker in this process): bytes and records in per topic, bytes out after a consume, error codes per API, the
request log, and the connection's request phases."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.connection import KafkaConnection, Response
from samsa.broker.controller import TopicSpec
from samsa.broker.observability.collectors import MetricsOptions, broker_collectors, collect_all
from samsa.broker.observability.series import exposition
from samsa.broker.server import dispatch_frame
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import decode_response, encode_request, request_class
from samsa.kproto.records import encode_batch

PRODUCE_VERSION = 9
FETCH_VERSION = 12  # names topics (v13+ by id)
T0_MS = 1_700_000_000_000

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(overrides={"offsets.topic.num.partitions": "1"}, data_dir=tmp_path / "data"))
    yield b
    b.close()


def create(broker: Broker, topic: str, partitions: int = 1, configs: dict[str, str | None] | None = None) -> None:
    (result,) = broker.controller.create_topics([TopicSpec(topic, partitions, 1, configs=configs or {})],
                                                validate_only=False).result()
    assert result.error_code == ErrorCode.none


def call(broker: Broker, api_key: int, version: int, values: dict[str, Any], correlation_id: int = 7) -> Any:
    """One request through the server's dispatch, answered at once; its decoded response (None if none)."""
    frame = encode_request(build(request_class(api_key, version), values), correlation_id=correlation_id,
                           client_id="traffic-test")
    answer = dispatch_frame(broker, frame[4:], "127.0.0.1", connection="127.0.0.1:40000")
    assert not isinstance(answer, Awaitable), "expected an answer at once"
    if answer is None:
        return None
    data = answer if isinstance(answer, bytes) else b"".join(bytes(p) for p in answer)
    correlation, response = decode_response(api_key, version, data[4:])
    assert correlation == correlation_id
    return response


def produce(broker: Broker, topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    return call(broker, 0, PRODUCE_VERSION, {"transactional_id": None, "acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})


def fetch(broker: Broker, topic: str, partition: int, offset: int, replica_id: int = -1,
          version: int = FETCH_VERSION) -> Any:
    return call(broker, 1, version, {
        "replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                    "partition_max_bytes": 1 << 20}]}]})


def scrape(broker: Broker, options: MetricsOptions | None = None) -> Samples:
    text = exposition(collect_all(broker_collectors(broker, options=options or MetricsOptions()))).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def batch(count: int, value_bytes: int, timestamp_ms: int = T0_MS) -> bytes:
    return encode_batch([(None, bytes(value_bytes), ()) for _ in range(count)], timestamp_ms=timestamp_ms)


BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
ERRORS = "kafka_network_requestmetrics_errors_total"


def test_bytes_and_records_in_count_the_batches_appended(broker: Broker) -> None:
    """N records of S bytes in batches: messages in advances by N, bytes in by the batches' sizes (Kafka's
    BytesInPerSec counts the producers' record batch bytes: S per record plus the batch and record framing)."""
    create(broker, "in", 2)
    create(broker, "other")
    before = scrape(broker)
    batches = [batch(10, 100), batch(5, 100), batch(1, 100)]  # N = 16 records of S = 100 bytes
    for i, records in enumerate(batches):
        r = produce(broker, "in", i % 2, records)
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    after = scrape(broker)
    n, s = 16, 100
    assert value(after, MESSAGES_IN, topic="in") - value(before, MESSAGES_IN, topic="in") == n
    appended = sum(len(b) for b in batches)
    assert value(after, BYTES_IN, topic="in") - value(before, BYTES_IN, topic="in") == appended
    assert n * s < appended < n * s + 200 * len(batches)  # the values, plus framing: ~N·S
    # The log holds exactly those bytes: what was counted is what was appended.
    assert sum(p.log.size_bytes for p in broker.replica_manager.partitions() if p.topic == "in") == appended
    assert value(after, BYTES_IN, topic="other") == 0
    # The all-topics series (no topic label) includes them.
    assert value(after, BYTES_IN, topic="") - value(before, BYTES_IN, topic="") == appended
    assert value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic="in") == 3


def test_bytes_in_are_the_producers_batch_even_when_the_broker_recompresses_it(broker: Broker) -> None:
    """As Kafka (records.sizeInBytes of the request): the batch as it came, not as compression.type rewrote it."""
    create(broker, "gz", configs={"compression.type": "gzip"})
    records = encode_batch([(None, b"a" * 1000, ()) for _ in range(10)], timestamp_ms=T0_MS)  # uncompressed
    r = produce(broker, "gz", 0, records)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    samples = scrape(broker)
    assert value(samples, BYTES_IN, topic="gz") == len(records)
    assert value(samples, MESSAGES_IN, topic="gz") == 10
    logged = sum(p.log.size_bytes for p in broker.replica_manager.partitions() if p.topic == "gz")
    assert 0 < logged < len(records)  # what the log holds is the gzip'd batch


def test_an_idempotent_retry_appends_and_counts_nothing(broker: Broker) -> None:
    create(broker, "retry")
    records = encode_batch([(None, b"x" * 50, ())], timestamp_ms=T0_MS, producer_id=1000, producer_epoch=0,
                           base_sequence=0)
    produce(broker, "retry", 0, records)
    first = scrape(broker)
    r = produce(broker, "retry", 0, records)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none  # the original offset, again
    again = scrape(broker)
    assert value(again, MESSAGES_IN, topic="retry") == value(first, MESSAGES_IN, topic="retry") == 1
    assert value(again, BYTES_IN, topic="retry") == value(first, BYTES_IN, topic="retry") == len(records)


def test_bytes_out_advance_after_a_consume_and_not_for_a_follower(broker: Broker) -> None:
    create(broker, "out")
    records = batch(20, 64)
    produce(broker, "out", 0, records)
    before = scrape(broker)
    r = fetch(broker, "out", 0, 0)
    sent = r.responses[0].partitions[0].records
    assert sent and len(sent) == len(records)
    after = scrape(broker)
    assert value(after, BYTES_OUT, topic="out") - value(before, BYTES_OUT, topic="out") == len(records)
    assert value(after, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="out") == 1
    # v13+ names the topic by id: counted under its name all the same.
    topic_id = uuid.UUID(broker.image.topics_by_name["out"].topic_id)
    r = call(broker, 1, 13, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
        "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                          "partition_max_bytes": 1 << 20}]}]})
    assert len(r.responses[0].partitions[0].records) == len(records)
    after = scrape(broker)
    assert value(after, BYTES_OUT, topic="out") - value(before, BYTES_OUT, topic="out") == 2 * len(records)
    assert value(after, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="out") == 2
    # An empty read sends nothing and counts no bytes.
    fetch(broker, "out", 0, 20)
    assert value(scrape(broker), BYTES_OUT, topic="out") == value(after, BYTES_OUT, topic="out")
    # A replica's fetch (replica_id >= 0) is replication traffic: not in bytes out. Replica 2 is not one
    # of this partition's replicas, so it is answered with an error and no bytes.
    replicated = value(after, "kafka_server_brokertopicmetrics_replicationbytesout_total")
    fetch(broker, "out", 0, 0, replica_id=2)
    later = scrape(broker)
    assert value(later, BYTES_OUT, topic="out") == value(after, BYTES_OUT, topic="out")
    assert value(later, "kafka_server_brokertopicmetrics_replicationbytesout_total") == replicated


def test_bytes_out_at_every_fetch_version_that_names_topics(broker: Broker) -> None:
    """v4-v6 answer without a top-level error code (v7 added it with fetch sessions): counted all the same."""
    create(broker, "versions")
    records = batch(3, 16)
    produce(broker, "versions", 0, records)
    before = value(scrape(broker), BYTES_OUT, topic="versions")
    for version in range(4, 13):
        r = fetch(broker, "versions", 0, 0, version=version)
        assert len(r.responses[0].partitions[0].records) == len(records), version
    assert value(scrape(broker), BYTES_OUT, topic="versions") - before == 9 * len(records)


def test_error_codes_per_api(broker: Broker) -> None:
    create(broker, "errs")
    before = scrape(broker)
    r = produce(broker, "errs", 5, batch(1, 10))  # no partition 5
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
    r = fetch(broker, "errs", 0, 99)  # past the log end
    assert r.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    produce(broker, "errs", 0, batch(1, 10))
    after = scrape(broker)

    def delta(request: str, error: str) -> float:
        return value(after, ERRORS, request=request, error=error) - value(before, ERRORS, request=request,
                                                                             error=error)

    assert delta("Produce", "UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert delta("Produce", "NONE") == 1
    assert delta("Fetch", "OFFSET_OUT_OF_RANGE") == 1
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="errs") == 1
    assert value(after, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic="errs") == 1
    # An API with a top-level error code: CreateTopics answers per topic, DescribeGroups per group, but
    # FindCoordinator v3 has one error code for the response.
    call(broker, 10, 3, {"key": "", "key_type": 5})  # an unknown key type
    errors = {k[1]: v for k, v in scrape(broker).items() if k[0] == ERRORS and ("request", "FindCoordinator") in k[1]}
    assert sum(errors.values()) == 1
    assert (("error", "NONE"), ("request", "FindCoordinator")) not in errors


def test_per_topic_series_follow_the_per_partition_switch(broker: Broker) -> None:
    create(broker, "quiet")
    produce(broker, "quiet", 0, batch(3, 10))
    samples = scrape(broker, MetricsOptions(per_partition=False, per_group=True))
    assert value(samples, MESSAGES_IN, topic="") == 3
    assert not any(k[0] == MESSAGES_IN and ("topic", "quiet") in k[1] for k in samples)


def test_deleted_topics_lose_their_series_but_not_the_totals(broker: Broker) -> None:
    create(broker, "gone")
    produce(broker, "gone", 0, batch(4, 10))
    assert value(scrape(broker), MESSAGES_IN, topic="gone") == 4
    ((_name, _id, error),) = broker.controller.delete_topics(["gone"]).result()
    assert error == ErrorCode.none
    samples = scrape(broker)
    assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "gone"),)) not in samples
    assert value(samples, MESSAGES_IN, topic="") == 4


def test_isr_and_raft_commit_families_are_exported(broker: Broker) -> None:
    samples = scrape(broker)
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 0
    # Creating a topic writes to the metadata log through the quorum: one commit more.
    before = value(samples, "kafka_server_raftmetrics_commit_latency_seconds_count")
    create(broker, "committed")
    assert value(scrape(broker), "kafka_server_raftmetrics_commit_latency_seconds_count") == before + 1


def test_the_request_log_is_off_by_default_and_names_each_request(broker: Broker,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    create(broker, "logged")
    caplog.set_level(logging.INFO, logger="samsa.request")
    produce(broker, "logged", 0, batch(1, 10))
    assert not [r for r in caplog.records if r.name == "samsa.request"]
    # Dynamic: a cluster-wide default set through the metadata (as AlterConfigs would) turns it on.
    broker.config = broker.config.with_dynamic({"samsa.request.log.enable": "true"}, {})
    produce(broker, "logged", 0, batch(1, 10))
    produce(broker, "logged", 3, batch(1, 10))
    lines = [r.getMessage() for r in caplog.records if r.name == "samsa.request"]
    assert len(lines) == 2
    ok, failed = lines
    for line in lines:
        assert "api=Produce" in line and f"version={PRODUCE_VERSION}" in line
        assert 'client_id="traffic-test"' in line and "principal=User:ANONYMOUS" in line
        assert "connection=127.0.0.1:40000" in line and "latency_ms=" in line
    assert ok.endswith("errors=NONE")
    assert failed.endswith("errors=UNKNOWN_TOPIC_OR_PARTITION")


# --- the connection's request phases ----------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.phases: list[tuple[int, float, float, float, float]] = []

    def record_phases(self, api_key: int, queue_s: float, local_s: float, remote_s: float, send_s: float) -> None:
        self.phases.append((api_key, queue_s, local_s, remote_s, send_s))


class Transport:
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.7", 5555) if name == "peername" else default

    def write(self, data: bytes) -> None:
        pass

    def writelines(self, parts: list[bytes]) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def frame(api_key: int, body: bytes) -> bytes:
    payload = struct.pack(">h", api_key) + body
    return struct.pack(">i", len(payload)) + payload


def test_phases_are_recorded_per_request_with_the_wait_as_remote_time() -> None:
    wait_s = 0.05

    async def main() -> Recorder:
        recorder = Recorder()

        async def slow() -> Response:
            await asyncio.sleep(wait_s)
            return b"\x00\x00\x00\x01w"

        def dispatch(payload: bytes, client_host: str) -> Response | Awaitable[Response]:
            if payload[2:] == b"wait":
                return slow()
            return None if payload[2:] == b"none" else b"\x00\x00\x00\x01a"

        conn = KafkaConnection(dispatch, max_frame_bytes=1 << 20, registry=set(), request_metrics=recorder)
        conn.connection_made(Transport())  # type: ignore[arg-type]
        assert conn.peer == "10.0.0.7:5555"
        conn.data_received(frame(3, b"now") + frame(0, b"none") + frame(1, b"wait") + frame(18, b"after"))
        assert [p[0] for p in recorder.phases] == [0, 3]  # acks=0-like at once; the answer once written
        deadline = time.monotonic() + 10
        while len(recorder.phases) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return recorder

    phases = asyncio.run(main()).phases
    assert [p[0] for p in phases] == [0, 3, 1, 18]
    for _key, queue_s, local_s, remote_s, send_s in phases:
        assert min(queue_s, local_s, remote_s, send_s) >= 0
    assert phases[0][3] == phases[1][3] == phases[3][3] == 0.0  # answered without waiting
    assert phases[2][3] >= wait_s * 0.8  # the Fetch-like request's wait is its remote time
    # The request read with the waiting one sat in the buffer while the connection was muted: queue time.
    assert phases[3][1] >= wait_s * 0.8


def test_isr_changes_this_leader_asked_for_are_counted_once_committed(broker: Broker) -> None:
    """The leader's AlterPartition outcome arrives as a new partition image (ReplicaManager._update): a
    committed shrink or expansion it asked for counts once; a change it did not ask for does not."""
    import dataclasses

    create(broker, "isr")
    replicas = broker.replica_manager
    p = replicas.get_partition("isr", 0)
    assert p is not None
    image = broker.image.topics_by_name["isr"].partitions[0]
    node = broker.node_id
    wide = dataclasses.replace(image, replicas=(node, 99), isr=(node, 99))
    replicas._update(p, wide)  # a two-replica partition, both in sync
    p.pending_isr = (node,)  # the leader asked to drop the lagging follower
    narrow = dataclasses.replace(wide, isr=(node,), partition_epoch=wide.partition_epoch + 1)
    replicas._update(p, narrow)
    replicas._update(p, narrow)  # the same image again: nothing new
    p.pending_isr = (99, node)  # it caught up: the leader asked to add it back (any order)
    replicas._update(p, dataclasses.replace(narrow, isr=(node, 99), partition_epoch=narrow.partition_epoch + 1))
    # The controller shrinks the ISR on its own (a fenced follower): not this leader's AlterPartition.
    p.pending_isr = None
    replicas._update(p, dataclasses.replace(narrow, partition_epoch=narrow.partition_epoch + 2))
    samples = scrape(broker)
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 1
