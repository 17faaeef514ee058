"""The pytest plugin as a user meets it: pytester runs a user's test files in a subprocess, where the plugin
comes from the installed `pytest11` entry point alone (no conftest, no -p)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.timeout(240)

BROKER_IS_REAL = """
import socket, time
from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch

def test_produce_and_fetch(samsa_broker, samsa_topic):
    host, _, port = samsa_broker.bootstrap_servers.rpartition(":")
    assert host == "127.0.0.1"
    with Connection(host, int(port)) as conn:
        batch = encode_batch([(b"k", b"hello", ())], timestamp_ms=int(time.time() * 1000))
        r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
            {"name": samsa_topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert r.responses[0].partition_responses[0].error_code.value == 0
        f = conn.request(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": samsa_topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                             "partition_max_bytes": 1 << 20}]}],
                             "forgotten_topics_data": (), "rack_id": ""}, version=12)
        records = f.responses[0].partitions[0].records
        assert [r.value for _, rs in decode_batches(records, max_decompressed_bytes=1 << 20) for r in rs] == [b"hello"]
    print("BOOTSTRAP", samsa_broker.bootstrap_servers, "PID", samsa_broker.pid)

def test_topics_are_fresh_per_test(samsa_topic):
    print("TOPIC", samsa_topic)

def test_topics_are_fresh_per_test_again(samsa_topic):
    print("TOPIC", samsa_topic)

@__import__("pytest").mark.samsa_topic(partitions=3)
def test_marker_sets_partitions(samsa_broker, samsa_topic):
    host, _, port = samsa_broker.bootstrap_servers.rpartition(":")
    with Connection(host, int(port)) as conn:
        m = conn.request(3, {"topics": [{"name": samsa_topic}], "allow_auto_topic_creation": False,
                             "include_topic_authorized_operations": False})
        assert len(m.topics[0].partitions) == 3
"""


def _pids_gone(pids: list[int]) -> bool:
    from samsa.broker.launcher import pid_alive

    return not any(pid_alive(pid) for pid in pids)


def test_fixtures_give_a_real_broker_fresh_topics_and_stop_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=BROKER_IS_REAL)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    topics = re.findall(r"TOPIC (\S+)", out)
    assert len(topics) == 2 and len(set(topics)) == 2
    pids = [int(p) for p in re.findall(r"PID (\d+)", out)]
    assert pids and _pids_gone(pids)  # stopped by PID when the session ended


def test_a_failing_test_gets_the_broker_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fails="""
def test_fails(samsa_broker):
    assert samsa_broker.bootstrap_servers == "nowhere"
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "samsa broker 127.0.0.1:" in out and "log" in out
    assert "ready on 127.0.0.1" in out  # a line of the broker's own log


def test_one_broker_per_xdist_worker(pytester: pytest.Pytester) -> None:
    # 8 tests on 2 workers: xdist's load scheduling hands each worker a first chunk before any test runs,
    # so both workers run tests, and each must have started its own broker (its own port and PID).
    pytester.makepyfile(test_workers="""
import os
import pytest

@pytest.mark.parametrize("n", range(8))
def test_worker(samsa_broker, samsa_topic, n):
    with open(os.environ["SAMSA_PLUGIN_OUT"], "a") as f:
        f.write(f"{os.environ['PYTEST_XDIST_WORKER']} {samsa_broker.bootstrap_servers} {samsa_broker.pid} "
                f"{samsa_topic}\\n")
""")
    out_file = pytester.path / "workers.txt"
    pytester._monkeypatch.setenv("SAMSA_PLUGIN_OUT", str(out_file))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "load", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=8)
    rows = [line.split() for line in out_file.read_text().splitlines()]
    assert len(rows) == 8 and len({topic for *_, topic in rows}) == 8
    by_worker: dict[str, set[tuple[str, str]]] = {}
    for worker, bootstrap, pid, _topic in rows:
        by_worker.setdefault(worker, set()).add((bootstrap, pid))
    assert sorted(by_worker) == ["gw0", "gw1"]
    # every worker used exactly one broker all session...
    assert all(len(brokers) == 1 for brokers in by_worker.values()), by_worker
    (address0, pid0), = by_worker["gw0"]
    (address1, pid1), = by_worker["gw1"]
    # ...and not the other worker's: two processes on two loopback ports
    host0, _, port0 = address0.rpartition(":")
    host1, _, port1 = address1.rpartition(":")
    assert host0 == host1 == "127.0.0.1"
    assert port0 != port1 and pid0 != pid1
    assert _pids_gone([int(pid0), int(pid1)])  # each worker stopped its own at the end of its session


def test_cluster_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsamsa_cluster_nodes = 3\n")
    pytester.makepyfile(test_cluster="""
from samsa.broker.client import Connection

def test_three_brokers(samsa_cluster):
    addresses = samsa_cluster.bootstrap_servers.split(",")
    assert len(addresses) == 3
    for address in addresses:
        host, _, port = address.rpartition(":")
        with Connection(host, int(port)) as conn:
            m = conn.request(3, {"topics": [], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
            assert sorted(b.node_id for b in m.brokers) == [1, 2, 3]
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_failing_test_gets_every_cluster_nodes_log(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsamsa_cluster_nodes = 2\n")
    pytester.makepyfile(test_cluster_fails="""
def test_fails(samsa_cluster):
    assert samsa_cluster.bootstrap_servers == "nowhere"

def test_passes(samsa_cluster):
    assert len(samsa_cluster.bootstrap_servers.split(",")) == 2
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    sections = re.findall(r"samsa cluster node (\d) (127\.0\.0\.1:\d+) \(pid \d+\) log", out)
    assert sorted(node for node, _ in sections) == ["1", "2"]  # once each: only the failing test has them
    assert len({address for _, address in sections}) == 2
    assert out.count("Samsa broker 1 ready on") >= 1 and out.count("Samsa broker 2 ready on") >= 1  # their own logs
