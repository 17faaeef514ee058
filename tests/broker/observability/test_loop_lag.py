"""The event-loop lag histogram: observations land in the right buckets, and a loop held by blocking
work shows up as lateness."""

from __future__ import annotations

import asyncio
import time

from samsa.broker.observability.loop_lag import LoopLagMonitor
from samsa.broker.observability.series import exposition


def test_buckets_are_cumulative() -> None:
    m = LoopLagMonitor()
    for late in (0.0005, 0.003, 0.003, 0.7, 9.0, -0.001):
        m.observe(late)
    text = exposition(list(m.collect())).decode()
    assert 'samsa_event_loop_lag_seconds_bucket{le="0.001"} 2.0' in text  # 0.0005 and the clamped -0.001
    assert 'samsa_event_loop_lag_seconds_bucket{le="0.005"} 4.0' in text
    assert 'samsa_event_loop_lag_seconds_bucket{le="1.0"} 5.0' in text
    assert 'samsa_event_loop_lag_seconds_bucket{le="+Inf"} 6.0' in text
    assert "samsa_event_loop_lag_seconds_count 6.0" in text
    assert m.max_s == 9.0


def test_a_blocked_loop_is_seen_late() -> None:
    m = LoopLagMonitor(interval_s=0.01)

    async def main() -> None:
        task = asyncio.create_task(m.run())
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # blocking work on the loop
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(main())
    assert m.count >= 2
    assert m.max_s >= 0.25  # at least the 0.3 s the loop was held, less the interval it was asked for
