"""Seeded simulation of 3- and 5-voter quorums plus an observer under network, disk and crash faults.

SAMSA_SIM_SEEDS=5000 runs more seeds (default 300; SAMSA_SIM_SEED_BASE shifts the range);
SAMSA_SIM_SEED=123 runs just one, and SAMSA_SIM_TRACE=1 prints its event trace; SAMSA_SIM_REMOVE_LEADER=1 lets the
leader remove itself (a known dead end: tests/sim/cluster.py Simulation.change_voters).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections import deque

import pytest

from sim.scenario import run_seed

_ONE = os.environ.get("SAMSA_SIM_SEED")
_BASE = int(os.environ.get("SAMSA_SIM_SEED_BASE", "0"))
_SEEDS = [int(_ONE)] if _ONE else list(range(_BASE, _BASE + int(os.environ.get("SAMSA_SIM_SEEDS", "300"))))


@pytest.mark.parametrize("seed", _SEEDS, ids=lambda s: f"seed_{s}")
def test_quorum_survives_faults(seed: int) -> None:
    trace: deque[str] = deque(maxlen=None if os.environ.get("SAMSA_SIM_TRACE") else 80)
    try:
        run_seed(seed, trace)
    except AssertionError as e:
        reproduce = f"SAMSA_SIM_SEED={seed} SAMSA_SIM_TRACE=1 .venv/bin/python -m pytest -q tests/sim"
        tail = "\n".join(trace)
        where = traceback.extract_tb(e.__traceback__)[-1]
        what = f"{e or type(e).__name__} (at {where.filename}:{where.lineno}: {where.line})"
        pytest.fail(f"seed {seed} failed: {what}\nreproduce: {reproduce}\nlast events:\n{tail}", pytrace=False)
    finally:
        if os.environ.get("SAMSA_SIM_TRACE"):
            print("\n".join(trace), file=sys.stderr)
