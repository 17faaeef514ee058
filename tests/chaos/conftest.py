"""tests/chaos: `--chaos-long` (what `make chaos` runs) selects the long runs; the figures come from
SAMSA_CHAOS_RUNS and SAMSA_CHAOS_SECONDS (see test_chaos.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `import chaos.checker` from tests/


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos-long", action="store_true", default=False,
                     help="tests/chaos: the long runs (default 100 runs; SAMSA_CHAOS_RUNS, SAMSA_CHAOS_SECONDS)")
