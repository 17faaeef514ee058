from __future__ import annotations

import sys
from pathlib import Path

import pytest

# pytest runs with --import-mode=importlib; let the tests import the helper modules next to them
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic.a_b-c-0"
