"""Group configs (the GROUP config resource, type 32, KIP-848/932/1071): their schema, defaults and checks.

Kafka 4.1.2 lets DescribeConfigs and IncrementalAlterConfigs name a group (it need not exist) and lists
these ten configs for it, each the broker's group.<name> default (DEFAULT_CONFIG) unless the group has its
own value (GROUP_CONFIG). They tune the consumer (KIP-848), share (KIP-932) and streams (KIP-1071) group
protocols: the values are stored in the metadata log, described and validated as Kafka does
(GroupConfig.validate). consumer.session.timeout.ms and consumer.heartbeat.interval.ms apply to a consumer
group's members from their next heartbeat (group.consumer_coordinator.ConsumerGroupConfig); the share and
streams ones are stored only (Samsa has neither protocol), and classic groups ignore them, as in Kafka.
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
    """One group config: its type, Kafka's default, its ConfigDef validator, and the broker configs that
    bound it (min, max: names and Kafka's defaults), checked after every value parsed."""

    name: str
    type: ConfigType
    default: str
    validator: Validator | None
    minimum: tuple[str, int] | None = None
    maximum: tuple[str, int] | None = None


INT, STRING = ConfigType.INT, ConfigType.STRING

# In the order GroupConfig.validate checks the bounds.
GROUP_CONFIGS: Mapping[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", INT, "5000", at_least(1),
                   ("group.consumer.min.heartbeat.interval.ms", 5000),
                   ("group.consumer.max.heartbeat.interval.ms", 15000)),
    GroupConfigDef("consumer.session.timeout.ms", INT, "45000", at_least(1),
                   ("group.consumer.min.session.timeout.ms", 45000), ("group.consumer.max.session.timeout.ms", 60000)),
    GroupConfigDef("share.heartbeat.interval.ms", INT, "5000", at_least(1),
                   ("group.share.min.heartbeat.interval.ms", 5000), ("group.share.max.heartbeat.interval.ms", 15000)),
    GroupConfigDef("share.session.timeout.ms", INT, "45000", at_least(1),
                   ("group.share.min.session.timeout.ms", 45000), ("group.share.max.session.timeout.ms", 60000)),
    GroupConfigDef("share.record.lock.duration.ms", INT, "30000", at_least(1000),
                   ("group.share.min.record.lock.duration.ms", 15000),
                   ("group.share.max.record.lock.duration.ms", 60000)),
    GroupConfigDef("share.auto.offset.reset", STRING, "latest", ShareAutoOffsetReset()),
    GroupConfigDef("share.isolation.level", STRING, "read_uncommitted", one_of("read_committed", "read_uncommitted")),
    GroupConfigDef("streams.heartbeat.interval.ms", INT, "5000", at_least(1),
                   ("group.streams.min.heartbeat.interval.ms", 5000),
                   ("group.streams.max.heartbeat.interval.ms", 15000)),
    GroupConfigDef("streams.session.timeout.ms", INT, "45000", at_least(1),
                   ("group.streams.min.session.timeout.ms", 45000), ("group.streams.max.session.timeout.ms", 60000)),
    GroupConfigDef("streams.num.standby.replicas", INT, "0", at_least(0), None,
                   ("group.streams.max.standby.replicas", 2)),
)}


def group_default(name: str, broker_overrides: Mapping[str, str]) -> str:
    """A group config's value for a group without its own: the broker's group.<name> (Kafka's defaults)."""
    return broker_overrides.get(f"group.{name}", GROUP_CONFIGS[name].default)


def _bound(bound: tuple[str, int], broker_overrides: Mapping[str, str]) -> int:
    raw = broker_overrides.get(bound[0])
    try:
        return int(raw) if raw is not None else bound[1]
    except ValueError:
        return bound[1]


def check_group_configs(configs: Mapping[str, str | None], broker_overrides: Mapping[str, str] | None) -> str | None:
    """None if a group's whole set of configs is acceptable, else INVALID_CONFIG's message (Kafka's
    GroupConfig.validate: unknown names, then each value parsed, then the broker's bounds; without
    `broker_overrides`, the bounds are not checked: the controller leaves them to the broker asked)."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            return f"Unknown group config name: {name}"
    parsed: dict[str, object] = {}
    try:
        for name, d in GROUP_CONFIGS.items():
            value = configs.get(name)
            if value is not None:
                parsed[name] = check_value(name, d.type, d.validator, value)
    except ConfigError as e:
        return str(e)
    if broker_overrides is None:
        return None
    for name, d in GROUP_CONFIGS.items():
        number = parsed.get(name)
        if not isinstance(number, int):
            continue
        if d.minimum is not None and number < _bound(d.minimum, broker_overrides):
            return f"{name} must be greater than or equal to {d.minimum[0]}"
        if d.maximum is not None and number > _bound(d.maximum, broker_overrides):
            return f"{name} must be less than or equal to {d.maximum[0]}"
    return None
