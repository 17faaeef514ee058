"""Differential scenarios of the small admin APIs added for Kafka 4.4.0's compatibility table: DescribeClientQuotas
(KIP-546) on a cluster without quotas -- the filters Kafka accepts (an empty answer) and those it refuses, with its
error and message, at v0 and v1 -- and AlterReplicaLogDirs (KIP-113) on a broker with one log directory."""

from __future__ import annotations

import os
from typing import Any

from differential.framework import Ctx, err, scenario

EXACT, DEFAULT, SPECIFIED = 0, 1, 2

FILTERS: dict[str, tuple[list[tuple[str, int, str | None]], bool]] = {
    "all": ([], False),
    "all_strict": ([], True),
    "user_exact": ([("user", EXACT, "alice")], False),
    "user_default": ([("user", DEFAULT, None)], False),
    "users_specified": ([("user", SPECIFIED, None)], True),
    "user_and_client": ([("user", EXACT, "alice"), ("client-id", SPECIFIED, None)], False),
    "ip_exact": ([("ip", EXACT, "127.0.0.1")], False),
    "empty_type": ([("", EXACT, "x")], False),
    "twice": ([("user", EXACT, "a"), ("user", SPECIFIED, None)], False),
    "unknown_type": ([("group", EXACT, "g")], False),
    "exact_null": ([("user", EXACT, None)], False),
    "default_with_match": ([("client-id", DEFAULT, "c")], False),
    "specified_with_match": ([("user", SPECIFIED, "u")], False),
    "unknown_match_type": ([("user", 7, None)], False),
    "ip_with_user": ([("ip", SPECIFIED, None), ("user", SPECIFIED, None)], False),
}


@scenario
def describe_client_quotas(ctx: Ctx) -> Any:
    c = ctx.connect()
    out: dict[str, Any] = {}
    for version in (0, 1):
        for name, (components, strict) in FILTERS.items():
            wanted = [{"entity_type": t, "match_type": m, "match": v} for t, m, v in components]
            r = c.request(48, {"components": wanted, "strict": strict}, version=version)
            out[f"v{version}_{name}"] = {"error": err(r), "message": r.error_message,
                                         "entries": None if r.entries is None else list(r.entries)}
    return out


@scenario
def alter_replica_log_dirs(ctx: Ctx) -> Any:
    """AlterReplicaLogDirs (KIP-113) on a broker with one log directory: to that directory (nothing moves), to
    another path, for an unknown topic, a missing partition, and a topic too long for a future directory name."""
    c = ctx.connect()
    t = ctx.topic()
    long_topic = ctx.topic("l" * 215)  # 243 characters: a legal name, too long for a future directory
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 2)),
                           "create_long": err(ctx.create_topic(c, long_topic, 1))}
    d = c.request(35, {"topics": None}, version=4)
    (log_dir,) = [r.log_dir for r in d.results]
    cases = {
        "same_dir": [(log_dir, [(t, [0, 1])])],
        "other_path": [("/no/such/dir", [(t, [0])])],
        "relative_path": [(os.path.basename(log_dir), [(t, [0])])],
        "unknown_topic": [(log_dir, [(ctx.topic("missing"), [0])])],
        "missing_partition": [(log_dir, [(t, [7])])],
        "long_topic": [(log_dir, [(long_topic, [0])])],
        "two_dirs_same_partition": [("/no/such/dir", [(t, [1])]), (log_dir, [(t, [1])])],
    }
    for version in (1, 2):
        for name, dirs in cases.items():
            r = c.request(34, {"dirs": [{"path": path, "topics": [{"name": n, "partitions": ps} for n, ps in topics]}
                                        for path, topics in dirs]}, version=version)
            out[f"v{version}_{name}"] = sorted(
                (x.topic_name, p.partition_index, err(p)) for x in r.results for p in x.partitions)
    return out
