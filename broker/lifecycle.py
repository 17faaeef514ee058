"""A broker's relationship with the active controller (Kafka: BrokerLifecycleManager, RPCProducerIdManager).

`BrokerLifecycle` registers the broker (BrokerRegistration) and heartbeats (BrokerHeartbeat) every
broker.heartbeat.interval.ms; the controller unfences the broker once its metadata has caught up
with its registration, and fences it (moving its leaderships away) when heartbeats stop for
broker.session.timeout.ms. On a graceful shutdown the broker asks for a controlled shutdown first.

`ProducerIdManager` hands out producer ids from blocks the controller allocates (AllocateProducerIds,
KIP-730) and fetches the next block before the current one runs out.

Both talk to the controller in-process when this node is the active controller, and over its
controller listener otherwise: one code path for a single node and a cluster.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from samsa.broker.metadata.quorum import Endpoint, NotControllerError
from samsa.broker.node_client import NodeClient, NodeUnavailableError
from samsa.broker.security.listeners import Listener, broker_listeners, inter_broker_listener
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.controller import Controller
    from samsa.broker.metadata.quorum import MetadataQuorum
    from samsa.broker.security.client import ClientSecurity

logger = logging.getLogger(__name__)

BROKER_REGISTRATION_KEY = 62
BROKER_HEARTBEAT_KEY = 63
ALLOCATE_PRODUCER_IDS_KEY = 67
REQUEST_TIMEOUT_S = 5.0
PREFETCH_REMAINING_FRACTION = 0.1  # Kafka fetches the next block at 90% use


class LifecycleBroker(Protocol):
    """What the lifecycle, the controller channel and the producer id manager use of their broker
    (samsa.broker.broker.Broker is one)."""

    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def incarnation_id(self) -> str: ...
    @property
    def roles(self) -> frozenset[str]: ...
    @property
    def single_voter(self) -> bool: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def controller(self) -> Controller: ...
    @property
    def is_active_controller(self) -> bool: ...
    @property
    def lifecycle(self) -> BrokerLifecycle: ...
    @property
    def producer_ids(self) -> ProducerIdManager: ...
    def controller_endpoint(self) -> tuple[int, Endpoint] | None: ...
    @property
    def controller_security(self) -> ClientSecurity | None: ...


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class ControllerChannel:
    """Requests to the active controller's listener (one connection per controller node)."""

    def __init__(self, broker: LifecycleBroker) -> None:
        self._broker = broker
        self._clients: dict[int, NodeClient] = {}

    def client(self) -> NodeClient:
        found = self._broker.controller_endpoint()
        if found is None:
            raise NotControllerError(None, "no active controller is known yet")
        node_id, endpoint = found
        client = self._clients.get(node_id)
        if client is None or (client.host, client.port) != (endpoint.host, endpoint.port):
            client = self._clients[node_id] = NodeClient(endpoint.host, endpoint.port,
                                                         client_id=f"broker-{self._broker.node_id}-to-controller",
                                                         security=self._broker.controller_security)
        return client

    async def request(self, api_key: int, version: int, values: dict[str, Any],
                      timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        return await self.client().request(build(request_class(api_key, version), values), timeout_s=timeout_s)

    async def forward(self, request: object, timeout_s: float) -> Any:
        return await self.client().request(request, timeout_s=timeout_s)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()


class BrokerLifecycle:
    def __init__(self, broker: LifecycleBroker) -> None:
        self.broker = broker
        self.channel = ControllerChannel(broker)
        self.broker_epoch = -1
        self.fenced = True
        self._wake: asyncio.Event | None = None
        # When the controller last answered a heartbeat (monotonic seconds); see presumed_fenced.
        self._last_heard_s = time.monotonic()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _endpoint(self) -> tuple[str, int]:
        """The inter-broker listener's advertised address: what followers and coordinators connect to."""
        listener = self._listeners()[0]
        return listener.advertised_host, listener.advertised_port

    def _listeners(self) -> tuple[Listener, ...]:
        """This broker's listeners, the inter-broker one first (the registration's first endpoint)."""
        config = self.broker.config
        listeners = broker_listeners(config)
        inter_broker = inter_broker_listener(config, listeners)
        return (inter_broker, *(item for item in listeners if item is not inter_broker))

    def _listeners_text(self) -> str:
        return ",".join(f"{item.name}://{item.advertised_host}:{item.advertised_port}" for item in self._listeners())

    def _metadata_offset(self) -> int:
        return self.broker.quorum.applied_offset - 1

    def register_locally(self) -> None:
        """A single voter registers and unfences itself before serving (its commits are immediate)."""
        controller = self.broker.controller
        host, port = self._endpoint()
        pending = controller.register_broker(self.broker.node_id, self.broker.incarnation_id, host, port, None,
                                             _monotonic_ms(), self._listeners_text())
        self.broker_epoch = pending.result()
        error, beat = controller.heartbeat(self.broker.node_id, self.broker_epoch, self._metadata_offset(), False,
                                           False, _monotonic_ms())
        assert error == ErrorCode.none and beat is not None
        self.fenced = beat.result().is_fenced
        # And its first producer-id block, while commits are still immediate (the quorum's executor runs
        # only once serving starts): the first InitProducerId is answered at once, not with a retry.
        self.broker.producer_ids.available()

    async def _register(self) -> None:
        broker = self.broker
        host, port = self._endpoint()
        if broker.is_active_controller:
            self.broker_epoch = await broker.controller.register_broker(
                broker.node_id, broker.incarnation_id, host, port, None, _monotonic_ms(), self._listeners_text())
            return
        response = await self.channel.request(BROKER_REGISTRATION_KEY, 3, {
            "broker_id": broker.node_id,
            "cluster_id": broker.cluster_id,
            "incarnation_id": uuid.UUID(broker.incarnation_id),
            "listeners": [{"name": item.name, "host": item.advertised_host, "port": item.advertised_port,
                           "security_protocol": int(item.security_protocol)} for item in self._listeners()],
            "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 1}],
            "rack": None,
            "is_migrating_zk_broker": False,
            "log_dirs": (),
            "previous_broker_epoch": self.broker_epoch,
        })
        if response.error_code != ErrorCode.none:
            raise NotControllerError(None, f"registration refused: {ErrorCode(response.error_code).name}")
        self.broker_epoch = int(response.broker_epoch)

    async def _heartbeat(self, *, want_shut_down: bool = False) -> bool:
        """One heartbeat; returns should_shut_down."""
        broker = self.broker
        if broker.is_active_controller:
            error, pending = broker.controller.heartbeat(broker.node_id, self.broker_epoch, self._metadata_offset(),
                                                         False, want_shut_down, _monotonic_ms())
            if pending is None:
                self._stale(error)
                return False
            result = await pending
            fenced, should_shut_down = result.is_fenced, result.should_shut_down
        else:
            # A heartbeat unanswered within two intervals takes its connection down (NodeClient), so that
            # after a network partition heals the next one goes out on a fresh connection at once.
            interval_s = broker.config.get_int("broker.heartbeat.interval.ms") / 1000
            timeout_s = min(REQUEST_TIMEOUT_S, max(1.0, 2 * interval_s))
            response = await self.channel.request(BROKER_HEARTBEAT_KEY, 1, timeout_s=timeout_s, values={
                "broker_id": broker.node_id,
                "broker_epoch": self.broker_epoch,
                "current_metadata_offset": self._metadata_offset(),
                "want_fence": False,
                "want_shut_down": want_shut_down,
                "offline_log_dirs": (),
            })
            if response.error_code != ErrorCode.none:
                self._stale(ErrorCode(response.error_code))
                return False
            fenced, should_shut_down = bool(response.is_fenced), bool(response.should_shut_down)
        self._last_heard_s = time.monotonic()
        if fenced != self.fenced:
            logger.info("broker %d is %s", broker.node_id, "fenced" if fenced else "unfenced")
            self.fenced = fenced
        return should_shut_down

    def presumed_fenced(self) -> bool:
        """Fenced by the controller, or no heartbeat answered for broker.session.timeout.ms: the controller
        has fenced this broker by now and moved its partitions' leadership, but its metadata may not show
        it yet (it was cut off, or paused). Until it is unfenced it must not act as a partition leader: a
        deposed leader answering from its stale log would refuse an idempotent producer's next sequence
        (OUT_OF_ORDER_SEQUENCE_NUMBER) and tell a consumer that offsets the new leader has written are
        out of range. A single voter is its own controller and is never cut off from it."""
        if self.broker.single_voter:
            return False
        # fenced: the controller says so (or this broker has not been unfenced since it started): its image
        # may still show it leading partitions the controller moved away while it was cut off.
        return self.fenced or self.cut_off()

    def cut_off(self) -> bool:
        """The controller last called this broker unfenced, but has answered no heartbeat for
        broker.session.timeout.ms (less one interval): it may have fenced this broker since, or not (a cut
        shorter than its session). Produce waits this out rather than refusing at once (broker/handlers/
        produce.py): a leader that refuses a producer's requests and then accepts its next one again
        answers that one OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka answers with an epoch bump that
        can write another partition's in-doubt batch twice (librdkafka issue 4953)."""
        if self.broker.single_voter or self.fenced:
            return False
        # One heartbeat interval early: the controller's session runs from when it got our last heartbeat,
        # ours from when its answer came back, so this side must give up first.
        config = self.broker.config
        limit_s = (config.get_int("broker.session.timeout.ms")
                   - config.get_int("broker.heartbeat.interval.ms")) / 1000
        return time.monotonic() - self._last_heard_s > limit_s

    def _stale(self, error: ErrorCode) -> None:
        """A heartbeat refused. STALE_BROKER_EPOCH means the registration is gone (UnregisterBroker) or was
        replaced: as Kafka's BrokerLifecycleManager, the broker keeps heartbeating with the epoch it has and
        never registers again while it runs, so an unregistered broker stays unregistered until it restarts
        (its leaderships and ISR membership stay off it; presumed_fenced follows once no heartbeat succeeds)."""
        if error == ErrorCode.not_controller:
            raise NotControllerError(None)
        logger.warning("broker %d sent a heartbeat request but received error %s", self.broker.node_id, error.name)

    async def run(self) -> None:
        if "broker" not in self.broker.roles:
            return  # a controller-only node is no broker: it neither registers nor leads partitions
        self._wake = asyncio.Event()
        interval_s = self.broker.config.get_int("broker.heartbeat.interval.ms") / 1000
        while True:
            delay = interval_s
            try:
                if self.broker_epoch < 0:
                    await self._register()
                await self._heartbeat()
                if self.broker_epoch >= 0 and self.fenced:
                    delay = min(interval_s, 0.1)  # catching up: ask again soon, to be unfenced quickly
            except (TimeoutError, NotControllerError, NodeUnavailableError) as e:
                logger.debug("broker heartbeat: %s", e)
                delay = min(interval_s, 0.2)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except TimeoutError:
                pass  # the interval passed without a wake-up: heartbeat again

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Ask the controller to move leadership away before we stop (best effort, bounded)."""
        deadline = time.monotonic() + timeout_s
        while self.broker_epoch >= 0 and time.monotonic() < deadline:
            try:
                if await asyncio.wait_for(self._heartbeat(want_shut_down=True), max(0.1, deadline - time.monotonic())):
                    return
            except (TimeoutError, NotControllerError, NodeUnavailableError):
                pass  # no controller to hear it right now: try again until the deadline
            await asyncio.sleep(0.1)


class ProducerIdsUnavailableError(Exception):
    """No producer id block is at hand yet (the controller is being asked); retriable."""


class ProducerIdManager:
    def __init__(self, broker: LifecycleBroker) -> None:
        self._broker = broker
        self._next = 0
        self._end = 0
        self._prefetched: tuple[int, int] | None = None
        self._fetching = False
        self._task: asyncio.Task[None] | None = None

    def available(self, count: int = 2) -> bool:
        """At least `count` ids can be handed out now (asking the controller for a block if not)."""
        if self._end - self._next < count:
            if self._prefetched is not None:
                self._next, self._end = self._prefetched  # the rest of the old block is skipped
                self._prefetched = None
            else:
                self._fetch()
        return self._end - self._next >= count

    def generate(self) -> int:
        if not self.available(1):
            raise ProducerIdsUnavailableError("waiting for a producer id block from the controller")
        producer_id = self._next
        self._next += 1
        if self._prefetched is None and (self._end - self._next) < 1000 * PREFETCH_REMAINING_FRACTION:
            self._fetch()
        return producer_id

    def _got(self, start: int, length: int) -> None:
        if self._next >= self._end:
            self._next, self._end = start, start + length
        else:
            self._prefetched = (start, start + length)

    def _fetch(self) -> None:
        if self._fetching or self._prefetched is not None:
            return
        broker = self._broker
        epoch = broker.lifecycle.broker_epoch
        if broker.is_active_controller:
            try:
                pending = broker.controller.allocate_producer_ids(broker.node_id, epoch)
            except NotControllerError:
                return
            if pending.done:
                self._got(*pending.result())
                return
            self._fetching = True
            self._task = asyncio.get_running_loop().create_task(self._await_local(pending))
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._fetching = True
        self._task = loop.create_task(self._fetch_remote(epoch))

    async def _await_local(self, pending: Any) -> None:
        try:
            start, length = await pending
            self._got(start, length)
        except NotControllerError:
            pass  # the next generate() asks the new controller
        finally:
            self._fetching = False

    async def _fetch_remote(self, epoch: int) -> None:
        try:
            response = await self._broker.lifecycle.channel.request(
                ALLOCATE_PRODUCER_IDS_KEY, 0, {"broker_id": self._broker.node_id, "broker_epoch": epoch})
            if response.error_code == ErrorCode.none:
                self._got(int(response.producer_id_start), int(response.producer_id_len))
        except (TimeoutError, NotControllerError, NodeUnavailableError) as e:
            logger.debug("producer id block: %s", e)
        finally:
            self._fetching = False


__all__ = ["BrokerLifecycle", "ControllerChannel", "Endpoint", "ProducerIdManager", "ProducerIdsUnavailableError"]
