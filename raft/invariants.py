"""InvariantViolation: a Raft safety invariant broke, raised with `raise`, not `assert`, so it survives `python -O`.

The checks document what the core relies on (one leader per epoch, committed entries are never truncated,
the log is contiguous and its epochs never go back, time never goes back), as Kafka's
RaftEventSimulationTest checks them after every event and TigerBeetle keeps its assertions in production.
A violation is our own bug, never something a peer can cause: the driver stops rather than acknowledge
a write it may lose. It is an AssertionError, so code and tests that treat a failed `assert` as a bug
treat it the same.
"""

from __future__ import annotations

__all__ = ["InvariantViolation"]


class InvariantViolation(AssertionError):
    """A Raft safety invariant does not hold: our bug. Raised explicitly so `python -O` keeps the check."""
