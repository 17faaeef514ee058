"""Differential scenarios of config fidelity: DescribeConfigs' messages (compared where Kafka's are fixed strings,
under "message": FREE_TEXT_KEYS does not mask them), the broker's full config list and its sources, topic
configs, IncrementalAlterConfigs edge cases and GROUP config resources."""

from __future__ import annotations

from typing import Any

from differential.framework import Ctx, err, scenario


def _describe(ctx: Ctx, c: Any, resources: list[tuple[int, str, list[str] | None]], *, version: int = 4,
              synonyms: bool = False) -> list[Any]:
    r = c.request(32, {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k}
                                     for t, n, k in resources],
                       "include_synonyms": synonyms, "include_documentation": False}, version=version)
    return list(r.results)


@scenario
def describe_configs_messages(ctx: Ctx) -> Any:
    """DescribeConfigs' error codes and messages, one resource per request, and a request naming a resource
    type Kafka does not know (refused as a whole)."""
    c = ctx.connect()
    t = ctx.topic()
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t))}
    cases = {
        "topic": (2, t, ["cleanup.policy"]),
        "unknown_topic": (2, ctx.topic("missing"), None),
        "illegal_topic_name": (2, "bad name!", None),
        "empty_topic_name": (2, "", None),
        "dot_topic_name": (2, "..", None),
        "long_topic_name": (2, "x" * 250, None),
        "broker": (4, "1", ["log.retention.hours"]),
        "other_broker": (4, "7", None),
        "broker_not_a_number": (4, "x", None),
        "broker_logger": (8, "1", ["kafka.server.KafkaApis"]),
        "client_metrics": (16, ctx.topic("metrics"), None),
    }
    for label, resource in cases.items():
        (res,) = _describe(ctx, c, [resource])
        out[label] = {"error": err(res), "message": res.error_message, "configs": len(res.configs)}
    for unknown_type in (0, 1, 64):
        results = _describe(ctx, c, [(2, t, ["cleanup.policy"]), (unknown_type, "x", None)])
        out[f"with_type_{unknown_type}"] = [{"type": r.resource_type, "error": err(r), "message": r.error_message,
                                             "configs": len(r.configs)} for r in results]
    return out
