"""What a scenario returns (metrics with a Kafka figure, a Samsa figure and their ratio), and shared helpers."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024


@dataclass
class Metric:
    """One figure measured on both brokers. ``better`` is "higher" or "lower".

    A figure is ``None`` when it could not be measured; ``status`` then says why for that broker
    ("unsupported", "failed: ...").
    """

    label: str
    unit: str
    better: str
    kafka: float | None = None
    samsa: float | None = None
    kafka_status: str = "ok"
    samsa_status: str = "ok"

    @property
    def ratio(self) -> float | None:
        if self.kafka is None or self.samsa is None or self.kafka == 0:
            return None
        return self.samsa / self.kafka

    def set(self, target: str, value: float | None, status: str = "ok") -> None:
        setattr(self, target, value)
        setattr(self, f"{target}_status", status if value is not None or status != "ok" else "no figure")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio"] = self.ratio
        return d


@dataclass
class ScenarioResult:
    name: str
    title: str
    metrics: list[Metric] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    def metric(self, label: str, unit: str, better: str) -> Metric:
        m = Metric(label, unit, better)
        self.metrics.append(m)
        return m

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "metrics": [m.as_dict() for m in self.metrics],
                "notes": self.notes, "details": self.details, "error": self.error, "seconds": self.seconds}


def fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    if a >= 1e7:
        return f"{v / 1e6:.1f}M"
    if a >= 1e5:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def short_error(e: BaseException, limit: int = 300) -> str:
    text = f"{type(e).__name__}: {e}".strip().replace("\n", " | ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def percentiles(values: list[float], ps: tuple[float, ...] = (50, 99, 99.9)) -> dict[str, float]:
    """Nearest-rank percentiles (like Kafka's ProducerPerformance), plus max and mean."""
    if not values:
        return {}
    v = sorted(values)
    out = {}
    for p in ps:
        k = max(0, min(len(v) - 1, math.ceil(round(p / 100 * len(v), 9)) - 1))
        out[f"p{p:g}"] = v[k]
    out["max"] = v[-1]
    out["mean"] = statistics.fmean(v)
    return out


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run_bounded(cmd: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` with a hard time bound (the child is killed by PID on timeout)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 120.0,
                  config: dict[str, str] | None = None) -> float:
    """Create topics (name -> partitions, RF 1) with confluent-kafka's AdminClient; returns seconds taken."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    t0 = time.monotonic()
    futures = admin.create_topics([NewTopic(t, n, 1, config=dict(config or {})) for t, n in topics.items()],
                                  request_timeout=timeout, operation_timeout=timeout)
    for f in futures.values():
        f.result(timeout + 10)
    return time.monotonic() - t0


def delete_topics(bootstrap: str, topics: list[str], timeout: float = 60.0) -> None:
    """Best effort: free the disk a scenario used."""
    from confluent_kafka.admin import AdminClient

    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    try:
        for f in admin.delete_topics(topics, request_timeout=timeout, operation_timeout=timeout).values():
            try:
                f.result(timeout + 10)
            except Exception:
                pass
    except Exception:
        pass
