"""Group configs (the GROUP config resource, type 32, KIP-848/932/1071): their schema, defaults and checks.

Kafka 4.4.0 lets DescribeConfigs and IncrementalAlterConfigs name a group (it need not exist) and lists
these 21 configs for it, each the broker config's default (DEFAULT_CONFIG, most often group.<name>; the
synonym Kafka lists) unless the group has its own value (GROUP_CONFIG). Six more are internal (Kafka's
ConfigDef.defineInternal: the assignor offload switches, the streams warm-up replicas, acceptable recovery
lag and task offset interval): accepted and checked like the others, described as Kafka describes them
(GroupConfigDef.internal). They tune the consumer (KIP-848), share (KIP-932) and streams (KIP-1071) group
protocols: the values are stored in the metadata log, described and validated as Kafka does
(GroupConfig.validate: names, duplicate rack tags, each value parsed, the broker's bounds, a registered
streams assignor, a session longer than the heartbeat interval, a dead-letter topic that is not internal).
consumer.session.timeout.ms and consumer.heartbeat.interval.ms apply to a consumer group's members from their
next heartbeat (group.consumer_config.ConsumerGroupConfig), the streams ones to a streams group's
(group.service.streams_group_config); the others are stored only (Samsa has no share groups and runs every
assignor on the loop), and classic groups ignore them, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.broker.config_schema import ConfigError, ConfigType, Validator, at_least, check_value, one_of

GROUP_RESOURCE = 32


class ShareAutoOffsetReset:
    """share.auto.offset.reset: earliest, latest, or by_duration:<ISO-8601 duration> (Kafka's
    ShareGroupAutoOffsetResetStrategy validator)."""

    __slots__ = ()
    _DURATION = re.compile(r"P(?=[0-9T])(?:[0-9]+D)?"
                           r"(?:T(?=[0-9])(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+(?:[.,][0-9]{1,9})?S)?)?", re.IGNORECASE)

    def check(self, name: str, value: object) -> None:
        text = str(value)
        if text in ("earliest", "latest"):
            return
        if text.startswith("by_duration:") and self._DURATION.fullmatch(text[len("by_duration:"):]):
            return
        raise ConfigError(name, text, f"Invalid value `{text}` for configuration {name}. The value must be either "
                                      "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")

    def describe(self) -> str:
        return "earliest, latest or by_duration:<PnDTnHnMn.nS>"


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: its type, Kafka's default, its ConfigDef validator, the broker configs that
    bound it (min, max: names and Kafka's defaults), checked after every value parsed, and the broker config
    that gives its default (group.<name> unless named)."""

    name: str
    type: ConfigType
    default: str
    validator: Validator | None
    minimum: tuple[str, int] | None = None
    maximum: tuple[str, int] | None = None
    broker_default: str | None = None
    internal: bool = False  # ConfigDef.defineInternal in Kafka's GroupConfig

    @property
    def broker_key(self) -> str:
        return self.broker_default or f"group.{self.name}"


INT, LONG, STRING, BOOLEAN, LIST = (ConfigType.INT, ConfigType.LONG, ConfigType.STRING, ConfigType.BOOLEAN,
                                    ConfigType.LIST)

# In the order GroupConfig.validate checks the bounds (Kafka 4.4.0's list).
GROUP_CONFIGS: Mapping[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", INT, "5000", at_least(1),
                   ("group.consumer.min.heartbeat.interval.ms", 5000),
                   ("group.consumer.max.heartbeat.interval.ms", 15000)),
    GroupConfigDef("consumer.session.timeout.ms", INT, "45000", at_least(1),
                   ("group.consumer.min.session.timeout.ms", 45000), ("group.consumer.max.session.timeout.ms", 60000)),
    GroupConfigDef("consumer.assignment.interval.ms", INT, "1000", at_least(0),
                   ("group.consumer.min.assignment.interval.ms", 0),
                   ("group.consumer.max.assignment.interval.ms", 15000)),
    GroupConfigDef("consumer.assignor.offload.enable", BOOLEAN, "true", None, internal=True),
    GroupConfigDef("share.heartbeat.interval.ms", INT, "5000", at_least(1),
                   ("group.share.min.heartbeat.interval.ms", 5000), ("group.share.max.heartbeat.interval.ms", 15000)),
    GroupConfigDef("share.session.timeout.ms", INT, "45000", at_least(1),
                   ("group.share.min.session.timeout.ms", 45000), ("group.share.max.session.timeout.ms", 60000)),
    GroupConfigDef("share.record.lock.duration.ms", INT, "30000", at_least(1000),
                   ("group.share.min.record.lock.duration.ms", 15000),
                   ("group.share.max.record.lock.duration.ms", 60000)),
    GroupConfigDef("share.delivery.count.limit", INT, "5", at_least(2),
                   ("group.share.min.delivery.count.limit", 2), ("group.share.max.delivery.count.limit", 10)),
    GroupConfigDef("share.partition.max.record.locks", INT, "2000", at_least(100),
                   ("group.share.min.partition.max.record.locks", 100),
                   ("group.share.max.partition.max.record.locks", 4000)),
    GroupConfigDef("share.assignment.interval.ms", INT, "1000", at_least(0),
                   ("group.share.min.assignment.interval.ms", 0), ("group.share.max.assignment.interval.ms", 15000)),
    GroupConfigDef("share.assignor.offload.enable", BOOLEAN, "true", None, internal=True),
    GroupConfigDef("share.auto.offset.reset", STRING, "latest", ShareAutoOffsetReset(),
                   broker_default="share.auto.offset.reset"),
    GroupConfigDef("share.isolation.level", STRING, "read_uncommitted", one_of("read_committed", "read_uncommitted"),
                   broker_default="share.isolation.level"),
    GroupConfigDef("share.renew.acknowledge.enable", BOOLEAN, "true", None,
                   broker_default="share.renew.acknowledge.enable"),
    GroupConfigDef("streams.heartbeat.interval.ms", INT, "5000", at_least(1),
                   ("group.streams.min.heartbeat.interval.ms", 5000),
                   ("group.streams.max.heartbeat.interval.ms", 15000)),
    GroupConfigDef("streams.session.timeout.ms", INT, "45000", at_least(1),
                   ("group.streams.min.session.timeout.ms", 45000), ("group.streams.max.session.timeout.ms", 60000)),
    GroupConfigDef("streams.num.standby.replicas", INT, "0", at_least(0), None,
                   ("group.streams.max.standby.replicas", 2)),
    GroupConfigDef("streams.assignment.interval.ms", INT, "1000", at_least(0),
                   ("group.streams.min.assignment.interval.ms", 0),
                   ("group.streams.max.assignment.interval.ms", 15000)),
    GroupConfigDef("streams.task.offset.interval.ms", INT, "60000", at_least(1),
                   ("group.streams.min.task.offset.interval.ms", 15000), internal=True),
    GroupConfigDef("streams.num.warmup.replicas", INT, "2", at_least(0), None,
                   ("group.streams.max.warmup.replicas", 20), internal=True),
    GroupConfigDef("streams.assignor.offload.enable", BOOLEAN, "true", None, internal=True),
    GroupConfigDef("streams.acceptable.recovery.lag", LONG, "10000", at_least(0), internal=True),
    GroupConfigDef("streams.initial.rebalance.delay.ms", INT, "3000", at_least(0)),
    GroupConfigDef("streams.assignor.name", STRING, "sticky", None, broker_default="group.streams.assignors"),
    GroupConfigDef("streams.rack.aware.assignment.tags", LIST, "", None),  # duplicates: _duplicate_rack_tags
    # KIP-1191: a share group's dead-letter queue.
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", BOOLEAN, "false", None,
                   broker_default="errors.deadletterqueue.copy.record.enable"),
    GroupConfigDef("errors.deadletterqueue.topic.name", STRING, "", None,
                   broker_default="errors.deadletterqueue.topic.name"),
)}


def group_default(name: str, broker_overrides: Mapping[str, str]) -> str:
    """A group config's value for a group without its own: the broker config behind it (Kafka's defaults)."""
    return broker_overrides.get(GROUP_CONFIGS[name].broker_key, GROUP_CONFIGS[name].default)


def _bound(bound: tuple[str, int], broker_overrides: Mapping[str, str]) -> int:
    raw = broker_overrides.get(bound[0])
    try:
        return int(raw) if raw is not None else bound[1]
    except ValueError:
        return bound[1]


# validateSessionExceedsHeartbeat: each protocol's session timeout and heartbeat interval (with the broker's
# defaults for the one a group does not set).
_SESSION_AND_HEARTBEAT = tuple((f"{p}.session.timeout.ms", f"{p}.heartbeat.interval.ms")
                               for p in ("consumer", "share", "streams"))
RACK_TAGS = "streams.rack.aware.assignment.tags"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"


def _duplicate_rack_tags(configs: Mapping[str, str | None]) -> str | None:
    """validateNoDuplicateRackAwareAssignmentTags, on the raw value (split on commas and the blanks beside them,
    as Java's split("\\s*,\\s*", -1))."""
    raw = configs.get(RACK_TAGS)
    if raw is None:
        return None
    tags = [] if not raw.strip() else re.split(r"\s*,\s*", raw)
    if len(set(tags)) != len(tags):
        return f"{RACK_TAGS} must not contain duplicate tag keys."
    return None


def _dlq_topic(configs: Mapping[str, str | None]) -> str | None:
    name = configs.get(DLQ_TOPIC)
    if name and name.startswith("__"):
        return f"{DLQ_TOPIC}: DLQ topic name must not start with '__'"
    return None


def _assignor(configs: Mapping[str, str | None], broker_overrides: Mapping[str, str]) -> str | None:
    """streams.assignor.name must name an assignor of the broker's group.streams.assignors."""
    name = configs.get("streams.assignor.name")
    if name is None:
        return None
    raw = broker_overrides.get("group.streams.assignors", "sticky")
    registered = [a.strip() for a in raw.split(",") if a.strip()]
    if name not in registered:
        return (f"streams.assignor.name '{name}' is not a registered task assignor. "
                f"Registered assignors are: [{', '.join(registered)}].")
    return None


def _default_int(name: str, broker_overrides: Mapping[str, str]) -> int:
    """group_default(name) as a number (Kafka's own default if the broker config does not parse)."""
    try:
        return int(group_default(name, broker_overrides))
    except ValueError:
        return int(GROUP_CONFIGS[name].default)


def _session_exceeds_heartbeat(parsed: Mapping[str, object], broker_overrides: Mapping[str, str]) -> str | None:
    for session, heartbeat in _SESSION_AND_HEARTBEAT:
        if session not in parsed and heartbeat not in parsed:
            continue
        session_ms = parsed.get(session, _default_int(session, broker_overrides))
        heartbeat_ms = parsed.get(heartbeat, _default_int(heartbeat, broker_overrides))
        assert isinstance(session_ms, int) and isinstance(heartbeat_ms, int)
        if session_ms <= heartbeat_ms:
            return f"{session} must be greater than {heartbeat}"
    return None


def check_group_configs(configs: Mapping[str, str | None], broker_overrides: Mapping[str, str] | None) -> str | None:
    """None if a group's whole set of configs is acceptable, else INVALID_CONFIG's message, in the order of
    Kafka 4.4's GroupConfig.validate: unknown names, duplicate rack tags, each value parsed, then the broker's
    bounds, a registered assignor, session above heartbeat, and the dead-letter topic's name. Without
    `broker_overrides` the checks that read broker configs are left out: the controller leaves them to the
    broker asked."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            return f"Unknown group config name: {name}"
    problem = _duplicate_rack_tags(configs)
    if problem is not None:
        return problem
    parsed: dict[str, object] = {}
    try:
        for name, d in GROUP_CONFIGS.items():
            value = configs.get(name)
            if value is not None:
                parsed[name] = check_value(name, d.type, d.validator, value)
    except ConfigError as e:
        return str(e)
    if broker_overrides is None:
        return _dlq_topic(configs)
    for name, d in GROUP_CONFIGS.items():
        number = parsed.get(name)
        if not isinstance(number, int):
            continue
        low = _bound(d.minimum, broker_overrides) if d.minimum is not None else None
        high = _bound(d.maximum, broker_overrides) if d.maximum is not None else None
        if low is not None and high is not None:
            if not low <= number <= high:
                return f"{name} must be in the range {low} to {high} inclusive."
        elif low is not None and number < low:
            return f"{name} must be greater than or equal to {low}"
        elif high is not None and number > high:
            return f"{name} must be less than or equal to {high}"
    return _assignor(configs, broker_overrides) or _session_exceeds_heartbeat(parsed, broker_overrides) \
        or _dlq_topic(configs)
