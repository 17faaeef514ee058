"""A completed rebalance is logged once with its duration (from PreparingRebalance to the new generation),
generation and member count, and observed into samsa_group_rebalance_duration_seconds."""

from __future__ import annotations

import logging
import random

import pytest
from prometheus_client.samples import Sample

from samsa.broker.group.coordinator import GroupConfig, GroupCoordinator, JoinRequest
from samsa.broker.observability.rebalance import DURATION_METRIC, RebalanceMeter, RebalanceMetrics


def req(client: str, member_id: str = "") -> JoinRequest:
    return JoinRequest("g", member_id, None, client, "/127.0.0.1", 10_000, 30_000, "consumer",
                       (("range", b"m"),), require_known_member_id=False)


def test_rebalance_is_logged_and_observed_with_its_duration(caplog: pytest.LogCaptureFixture) -> None:
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=3000), random.Random(7))
    with caplog.at_level(logging.INFO, logger="samsa.broker.group.coordinator"):
        pa = c.join_group(req("a"), 1000)  # Empty -> PreparingRebalance at 1000
        pb = c.join_group(req("b"), 2000)
        c.tick(4000)  # a member joined during the initial delay: another delay
        c.tick(7000)
    assert pa.done and pb.done
    done = [r.getMessage() for r in caplog.records if "rebalance completed" in r.getMessage()]
    assert len(done) == 1, done
    assert "group g: rebalance completed in 6000 ms: generation 1 (range) with 2 member(s)" in done[0]
    assert c.rebalances.count == 1


def _samples(metrics: RebalanceMetrics) -> dict[tuple[str, str], float]:
    (family,) = metrics.families()
    assert family.name == DURATION_METRIC and family.type == "histogram"
    out: dict[tuple[str, str], float] = {}
    for s in family.samples:
        assert isinstance(s, Sample)
        out[(s.name, s.labels.get("le", ""))] = s.value
    return out


def test_histogram_buckets_are_cumulative_in_seconds() -> None:
    metrics = RebalanceMetrics()
    for ms in (5, 40, 3000, 400_000):
        metrics.observe(ms)
    samples = _samples(metrics)
    assert samples[(DURATION_METRIC + "_bucket", "0.01")] == 1
    assert samples[(DURATION_METRIC + "_bucket", "0.05")] == 2
    assert samples[(DURATION_METRIC + "_bucket", "5.0")] == 3
    assert samples[(DURATION_METRIC + "_bucket", "300.0")] == 3
    assert samples[(DURATION_METRIC + "_bucket", "+Inf")] == 4
    assert samples[(DURATION_METRIC + "_count", "")] == 4
    assert samples[(DURATION_METRIC + "_sum", "")] == pytest.approx(403.045)


def test_meter_rate_is_over_the_last_minute() -> None:
    now = [1000.0]
    meter = RebalanceMeter(clock=lambda: now[0])
    assert (meter.count, meter.rate()) == (0, 0.0)
    for _ in range(3):
        meter.record()
    assert meter.rate() == pytest.approx(3 / 30)  # at least one 30 s window, as Kafka's Rate
    now[0] += 45
    meter.record()
    assert meter.rate() == pytest.approx(4 / 45)
    now[0] += 30  # the first three are over a minute old
    assert (meter.count, meter.rate()) == (4, pytest.approx(1 / 60))
