"""The broker's state: configuration, identity, logs, metadata image, controller and replica manager.

Start-up order (like Kafka's BrokerServer): read meta.properties, replay the metadata log into an
image, open the partition logs (recovering any that were not shut down cleanly), then publish the
image to the replica manager.  Shut-down closes every log cleanly so the next start skips recovery.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from broker.config import BrokerConfig, effective_topic_config, log_config_for
from broker.controller import Controller
from broker.group.service import GroupService
from broker.metadata.image import MetadataImage
from broker.metadata.log import METADATA_LOG_CONFIG, METADATA_TOPIC, MetadataLog, replay
from broker.metadata.records import BROKER_RESOURCE
from broker.replica_manager import ReplicaManager
from broker.txn.service import TxnService
from storage.config import LogConfig
from storage.log_manager import LogManager

logger = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


def random_kafka_uuid() -> str:
    """A Kafka-style id: 16 random bytes as 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _read_meta_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def load_or_create_meta(data_dir: Path, node_id: int) -> dict[str, str]:
    """Kafka's meta.properties (version 1, KRaft): cluster.id, node.id, directory.id."""
    path = data_dir / "meta.properties"
    if path.exists():
        props = _read_meta_properties(path)
        if int(props.get("node.id", node_id)) != node_id:
            raise SystemExit(
                f"{path} belongs to node {props.get('node.id')}, but this broker is node {node_id}"
            )
        return props
    props = {
        "cluster.id": random_kafka_uuid(),
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
        self._topic_config_cache: dict[str, Mapping[str, str]] = {}
        self._topic_config_image: MetadataImage | None = None
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        meta = load_or_create_meta(data_dir, self.node_id)
        self.cluster_id = meta["cluster.id"]

        started = time.monotonic()
        image = replay(data_dir)
        self.config = config = self._dynamic_config(image)
        self.log_manager = LogManager(
            data_dir,
            max_open_files=config.get_int("samsa.max.open.files"),
            min_free_disk_bytes=config.get_int("samsa.min.free.disk.bytes"),
        )
        self.log_manager.load_logs(lambda topic: self._log_config(image, topic), now_ms())
        metadata_partition = self.log_manager.get_or_create_log(METADATA_TOPIC, 0, METADATA_LOG_CONFIG, now_ms())
        self.metadata_log = MetadataLog(metadata_partition, image)
        self.replica_manager = ReplicaManager(config, self.log_manager)
        for topic, partition in self.replica_manager.unknown_logs(image):
            logger.warning("deleting log %s-%d: its topic no longer exists", topic, partition)
            self.log_manager.delete_log(topic, partition)
        self.replica_manager.apply_image(image)
        self.controller = Controller(config, self.metadata_log, self._publish)
        # The group coordinator replays __consumer_offsets (if it exists) before the first request.
        self.groups = GroupService(self)
        # The transaction coordinator replays __transaction_state and completes any Prepare* transaction.
        self.txn = TxnService(self)
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
        return self.metadata_log.image

    def _dynamic_config(self, image: MetadataImage) -> BrokerConfig:
        return self.static_config.with_dynamic(
            image.configs.get((BROKER_RESOURCE, ""), {}), image.configs.get((BROKER_RESOURCE, str(self.node_id)), {})
        )

    def _publish(self, image: MetadataImage) -> None:
        self.config = self._dynamic_config(image)
        self.replica_manager.config = self.config
        self.replica_manager.apply_image(image)

    def topic_config(self, topic: str) -> Mapping[str, str]:
        """A topic's effective configs (overrides over broker defaults), cached per metadata image."""
        image = self.image
        if image is not self._topic_config_image:
            self._topic_config_cache = {}
            self._topic_config_image = image
        found = self._topic_config_cache.get(topic)
        if found is None:
            found = effective_topic_config(self.config, image.topic_configs(topic))
            self._topic_config_cache[topic] = found
        return found

    def run_retention(self) -> int:
        return self.log_manager.run_retention(now_ms())

    def checkpoint(self) -> None:
        self.log_manager.checkpoint_high_watermarks()

    def close(self) -> None:
        self.log_manager.close()
