"""Observability: Prometheus metrics computed from the broker's state at scrape time, and health checks.

`start_observability` is all the server needs; prometheus-client and the collectors are imported only
when samsa.metrics.listen is set, so a broker without metrics starts as fast as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from samsa.broker.observability.observed_broker import ObservabilityBroker

METRICS_LISTEN_KEY = "samsa.metrics.listen"


class ObservabilityHandle(Protocol):
    listeners_open: bool
    port: int

    def close(self) -> None: ...


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (or [v6]:PORT); raises ValueError for anything else."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{METRICS_LISTEN_KEY} must be HOST:PORT, not {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


async def start_observability(broker: ObservabilityBroker) -> ObservabilityHandle | None:
    """The listener samsa.metrics.listen asks for, started; None when it is not set (the default)."""
    value = broker.config.get(METRICS_LISTEN_KEY).strip()
    if not value:
        return None
    host, port = parse_listen(value)
    from samsa.broker.observability.http import ObservabilityServer

    server = ObservabilityServer(broker)
    await server.start(host, port)
    return server
