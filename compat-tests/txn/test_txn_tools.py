"""kafka-transactions.sh (the reference Kafka's TransactionsCommand) against Samsa: list, describe, describe-producers
and a forced abort of a hanging transaction (issue 5's operator APIs: ListTransactions, DescribeTransactions,
DescribeProducers, WriteTxnMarkers)."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oracle_fixture import QUICK_JVM_OPTS, run_kafka_tool
from samsa_fixture import SamsaProcess, start_samsa

from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"


@pytest.fixture(scope="module")
def samsa() -> Iterator[SamsaProcess]:
    s = start_samsa(ready_timeout=90.0)
    try:
        yield s
    finally:
        s.stop()


def tool(samsa: SamsaProcess, *args: str) -> str:
    return run_kafka_tool(TRANSACTIONS, "--bootstrap-server", samsa.bootstrap, *args, jvm_opts=QUICK_JVM_OPTS).stdout


@pytest.mark.samsa
def test_kafka_transactions_tool(samsa: SamsaProcess) -> None:
    topic, txn_id = f"tt-{uuid.uuid4().hex[:8]}", f"tool-{uuid.uuid4().hex[:8]}"
    with Connection("127.0.0.1", samsa.port) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                              "timeout": 5000})
        assert r.topics[0].error_code.value == 0
        # COORDINATOR_NOT_AVAILABLE until __transaction_state's creation is committed (Kafka's answer too).
        for _ in range(200):
            if conn.request(10, {"key": txn_id, "key_type": 1}, version=3).error_code.value == 0:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no transaction coordinator")
        init = conn.request(22, {"transactional_id": txn_id, "transaction_timeout": 600000, "producer_id": -1,
                                 "producer_epoch": -1}, version=4)
        pid = init.producer_id
        r = conn.request(24, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                              "v3_and_below_producer_epoch": 0,
                              "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}, version=3)
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value == 0
        batch = encode_batch([(None, b"hanging", ())], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                             producer_epoch=0, base_sequence=0, is_transactional=True)
        r = conn.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 5000,
                             "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert r.responses[0].partition_responses[0].error_code.value == 0

    listed = tool(samsa, "list")
    assert any(txn_id in line and str(pid) in line and "Ongoing" in line for line in listed.splitlines()), listed
    described = tool(samsa, "describe", "--transactional-id", txn_id)
    assert "Ongoing" in described and f"{topic}-0" in described and str(pid) in described, described
    producers = tool(samsa, "describe-producers", "--topic", topic, "--partition", "0")
    line = next(ln for ln in producers.splitlines() if ln.split() and ln.split()[0] == str(pid))
    assert line.split()[-1] == "0", producers  # CurrentTransactionStartOffset
    # The operator's escape hatch for a hanging transaction: WriteTxnMarkers(abort) to the partition.
    tool(samsa, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    producers = tool(samsa, "describe-producers", "--topic", topic, "--partition", "0")
    line = next(ln for ln in producers.splitlines() if ln.split() and ln.split()[0] == str(pid))
    assert line.split()[-1] == "None", producers
