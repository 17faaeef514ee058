"""The CLI's routing client: metadata-driven like a real Kafka client. Partition requests go to the leader,
group requests to the group's coordinator (FindCoordinator); NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR,
LEADER_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and friends refresh metadata and retry with backoff
(retry.backoff.ms 100 doubling to retry.backoff.max.ms 1000, within the request timeout), as Kafka's
NetworkClient/ConsumerCoordinator do.

Built on Samsa's own blocking `broker.client.Connection` (kio schemas, ApiVersions negotiation): it needs
only the package's runtime dependencies, speaks to Samsa and Apache Kafka alike, and a command-line tool
does one thing at a time, so one blocking connection per broker is enough.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from samsa.broker.cli.commands.errors import CliError, KafkaError, describe_os_error
from samsa.broker.cli.commands.settings import Settings
from samsa.broker.client import Connection, KafkaClientError

T = TypeVar("T")

# Kafka's RetriableException subclasses a CLI meets when leadership or coordination moves.
RETRIABLE = frozenset({
    5,   # LEADER_NOT_AVAILABLE
    6,   # NOT_LEADER_OR_FOLLOWER
    14,  # COORDINATOR_LOAD_IN_PROGRESS
    15,  # COORDINATOR_NOT_AVAILABLE
    16,  # NOT_COORDINATOR
    19,  # NOT_ENOUGH_REPLICAS (nothing was appended)
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
})
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
GROUP, TRANSACTION = 0, 1  # FindCoordinator key_type


class Retry(KafkaError):
    """Raised inside `RoutingClient.retrying` to ask for a metadata refresh and another attempt; outside it, an
    error like any other."""

    def __init__(self, code: int, context: str = "") -> None:
        super().__init__(code, context)
        self.context = context


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error_code: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: Any
    is_internal: bool
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterView:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]  # node id -> host, port, rack
    topics: dict[str, TopicInfo]


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class RoutingClient:
    """Connections to the bootstrap servers and to every broker the metadata names, opened on demand."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._timeout_s = settings.request_timeout_ms / 1000
        self._bootstrap: Connection | None = None
        self._nodes: dict[int, Connection] = {}
        self.brokers: dict[int, tuple[str, int, str | None]] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self._coordinators: dict[tuple[int, str], int] = {}

    # --- connections ----------------------------------------------------------------------------------

    def _open(self, host: str, port: int) -> Connection:
        address = _address(host, port)
        try:
            return Connection(host, port, client_id=self.settings.client_id, timeout_s=self._timeout_s,
                              security=self.settings.security)
        except KafkaClientError as e:  # SASL refused (or, without SASL, closed: not a Kafka listener)
            security = self.settings.security
            if security is not None and security.mechanism:
                raise CliError(f"{address}: {e}; check --command-config") from None
            raise CliError(f"{address} did not answer ApiVersions like a Kafka broker ({e}); "
                           "is it a Kafka listener? check --bootstrap-server and the port") from None
        except ssl.SSLError as e:
            raise CliError(f"{address}: TLS failed ({e.reason or e}); check --command-config's "
                           "security.protocol and trust store") from None
        except (ConnectionResetError, BrokenPipeError) as e:  # it accepted, then hung up on ApiVersions
            raise CliError(f"{address} did not answer ApiVersions like a Kafka broker ({e.strerror or e}); "
                           "is it a Kafka listener? check --bootstrap-server and the port") from None
        except OSError as e:
            raise CliError(describe_os_error(e, address)) from None
        except Exception as e:  # closed mid-handshake, or bytes that are not a Kafka response
            raise CliError(f"{address} did not answer ApiVersions like a Kafka broker ({e or type(e).__name__}); "
                           "is it a Kafka listener? check --bootstrap-server and the port") from None

    def any_connection(self) -> Connection:
        """A connection to some broker: the bootstrap one, else the first bootstrap server that answers."""
        if self._bootstrap is not None:
            return self._bootstrap
        failures: list[str] = []
        # the bootstrap servers first, then every broker the metadata named (one of them may be down)
        candidates = [*self.settings.servers, *((h, p) for h, p, _ in self.brokers.values())]
        for host, port in dict.fromkeys(candidates):
            try:
                self._bootstrap = self._open(host, port)
                return self._bootstrap
            except CliError as e:
                failures.append(str(e))
        if len(failures) == 1:
            raise CliError(failures[0])
        raise CliError(f"no bootstrap server answered ({self.settings.source}): " + " | ".join(failures))

    def node(self, node_id: int) -> Connection:
        conn = self._nodes.get(node_id)
        if conn is not None:
            return conn
        if node_id not in self.brokers:
            self.refresh()
        if node_id not in self.brokers:
            raise Retry(8, f"broker {node_id} is not in the metadata")  # BROKER_NOT_AVAILABLE
        host, port, _ = self.brokers[node_id]
        try:
            conn = self._open(host, port)
        except CliError as e:  # a broker that went away: the metadata will say who took over
            raise Retry(13, f"broker {node_id}: {e}") from None
        self._nodes[node_id] = conn
        return conn

    def drop(self, node_id: int) -> None:
        conn = self._nodes.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in [*self._nodes.values(), *([self._bootstrap] if self._bootstrap else [])]:
            conn.close()
        self._nodes.clear()
        self._bootstrap = None

    def __enter__(self) -> RoutingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, conn: Connection, api_key: int, values: Mapping[str, Any], *,
                version: int | None = None) -> Any:
        """One request on `conn`; a connection that breaks becomes a CliError (or Retry for a known node)."""
        try:
            return conn.request(api_key, values, version=version)
        except (OSError, KafkaClientError) as e:
            stale = [n for n, c in self._nodes.items() if c is conn]
            for n in stale:
                self.drop(n)
            if conn is self._bootstrap:
                self._bootstrap = None
                conn.close()
            where = f"broker {stale[0]}" if stale else "the bootstrap broker"
            raise Retry(13, f"{where} ({e}); is it still running?") from None  # NETWORK_EXCEPTION

    def request_node(self, node_id: int, api_key: int, values: Mapping[str, Any],
                     version: int | None = None) -> Any:
        return self.request(self.node(node_id), api_key, values, version=version)

    def version(self, api_key: int, conn: Connection | None = None) -> int:
        try:
            return (conn or self.any_connection()).pick_version(api_key)
        except KafkaClientError as e:
            raise CliError(f"{e}: this broker is too old or too different for this command") from None

    # --- metadata -------------------------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None) -> ClusterView:
        """Metadata for `topics` (None: all), never creating a topic (allow_auto_topic_creation false)."""
        names = None if topics is None else list(topics)
        values = {"topics": None if names is None else [{"name": t} for t in names],
                  "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        conn = self.any_connection()
        r = self.request(conn, 3, values)
        self.brokers = {b.node_id: (b.host, b.port, b.rack) for b in r.brokers}
        self.controller_id = r.controller_id
        self.cluster_id = r.cluster_id
        seen: dict[str, TopicInfo] = {}
        for t in r.topics:
            parts = {p.partition_index: PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch,
                                                      tuple(p.replica_nodes), tuple(p.isr_nodes),
                                                      tuple(p.offline_replicas), p.error_code.value)
                     for p in t.partitions}
            seen[t.name] = TopicInfo(t.name, getattr(t, "topic_id", None), bool(t.is_internal),
                                     t.error_code.value, parts)
        if names is None:
            self.topics = seen
        else:
            self.topics.update(seen)
        return ClusterView(self.cluster_id, self.controller_id, dict(self.brokers), seen)

    def topic(self, name: str, *, refresh: bool = False) -> TopicInfo:
        """The topic's metadata; UNKNOWN_TOPIC_OR_PARTITION (and others) as a KafkaError."""
        info = None if refresh else self.topics.get(name)
        if info is None or info.error_code != 0:
            info = self.refresh([name]).topics.get(name)
        if info is None:
            raise KafkaError(3, f"topic {name!r}")
        if info.error_code != 0:
            raise KafkaError(info.error_code, f"topic {name!r}")
        return info

    def leader(self, topic: str, partition: int) -> int:
        info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(info.partitions)}: "
                           f"0-{len(info.partitions) - 1})")
        if p.leader_id < 0:
            raise Retry(5, f"{topic}-{partition}")
        return p.leader_id

    # --- coordinators ---------------------------------------------------------------------------------

    def coordinator(self, key: str, key_type: int = GROUP) -> int:
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        conn = self.any_connection()
        version = self.version(10, conn)
        if version >= 4:
            r = self.request(conn, 10, {"key_type": key_type, "coordinator_keys": [key]}, version=version)
            c = r.coordinators[0]
            code, node_id, host, port, message = c.error_code.value, c.node_id, c.host, c.port, c.error_message
        else:
            r = self.request(conn, 10, {"key": key, "key_type": key_type}, version=version)
            code, node_id, host, port, message = r.error_code.value, r.node_id, r.host, r.port, r.error_message
        if code in RETRIABLE:
            raise Retry(code, f"coordinator of {key!r}")
        if code != 0:
            raise KafkaError(code, f"FindCoordinator {key!r}", message)
        self.brokers.setdefault(node_id, (host, port, None))
        self._coordinators[(key_type, key)] = node_id
        return int(node_id)

    def forget_coordinator(self, key: str, key_type: int = GROUP) -> None:
        self._coordinators.pop((key_type, key), None)

    # --- retries --------------------------------------------------------------------------------------

    def retrying(self, attempt: Callable[[], T], *, what: str = "", on_retry: Callable[[], None] | None = None) -> T:
        """Call `attempt` until it returns, refreshing metadata after each Retry, with exponential backoff,
        for at most the request timeout; then the last error, by Kafka's name."""
        deadline = time.monotonic() + self._timeout_s
        backoff_ms = RETRY_BACKOFF_MS
        while True:
            try:
                return attempt()
            except Retry as r:
                if time.monotonic() + backoff_ms / 1000 > deadline:
                    raise KafkaError(r.code, r.context or what,
                                     f"still failing after {self._timeout_s:.0f} s of retries") from None
                time.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, RETRY_BACKOFF_MAX_MS)
                self._coordinators.clear()
                if on_retry is not None:
                    on_retry()
                try:
                    self.refresh(list(self.topics) or None)
                except CliError:
                    pass  # no broker answered this time: the next attempt says so, or the deadline does

    def group_request(self, group: str, api_key: int, values: Mapping[str, Any],
                      error_of: Callable[[Any], int], version: int | None = None) -> Any:
        """Send a group API request to the group's coordinator, following it when it moves."""

        def attempt() -> Any:
            node_id = self.coordinator(group)
            r = self.request_node(node_id, api_key, values, version=version)
            code = error_of(r)
            if code in RETRIABLE:
                self.forget_coordinator(group)
                raise Retry(code, f"group {group!r}")
            return r

        return self.retrying(attempt, what=f"group {group!r}")
