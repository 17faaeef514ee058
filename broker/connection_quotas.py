"""The broker-wide bounds on connections and on requests in flight (Kafka's ConnectionQuotas and its request queue).

ConnectionQuotas counts a listener's connections: `max.connections` in all, `max.connections.per.ip`
per client address (with `max.connections.per.ip.overrides`, "host:count,host:count"), and
`max.connection.creation.rate` new connections a second. Kafka's acceptor closes a connection over the
per-IP limit at once; over the total or the rate it stops accepting for a while. Samsa's listener
cannot hold connections in the kernel's backlog, so it closes the new connection over any limit, and
says so at INFO at most once per REFUSAL_LOG_INTERVAL_MS (with the count it did not log).

RequestQueue bounds what connections may hold at once: `queued.max.requests` requests read but not
yet answered (a request answered at once is done before its connection reads the next frame, so the
slots are held by the requests that wait: long polls, acks=all, forwarded ones), and
`queued.max.request.bytes` of request frames (Kafka's memory pool; -1, the default,
leaves it unbounded). A frame's bytes are reserved when its size prefix arrives, as Kafka's
SimpleMemoryPool does (non-strictly: a reservation succeeds while anything is left, so one frame
larger than the pool still passes); only the accounting is up front, the buffer grows as bytes
arrive. A connection refused a slot or a reservation stops reading and is called back, in arrival
order, once something is released. Pure bookkeeping: the clock and the callback scheduler are
parameters.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections import deque
from collections.abc import Callable, Mapping

logger = logging.getLogger(__name__)

INT_MAX = 2147483647
# Kafka measures max.connection.creation.rate over its quota window; a one-second window here.
CREATION_RATE_WINDOW_MS = 1000
REFUSAL_LOG_INTERVAL_MS = 10_000


def parse_per_ip_overrides(value: str, resolve: bool = True) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: "host:count,ip:count" (Kafka's format; names are resolved
    to an address once, at start-up, as Kafka's InetAddress.getByName does). Raises ValueError."""
    overrides: dict[str, int] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entry {item!r} is not host:count")
        limit = int(count)
        if limit < 0:
            raise ValueError(f"max.connections.per.ip.overrides entry {item!r} has a negative count")
        host = host.strip().strip("[]")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            if not resolve:
                address = host
            else:
                try:
                    address = socket.gethostbyname(host)
                except OSError as e:
                    raise ValueError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {e}") from e
        overrides[address] = limit
    return overrides


class _RefusalLog:
    """INFO once per interval for each kind of refusal, with how many were not logged in between."""

    def __init__(self) -> None:
        self._last_ms: dict[str, int] = {}
        self._suppressed: dict[str, int] = {}

    def refused(self, kind: str, message: str, now_ms: int) -> None:
        last = self._last_ms.get(kind)
        if last is not None and now_ms - last < REFUSAL_LOG_INTERVAL_MS:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        self._last_ms[kind] = now_ms
        more = self._suppressed.pop(kind, 0)
        logger.info("%s%s", message, f" ({more} more refused since the last such message)" if more else "")


class ConnectionQuotas:
    """Counts connections by client address and refuses one over a limit (see the module docstring)."""

    def __init__(self, *, max_connections: int = INT_MAX, max_connections_per_ip: int = INT_MAX,
                 max_connections_per_ip_overrides: Mapping[str, int] | None = None,
                 max_connection_creation_rate: int = INT_MAX) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.overrides = dict(max_connections_per_ip_overrides or {})
        self.max_connection_creation_rate = max_connection_creation_rate
        self.total_count = 0
        self._by_ip: dict[str, int] = {}
        self._created_ms: deque[int] = deque()  # accept times within the rate window (rate limited only)
        self._log = _RefusalLog()

    def count(self, ip: str) -> int:
        return self._by_ip.get(ip, 0)

    def max_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_connections_per_ip)

    def try_accept(self, ip: str, now_ms: int) -> bool:
        """Count a new connection from `ip`, or refuse it (False, logged) when it is over a limit."""
        if self.total_count >= self.max_connections:
            self._log.refused("max.connections", f"closing a new connection from {ip}: the broker has "
                              f"{self.total_count} connections (max.connections={self.max_connections})", now_ms)
            return False
        limit = self.max_for(ip)
        held = self._by_ip.get(ip, 0)
        if held >= limit:
            self._log.refused("max.connections.per.ip", f"closing a new connection from {ip}: it has {held} "
                              f"connections (max.connections.per.ip for it is {limit})", now_ms)
            return False
        if self.max_connection_creation_rate < INT_MAX:
            created = self._created_ms
            while created and now_ms - created[0] >= CREATION_RATE_WINDOW_MS:
                created.popleft()
            if len(created) >= self.max_connection_creation_rate:
                self._log.refused("max.connection.creation.rate", f"closing a new connection from {ip}: "
                                  f"{len(created)} connections were created in the last second "
                                  f"(max.connection.creation.rate={self.max_connection_creation_rate})", now_ms)
                return False
            created.append(now_ms)
        self.total_count += 1
        self._by_ip[ip] = held + 1
        return True

    def release(self, ip: str) -> None:
        """A counted connection from `ip` closed."""
        held = self._by_ip.get(ip, 0)
        assert held > 0 and self.total_count > 0, f"release of an uncounted connection from {ip}"
        self.total_count -= 1
        if held == 1:
            del self._by_ip[ip]
        else:
            self._by_ip[ip] = held - 1


Waiter = Callable[[], None]


class RequestQueue:
    """`queued.max.requests` request slots and a `queued.max.request.bytes` pool shared by connections."""

    def __init__(self, *, max_requests: int, max_bytes: int, call_soon: Callable[[Waiter], object]) -> None:
        self.max_requests = max_requests if max_requests > 0 else INT_MAX
        self.max_bytes = max_bytes  # <= 0: unbounded
        self.in_flight_count = 0
        self.available_bytes = max_bytes
        self._waiters: deque[Waiter] = deque()
        self._call_soon = call_soon

    @property
    def bytes_bounded(self) -> bool:
        return self.max_bytes > 0

    @property
    def full(self) -> bool:
        """No request slot is free: connections read no further frame until one is released."""
        return self.in_flight_count >= self.max_requests

    def acquire_request(self) -> None:
        """A request taken while a slot was free now waits for its answer (it holds the slot)."""
        self.in_flight_count += 1

    def release_request(self) -> None:
        assert self.in_flight_count > 0
        self.in_flight_count -= 1
        self._wake()

    def try_reserve_bytes(self, size_bytes: int) -> bool:
        """Reserve a frame's size; non-strict like Kafka's pool: granted while anything is available."""
        if self.max_bytes <= 0:
            return True
        if self.available_bytes <= 0 and size_bytes > 0:
            return False
        self.available_bytes -= size_bytes
        return True

    def release_bytes(self, size_bytes: int) -> None:
        if self.max_bytes <= 0 or size_bytes == 0:
            return
        self.available_bytes += size_bytes
        assert self.available_bytes <= self.max_bytes
        self._wake()

    def wait(self, waiter: Waiter) -> None:
        """Call `waiter` (through call_soon) once a slot or bytes are released; it then tries again."""
        self._waiters.append(waiter)

    def cancel(self, waiter: Waiter) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def _wake(self) -> None:
        # Everyone waiting tries again, in arrival order; those that still do not fit wait again.
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            self._call_soon(waiter)
