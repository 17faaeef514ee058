"""The controller's parts decide through broker.controller_types and never import broker.controller
(which imports them): no import circle between the controller and its parts, even under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BROKER = Path(__file__).resolve().parents[2] / "broker"
PARTS = ("controller_types.py", "cluster_control.py", "topic_control.py", "reassignment.py")


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("part", PARTS)
def test_a_controller_part_does_not_import_the_controller(part: str) -> None:
    modules = imported_modules(BROKER / part)
    assert "samsa.broker.controller" not in modules
    assert "samsa.broker.broker" not in modules


def test_the_controller_module_stays_under_600_lines() -> None:
    for name in ("controller.py", *PARTS):
        assert len((BROKER / name).read_text().splitlines()) < 600, name
