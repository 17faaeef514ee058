"""The one place where Kafka's and Samsa's outcomes may differ: every rule here has a reason.

Two kinds of entries:

* ``normalize`` -- ALLOWED differences: values that are legitimately different on two brokers
  (generated ids, ports, wall-clock stamps, free-text messages, orders Kafka leaves unspecified).
  They are rewritten the same way on both sides before the comparison.
* ``KNOWN_DIFFERENCES`` -- differences that are Samsa's to fix (or to decide about), listed with what
  Kafka does and what Samsa does. The test masks exactly those paths, so everything else in the
  scenario is still compared, and it FAILS when a listed path has become equal ("fixed: remove the
  entry"), so the list stays true. ``DIFF_STRICT=1`` turns the masking off.

Node ids are not rewritten: both fixtures run node id 1 (``node.id=1`` in oracle/server.properties,
``samsa serve``'s default ``--node-id``), so a difference there is a real one. Hosts are both
127.0.0.1. Record timestamps a scenario sets are the same on both sides (both runs share ``t0``), so
CreateTime batches, their CRCs included, compare byte for byte.
"""

from __future__ import annotations

import fnmatch
from typing import Any

# --- allowed differences -------------------------------------------------------------------------

# Ids a broker generates at random: only their *pattern* is compared (the same id in two places of one
# outcome stays the same placeholder, a different id gets a different one).
GENERATED_IDS = {
    "cluster_id",  # a random 22-character UUID per cluster (Kafka: `storage format -t`, Samsa: meta.properties)
    "topic_id",  # a random UUID per topic (KIP-516)
    "member_id",  # the group coordinator makes "<client.id>-<uuid>" (KIP-394)
    "producer_id",  # allocated from the broker's producer-id blocks; -1 (no producer) is kept
}
ZERO_UUID = "00000000-0000-0000-0000-000000000000"

# Ports differ: each broker listens on its own free port.
PORT_KEYS = {"port"}

# Quotas are not configured on either broker; a throttle is a load artefact, not behaviour.
THROTTLE_KEYS = {"throttle_time", "throttle_time_ms"}

# Free text for humans. Kafka sends null for most errors (the code says it all) and its own wording
# otherwise; Samsa explains more often (and is silent in a few places Kafka is not). Clients only log it,
# so null and any text compare equal.
FREE_TEXT_KEYS = {"error_message", "batch_index_error_message"}

# Wall-clock stamps a broker makes itself (LogAppendTime): compared as "a time from this run".
LOG_APPEND_TIME_SLACK_MS = 120_000


def normalize(outcome: Any, *, t0: int, now: int) -> Any:
    """The outcome with every allowed difference rewritten (pure: returns a new value)."""
    ids: dict[str, str] = {}

    def placeholder(kind: str, value: Any) -> Any:
        if value in (None, "", -1, ZERO_UUID):
            return value  # "none" is meaningful and must match
        key = f"{kind}:{value}"
        if key not in ids:
            ids[key] = f"<{kind} #{sum(1 for k in ids if k.startswith(kind + ':')) + 1}>"
        return ids[key]

    def stamped(value: Any) -> Any:
        # A time the broker took from its clock during this run.
        if isinstance(value, int) and t0 - LOG_APPEND_TIME_SLACK_MS <= value <= now + LOG_APPEND_TIME_SLACK_MS:
            return "<log-append-time>"
        return value

    def walk(value: Any, key: str | None, parent: dict[str, Any] | None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k, value) for k, v in value.items()}
        if isinstance(value, list):
            items = [walk(v, key, parent) for v in value]
            return _sorted(items, key)
        if key in GENERATED_IDS:
            return placeholder(key, value)
        if key in PORT_KEYS and isinstance(value, int):
            return "<port>"
        if key in THROTTLE_KEYS:
            return 0
        if key in FREE_TEXT_KEYS:
            return "<free text or null>"
        if key == "log_append_time" and value not in (None, -1):
            return stamped(value)
        if parent is not None and parent.get("timestamp_type") == "LogAppendTime":
            if key in ("timestamp", "max_timestamp"):
                return stamped(value)
            if key == "crc":  # the broker rewrote max_timestamp and the attributes, which the CRC covers
                return "<crc of a LogAppendTime batch>"
        if key == "crc" and parent is not None and isinstance(parent.get("producer_id"), int) \
                and parent["producer_id"] >= 0:
            return "<crc covering a generated producer id>"  # the CRC covers the producer id
        if parent is not None and parent.get("control") is True:
            if key in ("timestamp", "max_timestamp"):  # a transaction marker: stamped by the coordinator's clock
                return stamped(value)
            if key == "crc":
                return "<crc of a control batch>"
        if key == "aborted_transactions" and value is None:
            # Fetch v4+: Kafka sends [] for a partition with an error, Samsa null; both mean "none".
            return []
        return value

    return walk(outcome, None, None)


def _sorted(items: list[Any], key: str | None) -> list[Any]:
    # Kafka builds topic and partition lists of Metadata, DescribeGroups, DeleteRecords, ... from hash
    # maps: their order is unspecified. Sort lists of topics by name and of partitions by index.
    if items and all(isinstance(i, dict) for i in items):
        for field in ("partition_index", "partition"):
            if all(field in i for i in items):
                return sorted(items, key=lambda i: i[field])
        if key == "topics" and all("name" in i for i in items):
            return sorted(items, key=lambda i: str(i["name"]))
    return items


# Scenario-specific allowed differences: (scenario, path pattern, reason). Both values become "<allowed>".
ALLOWED_AT: list[tuple[str, str, str]] = [
    ("describe_configs_defaults", "*/configs/segment.bytes/[cs]*",
     "the source of segment.bytes: oracle/server.properties sets log.segment.bytes (STATIC_BROKER_CONFIG, 4); "
     "the Samsa fixture runs without a properties file: DEFAULT_CONFIG (5). The value is compared."),
    ("metadata_shape", "v12_auto_create_first/*",
     "the first Metadata that auto-creates a topic: Kafka answers UNKNOWN_TOPIC_OR_PARTITION while the "
     "controller creates it asynchronously; Samsa creates it synchronously and answers NONE. Clients retry "
     "on 3, so both work; the topic's Metadata afterwards (v12_auto_created) is compared."),
]


# --- known differences: Samsa's to fix ---------------------------------------------------------------

# scenario -> [(path pattern, "API/version: Kafka ...; Samsa ...")]. Paths are "/"-joined keys and list
# indexes of the (normalised) outcome; fnmatch patterns ("*" matches one or more segments).
KNOWN_DIFFERENCES: dict[str, list[tuple[str, str]]] = {
    "broker_configs_fidelity": [
        ("configs/listeners/read_only", "DescribeConfigs v4 BROKER listeners: Kafka read_only false (listeners are "
                                        "per-broker reconfigurable); Samsa true: it cannot add listeners at run "
                                        "time, so it refuses the change rather than ignore it"),
        ("configs/transaction.abort.timed.out.transaction.cleanup.interval.ms/*",
         "DescribeConfigs v4 BROKER: Kafka's default is 10000 ms; Samsa's 1000 (it looks for timed-out "
         "transactions every second, by choice)"),
    ],
    "describe_configs_messages": [
        ("broker_logger", "DescribeConfigs v4 BROKER_LOGGER (8): Kafka describes the broker's log4j loggers and their "
                          "levels; Samsa does not offer logger configs (INVALID_REQUEST 'Unsupported resource type "
                          "8')"),
        ("client_metrics", "DescribeConfigs v4 CLIENT_METRICS (16): Kafka describes any client-metrics resource "
                           "(KIP-714: interval.ms, match, metrics); Samsa has no client telemetry (INVALID_REQUEST "
                           "'Unsupported resource type 16')"),
    ],
    "acl_matrix": [  # test_acl_matrix.py: outcome keys are "<user>/<API>[:<variant>] [<resource>]"
        ("bob/idempotent Produce acl-open/*/error_code",
         "Produce v9 by bob (WRITE on the topic) of an idempotent batch with the producer id InitProducerId gave "
         "alice: Kafka NONE (any principal may use any producer id); Samsa INVALID_PRODUCER_ID_MAPPING, deliberately "
         "(the seeds' stricter rule, broker/security/acl_requests.py: a producer id is bound to the principal it "
         "was issued to, so one user cannot write into, or fence, another's idempotent or transactional stream)"),
    ],
    "describe_configs_broker": [
        ("configs/listeners/read_only", "DescribeConfigs v4 BROKER listeners: Kafka read_only false (listeners are "
                                        "per-broker reconfigurable); Samsa true: it cannot add listeners at run "
                                        "time, so it refuses the change rather than ignore it"),
    ],
    "update_features": [
        ("*/share.version", "ApiVersions' finalized features on a fresh node: Kafka 4.4 finalizes share.version 2 "
                            "(share groups on); Samsa does not finalize it (UpdateFeatures accepts it): share groups "
                            "(KIP-932) are not implemented, so a client must not read them as enabled"),
    ],
    "group_lifecycle": [
        ("commit_past_log_end", "OffsetCommit v8 by the group's member of offset 7 on a partition whose log ends at "
                                "6: Kafka accepts it (NONE); Samsa refuses it with OFFSET_OUT_OF_RANGE, by design "
                                "(the seeds: no commit of a position past the log end but by an administrative "
                                "reset; samsa.offset.commit.past.log.end.enable=true gives Kafka's behaviour)"),
    ],
    "idempotent_producer": [
        ("retry*/log_append_time", "Produce v9, a duplicate of an earlier batch (same producer, sequence) on a "
                                   "CreateTime topic: Kafka answers log_append_time = the original batch's max "
                                   "timestamp (a quirk: -1 would be right for CreateTime); Samsa -1. Harmless"),
        ("conflicting_replay*", "Produce of a remembered (producer, epoch, sequence) with other records: Kafka "
                                "answers NONE and the original batch's offset (the records sent are silently "
                                "dropped); Samsa INVALID_RECORD (87) with a message naming the producer, "
                                "sequence and original offset. Deliberate (the seeds: reject conflicting bytes "
                                "for the same sequence); README 'Behaviour that differs'"),
    ],
}


def paths(value: Any, prefix: str = "") -> list[str]:
    """Every path of a JSON value, inner nodes included ("" is the root)."""
    out = [prefix]
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return out
    for k, v in items:
        out += paths(v, f"{prefix}/{k}" if prefix else k)
    return out


def get_path(value: Any, path: str) -> Any:
    for part in path.split("/") if path else []:
        if isinstance(value, dict):
            value = value.get(part, "<absent>")
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return "<absent>"
    return value


def _set_path(value: Any, path: str, new: Any, *, delete: bool = False) -> None:
    """Set (or delete: a key present on one side only) the node at ``path``."""
    parts = path.split("/")
    for part in parts[:-1]:
        value = value[int(part)] if isinstance(value, list) else value[part]
    if isinstance(value, list):
        value[int(parts[-1])] = "<absent on the other side>" if delete else new
    elif isinstance(value, dict) and parts[-1] in value:
        if delete:
            del value[parts[-1]]
        else:
            value[parts[-1]] = new


def mask(kafka: Any, samsa: Any, patterns: list[tuple[str, str]], label: str) -> tuple[list[str], list[str]]:
    """Replace the leaves matching each pattern by ``label`` in both outcomes (in place).

    Returns (patterns that matched a leaf whose values differ, patterns where every matched leaf was equal).
    """
    differing, equal = [], []
    for pattern, _reason in patterns:
        hits = {p for p in paths(kafka) + paths(samsa) if p and fnmatch.fnmatchcase(p, pattern)}
        # the outermost matching nodes only
        hits = sorted(p for p in hits if not any(p.startswith(q + "/") for q in hits))
        if any(get_path(kafka, p) != get_path(samsa, p) for p in hits):
            differing.append(pattern)
        else:
            equal.append(pattern)
        for p in hits:
            absent = any(get_path(side, p) == "<absent>" for side in (kafka, samsa))
            for side in (kafka, samsa):
                if get_path(side, p) != "<absent>":
                    _set_path(side, p, None if absent else label, delete=absent)
    return differing, equal
