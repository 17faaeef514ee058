"""Fixtures for real-process cluster tests: three `samsa serve` voters on free loopback ports, each with
its data in the test's tmp dir, always stopped by PID in teardown (paused ones get SIGCONT first)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_harness import Cluster


@pytest.fixture
def cluster_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Cluster]]:
    """`cluster_factory(nodes=3, overrides=("KEY=VALUE", ...))` starts a cluster and waits until every
    node lists every broker."""
    started: list[Cluster] = []

    def make(nodes: int = 3, overrides: Sequence[str] = ()) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster-{len(started)}", nodes, overrides)
        started.append(cluster)
        took = cluster.up()
        print(f"{nodes} nodes up in {took:.1f} s: {cluster.bootstrap_servers}")
        return cluster

    yield make
    failed = getattr(request.node, "rep_call", None)
    for cluster in started:
        if failed is not None and failed.failed:
            print(cluster.log_tails())
        cluster.stop()


@pytest.fixture
def cluster(cluster_factory: Callable[..., Cluster]) -> Cluster:
    return cluster_factory()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
