"""Regenerates broker/kafka_broker_configs.py from a running reference Apache Kafka (the oracle).

    .venv/bin/python compat-tests/differential/gen_kafka_broker_configs.py [BOOTSTRAP]

Without BOOTSTRAP it starts the oracle (oracle_fixture.kafka_cluster). It asks DescribeConfigs for the
broker's configs (name, type, default, read-only, sensitive) and, for each config Kafka lets a broker
change at run time, IncrementalAlterConfigs (validate only) at the cluster-default level to learn which
ones are per broker only. Facts about Kafka's interface, not its code: no documentation text is kept.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from samsa.broker.client import Connection

OUT = Path(__file__).resolve().parents[2] / "broker" / "kafka_broker_configs.py"
DEFAULT_CONFIG = 5
PER_BROKER_ONLY = "Cannot update these configs at default cluster level"

HEADER = '''# ruff: noqa: E501
"""Apache Kafka {version}'s broker configs as its DescribeConfigs lists them (generated; do not edit).

Regenerate with compat-tests/differential/gen_kafka_broker_configs.py. Per config: its ConfigType, Kafka's
default (None: no default), whether a broker may change it at run time (read_only false in Kafka's answer),
whether only per broker (not as the cluster-wide default), and whether it is sensitive.
"""

from __future__ import annotations

from typing import NamedTuple


class KafkaBrokerKey(NamedTuple):
    type: int  # ConfigType
    default: str | None
    dynamic: bool
    per_broker_only: bool
    sensitive: bool


_K = KafkaBrokerKey

KAFKA_BROKER_CONFIGS: dict[str, KafkaBrokerKey] = {
'''


def rows(c: Connection, node: str) -> list[Any]:
    r = c.request(32, {"resources": [{"resource_type": 4, "resource_name": node, "configuration_keys": None}],
                       "include_synonyms": True, "include_documentation": False}, version=4)
    return list(r.results[0].configs)


def default_of(x: Any) -> str | None:
    if x.config_source == DEFAULT_CONFIG:
        return x.value
    for s in x.synonyms:
        if s.source == DEFAULT_CONFIG and s.name == x.name:
            return s.value
    return None


def per_broker_only(c: Connection, x: Any, default: str | None) -> bool:
    value = x.value if x.value is not None else default
    if value is None or x.is_sensitive:
        value = "1"
    r = c.request(44, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": x.name, "config_operation": 0, "value": value}]}], "validate_only": True}, version=1)
    return PER_BROKER_ONLY in (r.responses[0].error_message or "")


def generate(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with Connection(host, int(port)) as c:
        node = str(c.request(60, {"include_cluster_authorized_operations": False}, version=0).controller_id)
        from oracle_fixture import KAFKA_VERSION

        lines = [HEADER.replace("{version}", KAFKA_VERSION)]
        for x in sorted(rows(c, node), key=lambda x: x.name):
            default = None if x.is_sensitive else default_of(x)
            dynamic = not x.read_only
            only = dynamic and per_broker_only(c, x, default)
            lines.append(f"    {x.name!r}: _K({int(x.config_type)}, {default!r}, {dynamic}, {only}, "
                         f"{bool(x.is_sensitive)}),\n")
        lines.append("}\n")
    OUT.write_text("".join(lines))
    print(f"wrote {OUT}")


def main() -> None:
    if len(sys.argv) > 1:
        generate(sys.argv[1])
        return
    from oracle_fixture import kafka_cluster

    with kafka_cluster(1) as cluster:
        generate(cluster.bootstrap)


if __name__ == "__main__":
    main()
