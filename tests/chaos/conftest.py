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
    """`make test` runs two streams side by side (pytest-xdist, `-n 2 --dist loadgroup`), each one test at
    a time: the short chaos runs, which mostly wait on faults and timers (20 runs: 477 s of wall time for
    281 s of CPU, brokers and clients included), and everything else."""
    for item in items:
        if not any(True for _ in item.iter_markers("xdist_group")):
            group = "chaos" if CHAOS_DIR in Path(str(item.path)).resolve().parents else "main"
            item.add_marker(pytest.mark.xdist_group(group))
