"""The metrics and health HTTP listener (samsa.metrics.listen=HOST:PORT), served on the broker's event loop.

Routes: GET /metrics (Prometheus text exposition, prometheus-client's format), GET /health/live (200
while the process serves), GET /health/ready (200 or 503 with a JSON body naming the failed checks).
One request per connection (Connection: close), a bounded request head, a read timeout: a scraper
or a stray client can hold nothing. The scrape runs on the loop because the state it reads (logs,
segments, the group coordinator) belongs to it; see bench/metrics_scrape.py for its cost.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from samsa.broker.observability.collectors import (
    Clock,
    MetricsOptions,
    SteppedCollector,
    broker_collectors,
    wall_clock_ms,
)
from samsa.broker.observability.health import readiness
from samsa.broker.observability.loop_lag import LoopLagMonitor
from samsa.broker.observability.series import Family, exposition

if TYPE_CHECKING:
    from samsa.broker.observability.observed_broker import ObservabilityBroker

logger = logging.getLogger(__name__)

MAX_REQUEST_HEAD_BYTES = 8192
REQUEST_READ_TIMEOUT_S = 10.0
JSON_TYPE = "application/json"
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class ObservabilityServer:
    """Answers /metrics and /health/* for one broker. `listeners_open` is set by the server once the
    client listener is bound (broker/server.py)."""

    def __init__(self, broker: ObservabilityBroker, *, clock: Clock = wall_clock_ms,
                 options: MetricsOptions | None = None) -> None:
        self._broker = broker
        self.collectors: list[SteppedCollector] = broker_collectors(broker, clock, options)
        self.loop_lag = LoopLagMonitor()
        self._loop_lag_task: asyncio.Task[None] | None = None
        self.listeners_open = False
        self.port = -1  # bound by start()
        self._server: asyncio.Server | None = None

    async def metrics(self) -> bytes:
        """Collect on the loop, a step at a time (letting requests run between steps), then format the
        text on a worker thread: a scrape of 10,000 partitions never holds the loop for long."""
        families: list[Family] = []
        for collector in self.collectors:
            for step in collector.steps():
                if step is None:
                    await asyncio.sleep(0)
                else:
                    families.append(step)
        families.extend(self.loop_lag.collect())
        return await asyncio.to_thread(exposition, families)

    async def respond(self, method: str, target: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request: the routing, without sockets."""
        path = target.split("?", 1)[0]
        if path not in ("/metrics", "/health/live", "/health/ready"):
            return 404, JSON_TYPE, b'{"error": "not found"}\n'
        if method not in ("GET", "HEAD"):
            return 405, JSON_TYPE, b'{"error": "only GET"}\n'
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, await self.metrics()
        if path == "/health/live":
            return 200, JSON_TYPE, b'{"status": "live"}\n'
        state = readiness(self._broker, listeners_open=self.listeners_open)
        return (200 if state.ready else 503), JSON_TYPE, json.dumps(state.to_json()).encode() + b"\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_READ_TIMEOUT_S)
                method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
                status, content_type, body = await self.respond(method, target)
            except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError, ValueError):
                method, status, content_type, body = "GET", 400, JSON_TYPE, b'{"error": "bad request"}\n'
            writer.write(
                f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1"))
            if method != "HEAD":
                writer.write(body)
            await asyncio.wait_for(writer.drain(), REQUEST_READ_TIMEOUT_S)
        except (ConnectionError, TimeoutError):
            pass  # the client went away
        except Exception:
            logger.exception("metrics listener: request failed")
        finally:
            writer.close()

    async def start(self, host: str, port: int) -> int:
        """Bind and serve in the background; returns the bound port."""
        self._server = await asyncio.start_server(self._handle, host, port, limit=MAX_REQUEST_HEAD_BYTES,
                                                  reuse_address=True)
        self._loop_lag_task = asyncio.get_running_loop().create_task(self.loop_lag.run())
        bound = int(self._server.sockets[0].getsockname()[1])
        logger.info("metrics and health on http://%s:%d/metrics", host, bound)
        self.port = bound
        return bound

    def close(self) -> None:
        if self._loop_lag_task is not None:
            self._loop_lag_task.cancel()
            self._loop_lag_task = None
        if self._server is not None:
            self._server.close()
            self._server = None

