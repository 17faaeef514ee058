"""What the ``broker`` fixture (conftest.py) yields: a target name and its bootstrap servers."""

from __future__ import annotations

from dataclasses import dataclass

TARGETS = ("kafka", "samsa")


@dataclass
class Target:
    name: str  # "kafka" (the reference Apache Kafka) or "samsa"
    bootstrap: str  # "127.0.0.1:PORT" (comma-separated for several nodes)
