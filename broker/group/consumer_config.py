"""The consumer group coordinator's settings: Kafka's group.consumer.* broker configs, and each group's own
consumer.* configs (the GROUP config resource, broker.group_configs), which override three of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _no_group_configs(_group_id: str) -> Mapping[str, str]:
    return {}


def _kafka_assignment_interval_ms() -> int:
    return 1_000  # Kafka's default group.consumer.assignment.interval.ms


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Kafka's group.consumer.* broker settings, and a group's own configs (the GROUP config resource) that
    override three of them for that group, as Kafka's GroupConfigManager does."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors (the first is the default)
    group_configs: Callable[[str], Mapping[str, str]] = _no_group_configs  # a group's own configs, read each time
    # group.consumer.assignment.interval.ms (KIP-1263), read each time: the broker config is dynamic.
    assignment_interval_ms: Callable[[], int] = _kafka_assignment_interval_ms

    def session_timeout_for(self, group_id: str) -> int:
        """consumer.session.timeout.ms of the group, else the broker's (read at each heartbeat, as Kafka does)."""
        return _int_or(self.group_configs(group_id).get("consumer.session.timeout.ms"), self.session_timeout_ms)

    def heartbeat_interval_for(self, group_id: str) -> int:
        """consumer.heartbeat.interval.ms of the group, else the broker's."""
        return _int_or(self.group_configs(group_id).get("consumer.heartbeat.interval.ms"), self.heartbeat_interval_ms)

    def assignment_interval_for(self, group_id: str) -> int:
        """consumer.assignment.interval.ms of the group, else the broker's (Kafka's
        consumerGroupAssignmentIntervalMs): the least time between two target assignments of the group."""
        return _int_or(self.group_configs(group_id).get("consumer.assignment.interval.ms"),
                       self.assignment_interval_ms())


def _int_or(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:  # the controller validated it (GroupConfig.validate); never taken
        return default
