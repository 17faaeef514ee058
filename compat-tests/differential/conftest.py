"""Fixtures of the differential tests: both brokers, session-scoped (from ../conftest.py)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "differential: runs a scenario against the reference Kafka and Samsa, compares")
