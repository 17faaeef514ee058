"""The `samsa` program does not import hypothesis (installed here for the property tests), which kio's phantom
types would import only to register test strategies: half of the CPU a `samsa` start cost."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("hypothesis") is None,
                                reason="hypothesis is not installed, so there is nothing to keep out")


def imported_modules(command: list[str]) -> set[str]:
    """The modules a program imported, from -X importtime (a package hidden by a None in sys.modules is never
    imported, so it has no line of its own)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env={"PYTHONPROFILEIMPORTTIME": "1",
                                                                                    "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_python_m_samsa_broker_cli_leaves_hypothesis_out() -> None:
    modules = imported_modules([sys.executable, "-m", "samsa.broker.cli", "topics", "--help"])
    assert "kio.static.primitive" in modules  # kio was imported, so the check means something
    assert "hypothesis" not in modules  # (its submodule is still tried, and fails at once)


def test_the_console_script_leaves_hypothesis_out() -> None:
    script = shutil.which("samsa", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("no samsa console script beside this interpreter")
    modules = imported_modules([script, "topics", "--help"])
    assert "kio.static.primitive" in modules
    assert "hypothesis" not in modules  # (its submodule is still tried, and fails at once)


def test_a_program_importing_samsa_keeps_hypothesis() -> None:
    modules = imported_modules([sys.executable, "-c", "import samsa.broker.cli, samsa.broker.client"])
    assert "kio.static.primitive" in modules and "hypothesis" in modules
