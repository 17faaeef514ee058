"""Fixtures for compat tests: the reference Kafka ("kafka") and a Samsa process ("samsa").

A test that takes the ``broker`` fixture runs once per target, ``broker[kafka]`` and
``broker[samsa]``, marked ``kafka`` / ``samsa``: ``pytest compat-tests -m kafka`` runs the tests
against Apache Kafka only (the proof that the test programs are right), ``-m samsa`` against
Samsa only. ``broker`` is a ``Target`` with ``.name`` and ``.bootstrap`` ("127.0.0.1:PORT").

One broker of each kind per session (topics are unique per test). A Samsa process that died is
reported (with its log tail) by the test during which it died, and restarted for the next test.
Other fixtures: ``kafka_oracle`` (the single-node ``oracle_fixture.KafkaCluster``),
``kafka_oracle_3`` (three nodes), ``samsa_server`` (the ``samsa_fixture.SamsaProcess``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compat_targets import TARGETS, Target
from oracle_fixture import KafkaCluster, kafka_cluster
from samsa_fixture import SamsaError, SamsaProcess, start_samsa


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: runs against the reference the reference Apache Kafka (oracle)")
    config.addinivalue_line("markers", "samsa: runs against a Samsa broker process")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames and not any(
        "broker" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")
    ):
        metafunc.parametrize(
            "broker",
            [pytest.param(t, marks=getattr(pytest.mark, t), id=t) for t in TARGETS],
            indirect=True,
        )


@pytest.fixture(scope="session")
def kafka_oracle() -> Iterator[KafkaCluster]:
    with kafka_cluster(1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_oracle_3() -> Iterator[KafkaCluster]:
    with kafka_cluster(3) as cluster:
        yield cluster


class _SamsaHolder:
    """One Samsa process for the session, restarted (fresh data dir) if it died."""

    def __init__(self) -> None:
        self.proc: SamsaProcess | None = None
        self.start_error: SamsaError | None = None

    def get(self) -> SamsaProcess:
        if self.start_error is not None:  # do not wait for a broken start again in every test
            raise SamsaError(f"(as in an earlier test) {self.start_error}")
        if self.proc is not None and not self.proc.alive():
            self.proc.stop()
            self.proc = None
        if self.proc is None:
            try:
                # the oracle's server.properties sets the same (the compaction scenarios wait for cleanings)
                self.proc = start_samsa(extra_args=("--override", "log.cleaner.backoff.ms=1000"))
            except SamsaError as e:
                self.start_error = e
                raise
        return self.proc

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


@pytest.fixture(scope="session")
def _samsa_holder() -> Iterator[_SamsaHolder]:
    holder = _SamsaHolder()
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture
def samsa_server(_samsa_holder: _SamsaHolder) -> Iterator[SamsaProcess]:
    error = None
    try:
        proc = _samsa_holder.get()
    except SamsaError as e:
        error = str(e)
    if error is not None:
        pytest.fail(error, pytrace=False)
    yield proc
    if not proc.alive():
        pytest.fail(f"samsa died during this test (exit code {proc.proc.returncode})\n{proc.log_tail()}")


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Iterator[Target]:
    name = request.param
    if name == "kafka":
        cluster: KafkaCluster = request.getfixturevalue("kafka_oracle")
        cluster.check_alive()
        yield Target("kafka", cluster.bootstrap)
        cluster.check_alive()
    elif name == "samsa":
        proc: SamsaProcess = request.getfixturevalue("samsa_server")
        yield Target("samsa", proc.bootstrap)
    else:
        raise ValueError(f"unknown target {name!r}; expected one of {TARGETS}")
