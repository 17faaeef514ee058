"""Differential scenario of DescribeClientQuotas (KIP-546) on a cluster without quotas: the filters Kafka accepts
(an empty answer) and those it refuses, with its error and message, at v0 and v1."""

from __future__ import annotations

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
