"""Metric families with very many series (per partition, per group and partition), written straight
into Prometheus' text format, and the /metrics body that joins them with prometheus-client's families.

prometheus-client keeps every sample as a namedtuple with a labels dict: at 10,000 partitions that is
hundreds of thousands of garbage-collected objects per scrape, and the collections they trigger hold
the event loop for hundreds of milliseconds (bench/metrics.py measured it). A SeriesFamily keeps one
preformatted line (a str, which the collector never tracks) per sample instead; the output is the same
text format prometheus-client writes (HELP, TYPE gauge, one `name{labels} value` line per sample), and
the tests read it back with prometheus-client's own parser.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def format_value(value: float) -> str:
    """As prometheus-client writes a value (Go's float formatting: +Inf, -Inf, NaN, 1.0)."""
    if isinstance(value, int):
        return f"{value}.0"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def labels_text(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`a="x",b="y"`: the labels of one series, formatted once and shared by every family that has them."""
    return ",".join(f'{k}="{_escape_label(v)}"' for k, v in zip(names, values, strict=True))


class SeriesFamily:
    """One gauge with many labelled series; add() appends one line of text."""

    __slots__ = ("doc", "lines", "name")

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.doc = doc
        self.lines: list[str] = []

    def add(self, labels: str, value: float) -> None:
        """`labels` as labels_text() formats them."""
        self.lines.append(f"{self.name}{{{labels}}} {format_value(value)}\n")

    def text(self) -> str:
        doc = self.doc.replace("\\", r"\\").replace("\n", r"\n")
        return f"# HELP {self.name} {doc}\n# TYPE {self.name} gauge\n" + "".join(self.lines)


Family = Metric | SeriesFamily


class _Collected(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self._families)


def exposition(families: Iterable[Family]) -> bytes:
    """The /metrics body for families already collected (pure: safe on a worker thread)."""
    small: list[Metric] = []
    many: list[SeriesFamily] = []
    for f in families:
        if isinstance(f, SeriesFamily):
            many.append(f)
        else:
            small.append(f)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collected(small))
    return generate_latest(registry) + "".join(f.text() for f in many).encode()
