"""Samsa's /metrics against reality: consumer lag equals what Kafka's kafka-consumer-groups.sh --describe
shows, the Grafana dashboard queries only metrics Samsa exports, and a real Prometheus (Debian's
`prometheus`, `make compat-prometheus`) scrapes Samsa and a PromQL query returns the expected lag."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from oracle_fixture import QUICK_JVM_OPTS, free_port, run_kafka_tool, stop_pid
from prometheus_client.parser import text_string_to_metric_families
from samsa_fixture import SamsaProcess, samsa_broker

REPO = Path(__file__).resolve().parent.parent
DASHBOARD = REPO / "broker" / "observability" / "grafana.json"
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 3
RECORDS = 40
COMMITTED = {0: 0, 1: 17, 2: 40}  # nothing read, part read, all read


@pytest.fixture(scope="module")
def samsa_metrics() -> Iterator[tuple[SamsaProcess, int]]:
    metrics_port = free_port()
    with samsa_broker(extra_args=("--metrics-listen", f"127.0.0.1:{metrics_port}")) as s:
        yield s, metrics_port


def scrape(metrics_port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def lagging_group(bootstrap: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:6]
    topic, group = f"lag-{tag}", f"lag-g-{tag}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        for p in range(PARTITIONS):
            for i in range(RECORDS):
                producer.send(topic, value=f"{p}-{i}".encode() * 10, partition=p)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITTED.items()})
    finally:
        consumer.close()
    return topic, group


def describe_lag(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    out = run_kafka_tool(GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group,
                         jvm_opts=QUICK_JVM_OPTS, timeout=90).stdout
    lags = {}
    for line in out.splitlines():
        cols = line.split()  # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
        if len(cols) >= 6 and cols[1] == topic and cols[2].isdigit():
            lags[int(cols[2])] = int(cols[5])
    return lags


def test_lag_equals_kafka_consumer_groups_describe(samsa_metrics: tuple[SamsaProcess, int]) -> None:
    samsa, metrics_port = samsa_metrics
    topic, group = lagging_group(samsa.bootstrap)
    expected = describe_lag(samsa.bootstrap, group, topic)
    assert expected == {p: RECORDS - o for p, o in COMMITTED.items()}
    samples = scrape(metrics_port)
    for p in range(PARTITIONS):
        labels = frozenset({"group": group, "topic": topic, "partition": str(p)}.items())
        assert samples[("kafka_consumergroup_lag", labels)] == expected[p]
        assert samples[("kafka_consumergroup_current_offset", labels)] == COMMITTED[p]
        # Real clocks: the unread records were written moments ago (generous bound), the read ones are 0.
        age = samples[("samsa_consumergroup_lag_seconds", labels)]
        assert (0 <= age < 300) if expected[p] else age == 0
        assert (samples[("samsa_consumergroup_lag_bytes", labels)] > 0) == (expected[p] > 0)
        # retention.ms defaults to 7 days: the unread data has nearly all of it left.
        remaining = samples[("samsa_consumergroup_retention_remaining_seconds", labels)]
        assert (6.9 * 86400 < remaining <= 7 * 86400) if expected[p] else remaining == float("inf")


METRIC_NAME = re.compile(r"\b((?:kafka|samsa)_[a-z0-9_]+)\b")


def test_every_dashboard_panel_queries_an_exported_metric(samsa_metrics: tuple[SamsaProcess, int]) -> None:
    samsa, metrics_port = samsa_metrics
    lagging_group(samsa.bootstrap)  # so that the per-group series exist
    exported = {name for name, _ in scrape(metrics_port)}
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        names = {n for t in panel["targets"] for n in METRIC_NAME.findall(t["expr"])}
        assert names, f"panel {panel['title']!r} queries no Samsa metric"
        missing = names - exported
        assert not missing, f"panel {panel['title']!r} queries {missing}, which Samsa does not export"


def prometheus_query(port: int, query: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def test_a_real_prometheus_scrapes_the_lag(samsa_metrics: tuple[SamsaProcess, int], tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("Prometheus is not installed: run `make compat-prometheus` (Debian's prometheus package)")
    samsa, metrics_port = samsa_metrics
    topic, group = lagging_group(samsa.bootstrap)
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: samsa\n"
                      f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n")
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        query = f'sum by (partition) (kafka_consumergroup_lag{{group="{group}",topic="{topic}"}})'
        deadline = time.monotonic() + 90
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                result = prometheus_query(port, query)
            except OSError:
                result = []  # not listening yet
            if len(result) == PARTITIONS:
                break
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            time.sleep(0.5)
        got = {int(r["metric"]["partition"]): float(r["value"][1]) for r in result}
        assert got == {p: RECORDS - o for p, o in COMMITTED.items()}, (tmp_path / "prometheus.log").read_text()[-2000:]
        up = prometheus_query(port, 'up{job="samsa"}')
        assert [float(r["value"][1]) for r in up] == [1.0]
    finally:
        stop_pid(proc, timeout=10)
        log.close()
