"""The streams group coordinator's settings: Kafka's group.streams.* broker configs, and each group's own
streams.* configs (the GROUP config resource, broker.group_configs), which override some of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _no_group_configs(_group_id: str) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class StreamsGroupConfig:
    session_timeout_ms: int = 45_000  # group.streams.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.streams.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.streams.max.size
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    max_standby_replicas: int = 2  # group.streams.max.standby.replicas (bounds a group's own setting)
    initial_rebalance_delay_ms: int = 3_000  # group.streams.initial.rebalance.delay.ms
    assignment_interval_ms: int = 1_000  # group.streams.assignment.interval.ms
    acceptable_recovery_lag: int = 10_000  # group.streams.acceptable.recovery.lag (Kafka 4.4)
    rack_aware_assignment_tags: tuple[str, ...] = ()  # group.streams.rack.aware.assignment.tags
    assignor_name: str = "sticky"  # the first of group.streams.assignors
    group_configs: Callable[[str], Mapping[str, str]] = _no_group_configs  # a group's own configs, read each time

    def _get(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs(group_id).get(key)
        try:
            return int(value) if value is not None else default
        except ValueError:  # validated when set (GroupConfig.validate); never taken
            return default

    def session_timeout_for(self, group_id: str) -> int:
        return self._get(group_id, "streams.session.timeout.ms", self.session_timeout_ms)

    def heartbeat_interval_for(self, group_id: str) -> int:
        return self._get(group_id, "streams.heartbeat.interval.ms", self.heartbeat_interval_ms)

    def num_standby_replicas_for(self, group_id: str) -> int:
        return min(self._get(group_id, "streams.num.standby.replicas", self.num_standby_replicas),
                   self.max_standby_replicas)

    def initial_rebalance_delay_for(self, group_id: str) -> int:
        return self._get(group_id, "streams.initial.rebalance.delay.ms", self.initial_rebalance_delay_ms)

    def assignment_interval_for(self, group_id: str) -> int:
        return self._get(group_id, "streams.assignment.interval.ms", self.assignment_interval_ms)

    def acceptable_recovery_lag_for(self, group_id: str) -> int:
        return self._get(group_id, "streams.acceptable.recovery.lag", self.acceptable_recovery_lag)

    def rack_aware_assignment_tags_for(self, group_id: str) -> tuple[str, ...]:
        """The client tags every member must send when set (Kafka 4.4's streamsGroupAssignmentConfigs): the group's
        own streams.rack.aware.assignment.tags, else the broker's."""
        value = self.group_configs(group_id).get("streams.rack.aware.assignment.tags")
        if value is None:
            return self.rack_aware_assignment_tags
        return tuple(t.strip() for t in value.split(",") if t.strip())

    def assignor_name_for(self, group_id: str) -> str:
        """The assignor the next assignment would use (StreamsGroupDescribe v1's AssignorName)."""
        return self.group_configs(group_id).get("streams.assignor.name") or self.assignor_name
