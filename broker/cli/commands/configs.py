"""DescribeConfigs and IncrementalAlterConfigs for topics and brokers, shared by `topics` and `config`."""

from __future__ import annotations

from typing import Any

from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.errors import CliError, check

TOPIC, BROKER = 2, 4  # ConfigResource.Type
SET, DELETE = 0, 1  # AlterConfigOp.OpType
# DescribeConfigsResponse config_source, as kafka-configs.sh names them
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


def parse_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} {item!r}: expected KEY=VALUE (e.g. {option} retention.ms=60000)")
        out[key.strip()] = value.strip()
    return out


def describe(client: RoutingClient, resource_type: int, name: str, keys: list[str] | None = None,
             node_id: int | None = None) -> list[dict[str, Any]]:
    """The resource's configs as dicts: name, value, source, read_only, sensitive. A broker's own configs are
    asked of that broker (Kafka's AdminClient does the same)."""
    values = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
              "include_synonyms": False, "include_documentation": False}
    if node_id is not None:
        r = client.retrying(lambda: client.request_node(node_id, 32, values))
    else:
        r = client.request(client.any_connection(), 32, values)
    result = r.results[0]
    what = f"topic {name!r}" if resource_type == TOPIC else f"broker {name or '(cluster default)'}"
    check(result.error_code, what, result.error_message)
    out = []
    for c in result.configs:
        source = int(getattr(c.config_source, "value", c.config_source))
        out.append({"name": c.name, "value": None if c.is_sensitive else c.value,
                    "source": SOURCES.get(source, str(source)), "read_only": bool(c.read_only),
                    "sensitive": bool(c.is_sensitive)})
    return sorted(out, key=lambda c: c["name"])


def alter(client: RoutingClient, resource_type: int, name: str, set_: dict[str, str], delete: list[str],
          node_id: int | None = None) -> None:
    if not set_ and not delete:
        raise CliError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    configs = [{"name": k, "config_operation": SET, "value": v} for k, v in set_.items()]
    configs += [{"name": k, "config_operation": DELETE, "value": None} for k in delete]
    values = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": configs}],
              "validate_only": False}
    if node_id is not None:
        r = client.retrying(lambda: client.request_node(node_id, 44, values))
    else:
        r = client.request(client.any_connection(), 44, values)
    result = r.responses[0]
    what = f"topic {name!r}" if resource_type == TOPIC else f"broker {name or '(cluster default)'}"
    check(result.error_code, what, result.error_message)
