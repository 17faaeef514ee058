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


# Client-library suites that spend most of their time waiting on group sessions, rebalances and client
# start-ups: the chaos runs' worker takes them too, so it does not sit idle once its runs are done.
REPO = CHAOS_DIR.parent.parent
SIDE = tuple(REPO / p for p in ("compat-tests/groups", "compat-tests/kip848", "compat-tests/kip1071",
                                "compat-tests/txn", "compat-tests/test_samsa_cli.py",
                                "compat-tests/test_samsa_cli_errors.py"))


def _group(path: Path) -> str:
    if CHAOS_DIR in path.parents:
        return "chaos"
    if any(path == side or side in path.parents for side in SIDE):
        return "side"
    return "main"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` runs two streams side by side (pytest-xdist, `-n 2 --dist loadgroup`), each one test at
    a time: on one worker everything else ("main"), on the other the short chaos runs, which mostly wait on
    faults and timers (20 runs: 477 s of wall time for 281 s of CPU, brokers and clients included), and the
    client suites of SIDE. Before SIDE the chaos worker sat idle for the last 18 minutes of a 29-minute run."""
    for item in items:
        if not any(True for _ in item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(_group(Path(str(item.path)).resolve())))
