"""tests/chaos: `--chaos-long` (what `make chaos` runs) selects the long runs; the figures come from
SAMSA_CHAOS_RUNS and SAMSA_CHAOS_SECONDS (see test_chaos.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

CHAOS_DIR = Path(__file__).resolve().parent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `import chaos.checker` from tests/


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos-long", action="store_true", default=False,
                     help="tests/chaos: the long runs (default 100 runs; SAMSA_CHAOS_RUNS, SAMSA_CHAOS_SECONDS)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` runs three streams side by side (pytest-xdist, `-n 3 --dist loadgroup`). The short chaos runs
    are one unit, which mostly waits on faults and timers (20 runs: 477 s of wall time for 281 s of CPU,
    brokers and clients included); every other test module is a unit of its own, so its module and session
    fixtures start once per worker that runs it, and the workers take modules until none is left.

    Tests on 127.0.0.1 may run side by side because the launcher hands each worker ports from a slice of
    its own, below the kernel's ephemeral range (broker/launcher.py, PORTS_LOW); the chaos runs live in
    network namespaces of their own."""
    for item in items:
        if not any(True for _ in item.iter_markers("xdist_group")):
            path = Path(str(item.path)).resolve()
            group = "chaos" if CHAOS_DIR in path.parents else str(path.relative_to(config.rootpath))
            item.add_marker(pytest.mark.xdist_group(group))
