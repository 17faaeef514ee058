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


@scenario
def topic_config_edge_cases(ctx: Ctx) -> Any:
    """Empty and odd cleanup.policy values (CreateTopics, IncrementalAlterConfigs SET/APPEND/SUBTRACT, the
    broker default), and the tiered-storage topic configs a broker without a remote tier lists and checks.
    Kafka's INVALID_CONFIG messages are fixed strings: compared."""
    c = ctx.connect()
    t = ctx.topic()

    def create(name: str, configs: dict[str, str], validate: bool = True) -> Any:
        r = c.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                       "assignments": (), "configs": [{"name": k, "value": v}
                                                                      for k, v in configs.items()]}],
                           "timeout": 30000, "validate_only": validate}, version=5)
        return {"error": err(r.topics[0]), "message": r.topics[0].error_message}

    def alter(resource_type: int, name: str, key: str, op: int, value: str | None) -> Any:
        r = c.request(44, {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
            {"name": key, "config_operation": op, "value": value}]}], "validate_only": True}, version=1)
        return {"error": err(r.responses[0]), "message": r.responses[0].error_message}

    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t))}
    for label, value in (("empty", ""), ("blank", " "), ("comma", ","), ("trailing_comma", "delete,")):
        out[f"create_cleanup_{label}"] = create(ctx.topic(label), {"cleanup.policy": value})
    for op, value in ((0, ""), (2, ""), (3, ""), (0, " "), (0, ","), (0, "compact, delete")):
        out[f"alter_cleanup_op{op}_{value!r}"] = alter(2, t, "cleanup.policy", op, value)
    out["broker_default_cleanup_empty"] = alter(4, "", "log.cleanup.policy", 0, "")
    for key, value in (("local.retention.ms", "-3"), ("local.retention.ms", "-2"), ("local.retention.bytes", "-3"),
                       ("local.retention.bytes", "1000"), ("remote.log.copy.disable", "yes"),
                       ("remote.log.copy.disable", "true"), ("remote.log.delete.on.disable", "true"),
                       ("remote.storage.enable", "maybe"), ("remote.storage.enable", "false"),
                       ("remote.storage.enable", "true")):
        out[f"alter_{key}={value}"] = alter(2, t, key, 0, value)
    out["create_remote_storage"] = create(ctx.topic("remote"), {"remote.storage.enable": "true"})
    r = c.request(32, {"resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": None}],
                       "include_synonyms": True, "include_documentation": False}, version=4)
    out["described_names"] = sorted(x.name for x in r.results[0].configs)
    return out


@scenario
def group_configs(ctx: Ctx) -> Any:
    """The GROUP config resource (type 32): DescribeConfigs of any group name, IncrementalAlterConfigs and
    AlterConfigs of its configs (bounds, unknown names, the empty name, APPEND), ListConfigResources."""
    import time

    c = ctx.connect()
    group = ctx.topic("group")

    def describe(name: str, keys: list[str] | None = None) -> Any:
        (res,) = _describe(ctx, c, [(32, name, keys)], synonyms=True)
        return {"error": err(res), "message": res.error_message, "configs": {
            x.name: {"value": x.value, "source": x.config_source, "read_only": x.read_only, "type": x.config_type,
                     "synonyms": [[s.name, s.value, s.source] for s in x.synonyms]} for x in res.configs}}

    def alter(name: str, configs: list[tuple[str, int, str | None]], validate: bool = True) -> Any:
        r = c.request(44, {"resources": [{"resource_type": 32, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in configs]}],
            "validate_only": validate}, version=1)
        return {"error": err(r.responses[0]), "message": r.responses[0].error_message}

    out: dict[str, Any] = {"describe_new": describe(group), "describe_empty_name": describe("")}
    cases = {
        "session_ok": [("consumer.session.timeout.ms", 0, "50000")],
        "session_below_min": [("consumer.session.timeout.ms", 0, "1000")],
        "session_above_max": [("consumer.session.timeout.ms", 0, "70000")],
        "session_not_a_number": [("consumer.session.timeout.ms", 0, "x")],
        "session_zero": [("consumer.session.timeout.ms", 0, "0")],
        "heartbeat_ok": [("consumer.heartbeat.interval.ms", 0, "6000")],
        "two_bad": [("consumer.session.timeout.ms", 0, "1000"), ("consumer.heartbeat.interval.ms", 0, "1")],
        "unknown": [("no.such.config", 0, "1")],
        "offset_reset_by_duration": [("share.auto.offset.reset", 0, "by_duration:PT1H")],
        "offset_reset_bad": [("share.auto.offset.reset", 0, "bogus")],
        "isolation_bad": [("share.isolation.level", 0, "bogus")],
        "lock_duration_small": [("share.record.lock.duration.ms", 0, "5")],
        "lock_duration_below_min": [("share.record.lock.duration.ms", 0, "5000")],
        "standby_above_max": [("streams.num.standby.replicas", 0, "5")],
        "append": [("consumer.session.timeout.ms", 2, "5")],
        "null": [("consumer.session.timeout.ms", 0, None)],
    }
    for label, configs in cases.items():
        out[f"alter_{label}"] = alter(group, configs)
    out["alter_empty_name"] = alter("", [("consumer.session.timeout.ms", 0, "50000")])
    out["set"] = alter(group, [("consumer.session.timeout.ms", 0, "50000"), ("share.isolation.level", 0,
                                                                             "read_committed")], validate=False)
    time.sleep(1)  # Kafka's brokers apply the controller's change asynchronously
    out["describe_after_set"] = describe(group, ["consumer.session.timeout.ms", "share.isolation.level"])
    r = c.request(74, {"resource_types": [32]}, version=1)
    out["listed"] = sorted(x.resource_name for x in r.config_resources if x.resource_name.startswith(ctx.topic("")))
    out["delete"] = alter(group, [("consumer.session.timeout.ms", 1, None)], validate=False)
    time.sleep(1)
    out["describe_after_delete"] = describe(group, ["consumer.session.timeout.ms", "share.isolation.level"])
    r = c.request(33, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "consumer.heartbeat.interval.ms", "value": "7000"}]}], "validate_only": True}, version=2)
    out["legacy_alter"] = {"error": err(r.responses[0]), "message": r.responses[0].error_message}
    return out


@scenario
def group_internal_configs(ctx: Ctx) -> Any:
    """Kafka 4.4's internal group configs (ConfigDef.defineInternal: the assignor offload switches, the streams
    warm-up replicas, acceptable recovery lag and task offset interval): what IncrementalAlterConfigs accepts
    and refuses, and what DescribeConfigs shows of them before and after they are set."""
    import time

    c = ctx.connect()
    group = ctx.topic("group")
    internal = ["consumer.assignor.offload.enable", "share.assignor.offload.enable", "streams.assignor.offload.enable",
                "streams.num.warmup.replicas", "streams.acceptable.recovery.lag", "streams.task.offset.interval.ms"]

    def describe(keys: list[str] | None) -> Any:
        (res,) = _describe(ctx, c, [(32, group, keys)], synonyms=True)
        return {"error": err(res), "message": res.error_message, "configs": {
            x.name: {"value": x.value, "source": x.config_source, "read_only": x.read_only, "type": x.config_type,
                     "synonyms": [[s.name, s.value, s.source] for s in x.synonyms]}
            for x in res.configs if x.name in internal}}

    def alter(configs: list[tuple[str, str | None]], validate: bool = True) -> Any:
        r = c.request(44, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in configs]}],
            "validate_only": validate}, version=1)
        return {"error": err(r.responses[0]), "message": r.responses[0].error_message}

    out: dict[str, Any] = {"describe_all_new": describe(None), "describe_named_new": describe(internal)}
    cases: dict[str, list[tuple[str, str | None]]] = {
        "offload_true": [("consumer.assignor.offload.enable", "true")],
        "offload_bad": [("streams.assignor.offload.enable", "maybe")],
        "share_offload": [("share.assignor.offload.enable", "false")],
        "warmup_ok": [("streams.num.warmup.replicas", "3")],
        "warmup_negative": [("streams.num.warmup.replicas", "-1")],
        "warmup_large": [("streams.num.warmup.replicas", "1000")],
        "lag_ok": [("streams.acceptable.recovery.lag", "5000")],
        "lag_negative": [("streams.acceptable.recovery.lag", "-1")],
        "lag_long": [("streams.acceptable.recovery.lag", "99999999999")],
        "task_offset_ok": [("streams.task.offset.interval.ms", "30000")],
        "task_offset_zero": [("streams.task.offset.interval.ms", "0")],
        "task_offset_small": [("streams.task.offset.interval.ms", "10")],
        # the other checks Kafka 4.4's GroupConfig.validate makes
        "rack_tags_ok": [("streams.rack.aware.assignment.tags", "zone, rack")],
        "rack_tags_duplicate": [("streams.rack.aware.assignment.tags", "zone, rack,zone")],
        "assignor_registered": [("streams.assignor.name", "sticky")],
        "assignor_unknown": [("streams.assignor.name", "balanced")],
        "dlq_internal_name": [("errors.deadletterqueue.topic.name", "__dlq")],
        "dlq_name": [("errors.deadletterqueue.topic.name", "dlq")],
        "unknown_and_duplicate": [("no.such.config", "1"), ("streams.rack.aware.assignment.tags", "a,a")],
        "duplicate_and_bad_int": [("streams.rack.aware.assignment.tags", "a,a"), ("streams.num.warmup.replicas", "x")],
    }
    for label, configs in cases.items():
        out[f"alter_{label}"] = alter(configs)
    out["set"] = alter([("streams.num.warmup.replicas", "3"), ("streams.acceptable.recovery.lag", "5000"),
                        ("consumer.assignor.offload.enable", "true")], validate=False)
    time.sleep(1)  # Kafka's brokers apply the controller's change asynchronously
    out["describe_all_after_set"] = describe(None)
    out["describe_named_after_set"] = describe(internal)
    return out


def _fixture_keys() -> set[str]:
    """Broker configs the two fixtures set differently on purpose: every key of the oracle's
    server.properties, and what `samsa serve` is started with (--listen, --advertise, --data-dir)."""
    from pathlib import Path

    props = Path(__file__).resolve().parents[1] / "oracle" / "server.properties"
    keys = {line.split("=", 1)[0].strip() for line in props.read_text().splitlines()
            if "=" in line and not line.lstrip().startswith("#")}
    # broker.id follows node.id in KRaft; controller.quorum.bootstrap.servers is the oracle's own quorum
    return keys | {"listeners", "advertised.listeners", "log.dirs", "broker.id", "controller.quorum.bootstrap.servers"}


@scenario
def broker_configs_fidelity(ctx: Ctx) -> Any:
    """DescribeConfigs of the broker lists every config Kafka lists, with Kafka's type, read-only and sensitive
    flags, and (where the fixtures do not set them) the same values and sources; IncrementalAlterConfigs
    (validate only) accepts and refuses the broker configs Kafka does, with Kafka's messages. Samsa's own
    samsa.* configs are left out."""
    c = ctx.connect()
    node = str(c.request(60, {"include_cluster_authorized_operations": False}, version=0).controller_id)
    fixture = _fixture_keys()
    (res,) = _describe(ctx, c, [(4, node, None)], synonyms=True)
    configs: dict[str, Any] = {}
    for x in res.configs:
        if x.name.startswith("samsa."):
            continue
        entry: dict[str, Any] = {"type": x.config_type, "read_only": x.read_only, "sensitive": x.is_sensitive}
        if x.name not in fixture:
            entry.update(value=x.value, source=x.config_source,
                         synonyms=[[s.name, s.value, s.source] for s in x.synonyms])
        configs[x.name] = entry
    out: dict[str, Any] = {"error": err(res), "message": res.error_message, "count": len(configs),
                           "configs": configs}

    def alter(name: str, key: str, value: str | None, op: int = 0) -> Any:
        r = c.request(44, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
            {"name": key, "config_operation": op, "value": value}]}], "validate_only": True}, version=1)
        return {"error": err(r.responses[0]), "message": r.responses[0].error_message}

    for name in ("", node):
        for key, value in (("log.cleaner.threads", "x"), ("log.cleaner.threads", "2"), ("custom.key", "1"),
                           ("log.retention.hours", "5"), ("log.retention.ms", "5000"), ("log.roll.hours", "1"),
                           ("log.roll.ms", "1000"), ("num.io.threads", "4"), ("num.io.threads", "100"),
                           ("background.threads", "3"), ("num.replica.fetchers", "2"), ("max.connections", "100"),
                           ("max.connections.per.ip", "x"), ("message.max.bytes", "2000000"),
                           ("log.segment.bytes", "100"), ("producer.id.expiration.ms", "1000"),
                           ("min.insync.replicas", "0"), ("num.partitions", "3"), ("log.cleanup.policy", ""),
                           ("ssl.keystore.location", "/nonexistent"), ("sasl.enabled.mechanisms", "PLAIN"),
                           ("ssl.client.auth", "required"), ("ssl.truststore.type", "PKCS12")):
            out[f"alter_{name or 'default'}_{key}={value}"] = alter(name, key, value)
        out[f"alter_{name or 'default'}_append_empty_cleanup"] = alter(name, "log.cleanup.policy", "", 2)
    out["alter_default_listeners"] = alter("", "listeners", "PLAINTEXT://:1")
    out["alter_other_broker"] = alter("7", "log.cleaner.threads", "2")
    return out
