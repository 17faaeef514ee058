"""The broker fixtures of tests/broker/conftest.py (a real `samsa serve` on a free loopback port)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_samsa_broker_fixtures",
                                               Path(__file__).resolve().parents[1] / "broker" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _fixtures  # (dataclasses look their module up)
_spec.loader.exec_module(_fixtures)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # record_corpus

SamsaProcess = _fixtures.SamsaProcess
free_port = _fixtures.free_port
samsa_factory = _fixtures.samsa_factory
samsa = _fixtures.samsa
