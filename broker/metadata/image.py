"""The metadata image: an immutable view of topics, partitions and configs built by applying records.

Like Kafka's MetadataImage, a new image is produced for each batch of records; readers hold an
image and never see it change under them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from samsa.broker.metadata.features import finalized_levels
from samsa.broker.metadata.records import (
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerEndpointsRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UnregisterControllerRecord,
    UserScramCredentialRecord,
)
from samsa.broker.security.acl import Acl, AclOperation, AclPermissionType, PatternType, ResourceType


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()  # an ongoing reassignment (broker.reassignment)
    adding_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionImage]


def _frozen(d: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(d)


_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BrokerImage:
    """A registered broker (Kafka's BrokerRegistration): fenced brokers lead nothing and are not listed."""

    broker_id: int
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    # The metadata offset a fenced broker must have applied to be unfenced: its registration, or the
    # record that last fenced it (its image then shows the leadership that moved off it).
    registration_offset: int = -1


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    next_producer_id: int = 0
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: MappingProxyType({}))
    acls: Mapping[str, Acl] = field(default_factory=lambda: MappingProxyType({}))  # by record id
    # SCRAM credentials by (user name, mechanism) (Kafka's ScramImage)
    scram_credentials: Mapping[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=lambda: MappingProxyType({}))
    # Each registered broker's listeners, "NAME://host:port,..." (BrokerEndpointsRecord), by broker id
    broker_endpoints: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))
    # Feature levels set by FeatureLevelRecord (Kafka's FeaturesImage); the others are at their bootstrap
    # level (broker.metadata.features.finalized_levels)
    feature_levels: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # Registered controllers by id (Kafka's ClusterImage.controllers, KIP-919)
    controllers: Mapping[int, RegisterControllerRecord] = field(default_factory=lambda: MappingProxyType({}))
    # kraft.version lives with the quorum, not in a FeatureLevelRecord (KIP-853): 1 from the log's
    # KRaftVersionRecord (or a snapshot with voters) on, else 0 (a static controller.quorum.voters quorum)
    kraft_version: int = 0

    def finalized_features(self) -> dict[str, int]:
        """Every finalized feature's level, in the order Kafka lists them."""
        return finalized_levels(self.feature_levels, self.kraft_version)

    def with_kraft_version(self, level: int) -> MetadataImage:
        return replace(self, kraft_version=level)

    def feature_level(self, name: str) -> int:
        return self.finalized_features().get(name, 0)

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        """Where broker `broker_id` advertises listener `listener`, if it registered its listeners."""
        for item in self.broker_endpoints.get(broker_id, "").split(","):
            name, sep, address = item.partition("://")
            if sep and name == listener:
                host, _, port = address.rpartition(":")
                return host.strip("[]"), int(port)
        return None

    def live_brokers(self) -> tuple[int, ...]:
        """Unfenced brokers, by id (Kafka places replicas and elects leaders only among these)."""
        return tuple(sorted(b.broker_id for b in self.brokers.values() if not b.fenced))

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, topic), _EMPTY)

    def apply(self, records: Iterable[MetadataRecord], offset: int) -> MetadataImage:
        by_name = dict(self.topics_by_name)
        by_id = dict(self.topics_by_id)
        configs = dict(self.configs)
        next_producer_id = self.next_producer_id
        brokers: dict[int, BrokerImage] | None = None
        acls: dict[str, Acl] | None = None  # copied on the first ACL record only
        scram: dict[tuple[str, int], UserScramCredentialRecord] | None = None
        endpoints: dict[int, str] | None = None
        features: dict[str, int] | None = None
        controllers: dict[int, RegisterControllerRecord] | None = None
        # The partitions of the topics these records touch, copied once per topic and frozen into their
        # TopicImage at the end (copying them per record made a 10,000-partition topic quadratic).
        touched: dict[str, dict[int, PartitionImage]] = {}

        def partitions_of(topic_id: str) -> dict[int, PartitionImage]:
            parts = touched.get(topic_id)
            if parts is None:
                parts = touched[topic_id] = dict(by_id[topic_id].partitions)
            return parts

        for record in records:
            match record:
                case TopicRecord(name=name, topic_id=topic_id):
                    topic = TopicImage(name, topic_id, MappingProxyType({}))
                    by_name[name] = topic
                    by_id[topic_id] = topic
                    touched[topic_id] = {}
                case PartitionRecord():
                    if record.topic_id not in by_id:
                        continue  # never written by a correct controller; a replay must not die on it
                    partitions_of(record.topic_id)[record.partition_id] = PartitionImage(
                        record.partition_id, record.replicas, record.isr, record.leader,
                        record.leader_epoch, record.partition_epoch,
                        record.removing_replicas, record.adding_replicas,
                    )
                case PartitionChangeRecord():
                    if record.topic_id not in by_id:
                        continue
                    parts = partitions_of(record.topic_id)
                    old = parts.get(record.partition_id)
                    if old is None:
                        continue
                    leader_changed = record.leader is not None and record.leader != old.leader
                    # Kafka bumps the leader epoch when the leader changes and when replicas leave the
                    # replica set (a reassignment completing), so that a removed replica fetching with the
                    # old epoch is fenced (PartitionChangeBuilder's epoch bump for reassignment).
                    replicas_removed = record.replicas is not None and not set(old.replicas) <= set(record.replicas)
                    parts[record.partition_id] = replace(
                        old,
                        isr=record.isr if record.isr is not None else old.isr,
                        leader=record.leader if record.leader is not None else old.leader,
                        replicas=record.replicas if record.replicas is not None else old.replicas,
                        leader_epoch=old.leader_epoch + 1 if leader_changed or replicas_removed else old.leader_epoch,
                        partition_epoch=old.partition_epoch + 1,
                        removing_replicas=(old.removing_replicas if record.removing_replicas is None
                                           else record.removing_replicas),
                        adding_replicas=(old.adding_replicas if record.adding_replicas is None
                                         else record.adding_replicas),
                    )
                case RemoveTopicRecord(topic_id=topic_id):
                    if topic_id not in by_id:
                        continue
                    touched.pop(topic_id, None)
                    topic = by_id.pop(topic_id)
                    by_name.pop(topic.name, None)
                    configs.pop((TOPIC_RESOURCE, topic.name), None)
                case ConfigRecord():
                    key = (record.resource_type, record.resource_name)
                    current = dict(configs.get(key, _EMPTY))
                    if record.value is None:
                        current.pop(record.name, None)
                    else:
                        current[record.name] = record.value
                    if current:
                        configs[key] = _frozen(current)
                    else:
                        configs.pop(key, None)
                case ProducerIdsRecord(next_producer_id=npid):
                    next_producer_id = max(next_producer_id, npid)
                case RegisterBrokerRecord():
                    endpoints = dict(self.broker_endpoints) if endpoints is None else endpoints
                    endpoints.pop(record.broker_id, None)  # a new registration names its listeners anew
                    brokers = dict(self.brokers) if brokers is None else brokers
                    brokers[record.broker_id] = BrokerImage(
                        record.broker_id, record.broker_epoch, record.incarnation_id, record.host, record.port,
                        record.rack, record.fenced, False,
                        offset if record.registered_at < 0 else record.registered_at)
                case BrokerRegistrationChangeRecord():
                    brokers = dict(self.brokers) if brokers is None else brokers
                    old_broker = brokers.get(record.broker_id)
                    if old_broker is not None and old_broker.broker_epoch == record.broker_epoch:
                        brokers[record.broker_id] = replace(
                            old_broker,
                            fenced=old_broker.fenced if record.fenced is None else record.fenced,
                            registration_offset=(offset if record.fenced and not old_broker.fenced
                                                 else old_broker.registration_offset),
                            in_controlled_shutdown=(old_broker.in_controlled_shutdown
                                                    if record.in_controlled_shutdown is None
                                                    else record.in_controlled_shutdown),
                        )
                case AccessControlEntryRecord():
                    acls = dict(self.acls) if acls is None else acls
                    acls[record.id] = _acl(record)
                case RemoveAccessControlEntryRecord():
                    acls = dict(self.acls) if acls is None else acls
                    acls.pop(record.id, None)
                case BrokerEndpointsRecord():
                    registered = (brokers if brokers is not None else self.brokers).get(record.broker_id)
                    if registered is not None and registered.broker_epoch == record.broker_epoch:
                        endpoints = dict(self.broker_endpoints) if endpoints is None else endpoints
                        endpoints[record.broker_id] = record.listeners
                case UserScramCredentialRecord():
                    scram = dict(self.scram_credentials) if scram is None else scram
                    scram[(record.name, record.mechanism)] = record
                case RemoveUserScramCredentialRecord():
                    scram = dict(self.scram_credentials) if scram is None else scram
                    scram.pop((record.name, record.mechanism), None)
                case FeatureLevelRecord():
                    features = dict(self.feature_levels) if features is None else features
                    features[record.name] = record.feature_level
                case RegisterControllerRecord():
                    controllers = dict(self.controllers) if controllers is None else controllers
                    controllers[record.controller_id] = record
                case UnregisterControllerRecord():
                    controllers = dict(self.controllers) if controllers is None else controllers
                    controllers.pop(record.controller_id, None)
                case UnregisterBrokerRecord():
                    brokers = dict(self.brokers) if brokers is None else brokers
                    gone = brokers.get(record.broker_id)
                    if gone is not None and gone.broker_epoch == record.broker_epoch:
                        del brokers[record.broker_id]
                        endpoints = dict(self.broker_endpoints) if endpoints is None else endpoints
                        endpoints.pop(record.broker_id, None)
        for topic_id, parts in touched.items():
            topic = replace(by_id[topic_id], partitions=MappingProxyType(parts))
            by_id[topic_id] = topic
            named = by_name.get(topic.name)
            if named is None or named.topic_id == topic_id:
                by_name[topic.name] = topic
        return MetadataImage(
            offset=offset,
            topics_by_name=MappingProxyType(by_name),
            topics_by_id=MappingProxyType(by_id),
            configs=MappingProxyType(configs),
            next_producer_id=next_producer_id,
            brokers=self.brokers if brokers is None else MappingProxyType(brokers),
            acls=self.acls if acls is None else MappingProxyType(acls),
            scram_credentials=self.scram_credentials if scram is None else MappingProxyType(scram),
            broker_endpoints=self.broker_endpoints if endpoints is None else MappingProxyType(endpoints),
            feature_levels=self.feature_levels if features is None else MappingProxyType(features),
            controllers=self.controllers if controllers is None else MappingProxyType(controllers),
            kraft_version=self.kraft_version,
        )

    def to_records(self) -> list[MetadataRecord]:
        """Records that rebuild this image from an empty one: the content of a metadata snapshot."""
        # Features first, as in Kafka's snapshots: what follows may depend on them.
        records: list[MetadataRecord] = [FeatureLevelRecord(name, level)
                                         for name, level in sorted(self.feature_levels.items())]
        records += [self.controllers[c] for c in sorted(self.controllers)]
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            records.append(RegisterBrokerRecord(b.broker_id, b.broker_epoch, b.incarnation_id, b.host, b.port,
                                                b.rack, b.fenced, b.registration_offset))
            if b.broker_id in self.broker_endpoints:
                records.append(BrokerEndpointsRecord(b.broker_id, b.broker_epoch, self.broker_endpoints[b.broker_id]))
            if b.in_controlled_shutdown:
                records.append(BrokerRegistrationChangeRecord(b.broker_id, b.broker_epoch, None, True))
        for topic in self.topics_by_id.values():
            records.append(TopicRecord(topic.name, topic.topic_id))
            for p in topic.partitions.values():
                records.append(PartitionRecord(topic.topic_id, p.partition_id, p.replicas, p.isr, p.leader,
                                               p.leader_epoch, p.partition_epoch, p.removing_replicas,
                                               p.adding_replicas))
        for (resource_type, resource_name), values in self.configs.items():
            records += [ConfigRecord(resource_type, resource_name, k, v) for k, v in values.items()]
        if self.next_producer_id:
            records.append(ProducerIdsRecord(-1, -1, self.next_producer_id))
        records += [AccessControlEntryRecord(acl_id, a.resource_type, a.resource_name, a.pattern_type, a.principal,
                                             a.host, a.operation, a.permission_type)
                    for acl_id, a in self.acls.items()]
        records += [self.scram_credentials[key] for key in sorted(self.scram_credentials)]
        return records


def _acl(record: AccessControlEntryRecord) -> Acl:
    return Acl(ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
               record.principal, record.host, AclOperation(record.operation),
               AclPermissionType(record.permission_type))
