"""TopicSettings: one topic's effective configs as strings and parsed once, the view the request paths read.

The broker builds one per topic per (metadata image, broker config) and keeps it until either changes
(Broker.topic_settings), so a produce with acks=all reads `min_insync_replicas` as an attribute instead of
parsing a string per request. Kafka keeps the same thing as a LogConfig per log, rebuilt when a topic
or broker-default config changes (ConfigAdminManager / DynamicLogConfig).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.broker.config import BrokerConfig, effective_topic_config, parse_topic_config
from samsa.broker.config_schema import ConfigValue

__all__ = ["TopicSettings"]


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """A topic's effective configs (its overrides over the broker's defaults)."""

    configs: Mapping[str, str]  # as strings: what DescribeConfigs reports and LogValidatorConfig reads
    values: Mapping[str, ConfigValue]  # every one parsed (a value that does not parse: its Kafka default)
    min_insync_replicas: int  # read by every acks=all append (produce, the coordinators) and by /metrics

    @classmethod
    def of(cls, broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> TopicSettings:
        configs = effective_topic_config(broker, topic_overrides)
        values = parse_topic_config(configs)
        min_isr = values["min.insync.replicas"]
        assert type(min_isr) is int, min_isr  # the schema types it INT
        return cls(configs, values, min_isr)
