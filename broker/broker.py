"""The broker's state: configuration, identity, logs, metadata image, controller and replica manager.

Start-up order (like Kafka's BrokerServer): read meta.properties, replay the metadata log into an
image, open the partition logs (recovering any that were not shut down cleanly), then publish the
image to the replica manager.  Shut-down closes every log cleanly so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
import uuid
from collections.abc import Collection, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from samsa.broker.commit_bounds import CommitBounds
from samsa.broker.config import BrokerConfig, log_config_for
from samsa.broker.connection import KafkaConnection
from samsa.broker.controller import AlterPartitionChange, Controller, Pending, TopicResult, TopicSpec
from samsa.broker.forwarding import forward
from samsa.broker.group.service import GroupService
from samsa.broker.lifecycle import BrokerLifecycle, ProducerIdManager
from samsa.broker.log_cleaner import LogCleaner
from samsa.broker.metadata.image import BrokerImage, MetadataImage
from samsa.broker.metadata.log import METADATA_LOG_CONFIG, METADATA_TOPIC
from samsa.broker.metadata.quorum import Endpoint, MetadataQuorum, NotControllerError
from samsa.broker.metadata.records import BROKER_RESOURCE
from samsa.broker.metadata.voter_changes import format_standalone
from samsa.broker.node_client import NodeUnavailableError
from samsa.broker.observability.request_metrics import RequestMetrics
from samsa.broker.replica_fetcher import ReplicaFetcherManager
from samsa.broker.replica_manager import Partition, ReplicaManager
from samsa.broker.security.client import controller_security, inter_broker_security
from samsa.broker.state_change_log import log_state_changes
from samsa.broker.topic_settings import TopicSettings
from samsa.broker.txn.service import TxnService
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class
from samsa.raft.codec import CONTROLLER_LISTENER_NAME
from samsa.raft.quorum_state import QuorumConfig
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterEndpoint
from samsa.storage.config import LogConfig
from samsa.storage.dir_lock import DataDirLock, DataDirLockedError
from samsa.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

ISR_CHANGE_TIMEOUT_MS = 10_000  # an AlterPartition whose outcome never showed up is asked again


def now_ms() -> int:
    return int(time.time() * 1000)


def random_kafka_uuid() -> str:
    """A Kafka-style id: 16 random bytes as 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID | None:
    """The inverse of random_kafka_uuid (Kafka's Uuid.fromString); None for anything else."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


def _read_meta_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def controller_endpoints(config: BrokerConfig) -> tuple[VoterEndpoint, ...]:
    """This node's controller listener as a voter's entry in the voter set gives it (KIP-853; UpdateRaftVoter makes
    the entry say so): where it listens, or, bound to every address, its own controller.quorum.voters address, else
    the advertised host; () for a node without a controller listener."""
    address = config.controller_listen()
    if address is None:
        return ()
    host, port = address
    if host in ("", "0.0.0.0", "::"):
        static = config.quorum_voters().get(config.node_id)
        host = static[0] if static is not None and static[1] == port else config.advertised_host
    return (VoterEndpoint(CONTROLLER_LISTENER_NAME, host, port),)


def cluster_id_for_quorum(voters: str) -> str:
    """A cluster id every node of a quorum derives alike when none is given (Kafka makes the operator
    format each node's storage with the same id; `samsa serve` needs no format step)."""
    digest = hashlib.sha256(b"samsa-cluster:" + ",".join(sorted(voters.split(","))).encode()).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def load_or_create_meta(data_dir: Path, node_id: int, cluster_id: str | None = None) -> dict[str, str]:
    """Kafka's meta.properties (version 1, KRaft): cluster.id, node.id, directory.id."""
    path = data_dir / "meta.properties"
    if path.exists():
        props = _read_meta_properties(path)
        if int(props.get("node.id", node_id)) != node_id:
            raise SystemExit(
                f"{path} belongs to node {props.get('node.id')}, but this broker is node {node_id}"
            )
        if cluster_id is not None and props.get("cluster.id") != cluster_id:
            raise SystemExit(f"{path} belongs to cluster {props.get('cluster.id')}, not {cluster_id}")
        return props
    props = {
        "cluster.id": cluster_id or random_kafka_uuid(),
        "directory.id": random_kafka_uuid(),
        "node.id": str(node_id),
        "version": "1",
    }
    tmp = path.with_suffix(".tmp")
    body = "#\n#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()) + "\n"
    body += "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    tmp.write_text(body)
    tmp.replace(path)
    return props


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.static_config = config
        self.config = config
        self.node_id = config.node_id
        # topic -> TopicSettings, valid for one (metadata image, broker config) pair: see topic_settings
        self._topic_settings: dict[str, TopicSettings] = {}
        self._topic_settings_image: MetadataImage | None = None
        self._topic_settings_config: BrokerConfig | None = None
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        # The directory is this process's before anything in it is read or written (Kafka's .lock).
        try:
            self._dir_lock = DataDirLock(data_dir)
        except DataDirLockedError as e:
            raise SystemExit(str(e)) from None
        try:
            self._open(config, data_dir)
        except BaseException:
            self._dir_lock.release()
            raise

    def _open(self, config: BrokerConfig, data_dir: Path) -> None:
        voters = config.quorum_voters()
        cluster_id = config.overrides.get("samsa.cluster.id") or (
            cluster_id_for_quorum(config.get("controller.quorum.voters")) if voters else None)
        meta = load_or_create_meta(data_dir, self.node_id, cluster_id)
        self.cluster_id = meta["cluster.id"]
        self.incarnation_id = str(uuid.uuid4())
        self.request_metrics = RequestMetrics()
        self.connections: Collection[KafkaConnection] = ()  # the open connections, once serving
        self.roles = config.roles
        # No voters configured: this node alone is the quorum (Kafka's combined mode, `make run`).
        self.single_voter = not voters
        endpoints = ({n: Endpoint(h, p) for n, (h, p) in voters.items()} if voters
                     else {self.node_id: Endpoint(config.listen_host, 0)})
        # How this node reaches the other brokers' inter-broker listener and the controllers' listener.
        self.inter_broker_security = inter_broker_security(config)
        self.controller_security = controller_security(config)

        started = time.monotonic()
        self.log_manager = LogManager(
            data_dir,
            max_open_files=config.get_int("samsa.max.open.files"),
            min_free_disk_bytes=config.get_int("samsa.min.free.disk.bytes"),
        )
        metadata_partition = self.log_manager.get_or_create_log(METADATA_TOPIC, 0, METADATA_LOG_CONFIG, now_ms())
        self.quorum = MetadataQuorum(
            node_id=self.node_id, cluster_id=self.cluster_id, voters=endpoints, log=metadata_partition,
            config=QuorumConfig(
                voters=frozenset(endpoints),
                election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
                fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
            ),
            snapshot_every_entries=config.get_int("samsa.metadata.snapshot.interval.entries"),
            disk_guard=self.log_manager.disk_guard,
            security=self.controller_security,
            directory_id=parse_kafka_uuid(meta.get("directory.id", "")) or ZERO_DIRECTORY_ID,
            listeners=controller_endpoints(config),
        )
        if self.single_voter:
            format_standalone(self.quorum)
        # A single voter has committed its whole log by now; a cluster member only knows what its disk
        # holds (maybe uncommitted): good enough to open logs, not to delete or serve anything yet.
        image = self.quorum.image if self.single_voter else self.quorum.provisional_image
        self.config = config = self._dynamic_config(image)
        self.log_manager.load_logs(lambda topic: self._log_config(image, topic), now_ms())
        self.replica_manager = ReplicaManager(config, self.log_manager)
        # compacts the compacted logs (server.py runs it); /metrics reads its figures
        self.log_cleaner = LogCleaner(self.log_manager, lambda: self.config)
        self.replica_fetchers = ReplicaFetcherManager(self)
        self.replica_manager.on_followers_changed = self.replica_fetchers.update
        self.replica_manager.on_partitions_created = self._on_partitions_created
        self._published = False
        self.ready = asyncio.Event()  # the image has caught up: clients may be served
        self._creating: set[str] = set()  # topics being created in the background
        self._background: set[asyncio.Task[None]] = set()
        self.controller = Controller(config, self.quorum)
        self.producer_ids = ProducerIdManager(self)
        self.lifecycle = BrokerLifecycle(self)
        if self.single_voter:
            self._apply(self.quorum.image, startup=True)
        self.quorum.set_listeners(self._on_metadata, self._on_leader_change)
        # The group coordinator replays __consumer_offsets (if it exists) before the first request.
        self.groups = GroupService(self)
        # The transaction coordinator replays __transaction_state and completes any Prepare* transaction.
        self.txn = TxnService(self)
        self.commit_bounds = CommitBounds(self)
        if self.single_voter and "broker" in self.roles:
            self.lifecycle.register_locally()
        logger.info(
            "broker %d of cluster %s loaded %d partitions in %.2f s",
            self.node_id, self.cluster_id, sum(1 for _ in self.replica_manager.partitions()),
            time.monotonic() - started,
        )

    def _log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        if topic == METADATA_TOPIC:
            return METADATA_LOG_CONFIG
        return log_config_for(self.config, image.topic_configs(topic))

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    @property
    def is_active_controller(self) -> bool:
        return self.quorum.is_leader and "controller" in self.roles

    def controller_endpoint(self) -> tuple[int, Endpoint] | None:
        """The active controller's id and controller listener, if known and not this node."""
        leader = self.quorum.leader_id
        if leader is None or leader == self.node_id:
            return None
        endpoint = self.quorum.endpoint(leader)
        return None if endpoint is None else (leader, endpoint)

    def _dynamic_config(self, image: MetadataImage) -> BrokerConfig:
        return self.static_config.with_dynamic(
            image.configs.get((BROKER_RESOURCE, ""), {}), image.configs.get((BROKER_RESOURCE, str(self.node_id)), {})
        )

    def _on_metadata(self, image: MetadataImage) -> None:
        # Until the image has caught up with the quorum's committed offset, it may lack topics that
        # exist: publishing it would delete their logs. Kafka's brokers wait the same way.
        if not self.quorum.caught_up:
            return
        self._apply(image, startup=not self._published)

    def _apply(self, image: MetadataImage, *, startup: bool) -> None:
        self.config = self._dynamic_config(image)
        self.replica_manager.config = self.config
        if startup:
            for topic, partition in self.replica_manager.unknown_logs(image):
                logger.warning("deleting log %s-%d: its topic no longer exists", topic, partition)
                self.log_manager.delete_log(topic, partition)
        self._published = True
        self.ready.set()
        if not startup and self.is_active_controller:
            log_state_changes(self.replica_manager.image, image)  # once per cluster: by the active controller
        self.replica_manager.apply_image(image)
        self._notify_coordinators(image)

    def _on_partitions_created(self) -> None:
        # logs created in steps after the image was applied: the coordinators may lead them now
        self._notify_coordinators(self.replica_manager.image)

    def _notify_coordinators(self, image: MetadataImage) -> None:
        """The group and transaction coordinators load or drop the internal partitions they now (no longer)
        lead. (During construction they may not exist yet: they load on their own when built.)"""
        for coordinator in (getattr(self, "groups", None), getattr(self, "txn", None)):
            if coordinator is not None:
                coordinator.on_metadata(image)

    def _on_leader_change(self, leader: bool, leader_id: int | None) -> None:
        self.lifecycle.wake()

    async def maybe_change_isr(self) -> None:
        """Leaders ask the controller to shrink or expand their ISR (Kafka: isr-expiration and the
        expansion check on the fetch path), in one AlterPartition per round."""
        now = now_ms()
        lag_max = self.config.get_int("replica.lag.time.max.ms")
        live = set(self.image.live_brokers())
        changes: list[tuple[Partition, tuple[int, ...]]] = []
        for p in self.replica_manager.leader_partitions():
            if len(p.replicas) > 1:
                if p.pending_isr is not None and now - p.pending_since_ms > ISR_CHANGE_TIMEOUT_MS:
                    p.pending_isr = None  # the answer or its record never came: ask again
                new_isr = p.isr_change(now, lag_max, live)
                if new_isr is not None:
                    changes.append((p, new_isr))
        if not changes:
            return
        for p, new_isr in changes:
            logger.info("%s-%d: asking to change the ISR from %s to %s", p.topic, p.partition_id, list(p.isr),
                        list(new_isr))
            p.pending_isr, p.pending_since_ms = new_isr, now
            p.possibly_added.update(set(new_isr) - set(p.isr))
        try:
            errors = await self._alter_partition(changes)
        except (TimeoutError, NotControllerError, NodeUnavailableError) as e:
            logger.info("AlterPartition failed: %s", e)
            errors = {(p.topic_id, p.partition_id): ErrorCode.not_controller for p, _ in changes}
        for p, _new_isr in changes:
            error = errors.get((p.topic_id, p.partition_id), ErrorCode.none)
            if error != ErrorCode.none:
                logger.info("%s-%d: ISR change refused: %s", p.topic, p.partition_id, error.name)
                p.pending_isr = None

    async def _alter_partition(
        self, changes: Sequence[tuple[Partition, tuple[int, ...]]]
    ) -> dict[tuple[str, int], ErrorCode]:
        epoch = self.lifecycle.broker_epoch
        if self.is_active_controller:
            request = [AlterPartitionChange(p.topic_id, p.partition_id, p.leader_epoch, p.partition_epoch, isr)
                       for p, isr in changes]
            code, pending = self.controller.alter_partition(self.node_id, epoch, request)
            if pending is None:
                return {(p.topic_id, p.partition_id): code for p, _ in changes}
            return {(r.change.topic_id, r.change.partition_id): r.error_code for r in await pending}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for p, isr in changes:
            by_topic.setdefault(p.topic_id, []).append({
                "partition_index": p.partition_id, "leader_epoch": p.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr],
                "leader_recovery_state": 0, "partition_epoch": p.partition_epoch})
        response = await self.lifecycle.channel.request(56, 3, {
            "broker_id": self.node_id, "broker_epoch": epoch,
            "topics": [{"topic_id": uuid.UUID(t), "partitions": parts} for t, parts in by_topic.items()]})
        if response.error_code != ErrorCode.none:
            return {(p.topic_id, p.partition_id): ErrorCode(response.error_code) for p, _ in changes}
        return {(str(t.topic_id), int(r.partition_index)): ErrorCode(r.error_code)
                for t in response.topics for r in t.partitions}

    def partition_leader(self, topic: str, partition: int) -> tuple[ErrorCode, BrokerImage | None]:
        """The live broker leading `topic`-`partition`, or COORDINATOR_NOT_AVAILABLE (the error the
        coordinator lookups need) when the partition has no live leader or does not exist yet."""
        image = self.image
        found = image.topics_by_name.get(topic)
        p = found.partitions.get(partition) if found is not None else None
        leader = image.brokers.get(p.leader) if p is not None else None
        if leader is None or leader.fenced:
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, leader

    def create_topics_soon(self, specs: Sequence[TopicSpec]) -> list[TopicResult] | None:
        """Create topics for a request that cannot wait for the controller (auto-creation, internal
        topics): the results if the topics were created at once (this node is the active controller of
        a one-voter quorum), else None while the creation goes on in the background, through the
        active controller; the caller answers with a retriable error meanwhile, as Kafka does."""
        specs = [s for s in specs if s.name not in self._creating]
        if not specs:
            return None
        if self.is_active_controller:
            try:
                pending = self.controller.create_topics(specs, validate_only=False)
            except NotControllerError:
                return None
            if pending.done:
                return pending.result()
            self._spawn(self._await_creation(specs, pending))
            return None
        self._spawn(self._forward_creation(specs))
        return None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _await_creation(self, specs: Sequence[TopicSpec], pending: Pending[list[TopicResult]]) -> None:
        self._creating.update(s.name for s in specs)
        try:
            for r in await pending:
                if r.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
                    logger.warning("could not create topic %s: %s %s", r.name, r.error_code.name, r.error_message)
        except NotControllerError:
            pass  # leadership moved: the caller's retriable error makes the client ask again
        finally:
            self._creating.difference_update(s.name for s in specs)

    async def _forward_creation(self, specs: Sequence[TopicSpec]) -> None:
        self._creating.update(s.name for s in specs)
        try:
            request = build(request_class(19, 7), {"timeout": 30_000, "validate_only": False, "topics": [
                {"name": s.name, "num_partitions": s.num_partitions, "replication_factor": s.replication_factor,
                 "assignments": (), "configs": [{"name": k, "value": v} for k, v in s.configs.items()]}
                for s in specs]})
            response = await forward(self, 19, 7, request)
            for t in response.topics if response is not None else ():
                if t.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
                    logger.warning("could not create topic %s: %s", t.name, t.error_message)
        finally:
            self._creating.difference_update(s.name for s in specs)

    def topic_config(self, topic: str) -> Mapping[str, str]:
        """A topic's effective configs (overrides over broker defaults) as strings, cached as topic_settings."""
        return self.topic_settings(topic).configs

    def topic_settings(self, topic: str) -> TopicSettings:
        """A topic's effective configs, parsed once per metadata image and broker config.

        Rebuilt when either object changes: a new image (a topic's configs altered) or a new broker config
        (a dynamic broker default such as min.insync.replicas, which reaches self.config only when the
        image is applied, possibly after a read of that image already filled the cache).
        """
        image, config = self.image, self.config
        if image is not self._topic_settings_image or config is not self._topic_settings_config:
            self._topic_settings = {}
            self._topic_settings_image, self._topic_settings_config = image, config
        found = self._topic_settings.get(topic)
        if found is None:
            found = TopicSettings.of(config, image.topic_configs(topic))
            self._topic_settings[topic] = found
        return found

    def run_retention(self) -> int:
        return self.log_manager.run_retention(now_ms())

    def checkpoint(self) -> None:
        self.log_manager.checkpoint_high_watermarks()

    def close(self) -> None:
        try:
            self.replica_manager.close()
            self.log_manager.close()
        finally:
            self._dir_lock.release()
