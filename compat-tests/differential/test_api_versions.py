"""The README's "Compatibility with Apache Kafka" tables stay true.

* ``test_api_versions_table``: asks both brokers for ApiVersions (v3) and renders every API where
  Samsa's advertised range differs from the reference Kafka's (missing, narrower, wider), each with its reason
  (``NOTES``: a row without one fails the test). The block between
  ``<!-- api-versions:begin -->`` and ``<!-- api-versions:end -->`` in README.md must equal it.
* ``test_known_differences_list``: the block between ``<!-- known-differences:begin/end -->`` must
  equal the rendering of ``normalize.KNOWN_DIFFERENCES`` (which the differential tests keep strict).

``UPDATE_COMPAT_TABLE=1`` rewrites the blocks instead of failing (then review the diff and commit).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from oracle_fixture import KAFKA_VERSION

from differential.normalize import KNOWN_DIFFERENCES
from samsa.broker.client import Connection
from samsa.kproto.messages import API_NAMES

pytestmark = [pytest.mark.differential, pytest.mark.kafka, pytest.mark.samsa]

README = Path(__file__).resolve().parents[2] / "README.md"

DASH = "\u2013"  # the README writes ranges as 3\u201312

# Why each row differs: every row of the table needs one (a real reason, not "not implemented").
_SHARE = "share groups (KIP-932): planned as their own piece of work"
_SHARE_STATE = "the share coordinator's state calls (KIP-932), between brokers; with share groups"
_TOKENS = ("delegation tokens (KIP-48) are not offered: a client authenticates with SASL (PLAIN, SCRAM, OAUTHBEARER) "
           "or mTLS; tokens need a token store, renewal and expiry, and SCRAM-over-token logins")
_QUOTAS = ("client quotas (KIP-546) are not stored: Samsa throttles no client (throttle_time is always 0), so a "
           "quota it accepted would promise limits it does not apply; DescribeClientQuotas answers that there are none")
NOTES = {
    0: f"Kafka 4 advertises v0{DASH}2 for old librdkafka's sake but refuses them (KIP-896, KAFKA-18659): it closes "
       "the connection, as Samsa does (differential scenario `unsupported_versions`)",
    22: "idempotent and transactional producers: issue 5",
    38: _TOKENS, 39: _TOKENS, 40: _TOKENS, 41: _TOKENS,
    49: _QUOTAS,
    76: _SHARE, 77: _SHARE, 78: _SHARE, 79: _SHARE, 90: _SHARE, 91: _SHARE, 92: _SHARE,
    83: _SHARE_STATE, 84: _SHARE_STATE, 85: _SHARE_STATE, 86: _SHARE_STATE, 87: _SHARE_STATE,
}
# Names of APIs newer than kio 0.6.5.
EXTRA_API_NAMES = {93: "StreamsGroupTopologyDescriptionUpdate", 94: "UnregisterController"}


def api_name(key: int) -> str:
    if key in EXTRA_API_NAMES:
        return EXTRA_API_NAMES[key]
    return "".join(part.capitalize() for part in API_NAMES.get(key, f"api_{key}").split("_"))


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with Connection(host, int(port), client_id="samsa-differential") as c:
        r = c.request(18, {"client_software_name": "samsa-differential", "client_software_version": "1"},
                      version=3)
        assert r.error_code.value == 0
        return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def render_table(kafka: dict[int, tuple[int, int]], samsa: dict[int, tuple[int, int]]) -> str:
    rows = [f"| key | API | Apache Kafka {KAFKA_VERSION} | Samsa | difference |", "|---|---|---|---|---|"]
    for key in sorted(set(kafka) | set(samsa)):
        k, s = kafka.get(key), samsa.get(key)
        if k == s:
            continue
        if s is None:
            what = "not offered"
        elif k is None:
            what = "Samsa only"
        else:
            parts = []
            if s[0] > k[0]:
                parts.append(f"no v{k[0]}" + (f"{DASH}{s[0] - 1}" if s[0] - 1 > k[0] else ""))
            if s[1] < k[1]:
                parts.append(f"no v{s[1] + 1}" + (f"{DASH}{k[1]}" if k[1] > s[1] + 1 else ""))
            if s[0] < k[0] or s[1] > k[1]:
                parts.append("wider than Kafka's")
            what = ", ".join(parts)
        assert key in NOTES or k is None, f"{api_name(key)} ({key}) differs from Kafka's and NOTES gives no reason"
        if key in NOTES:
            what += f"; {NOTES[key]}"

        def fmt(r: tuple[int, int] | None) -> str:
            return "\u2014" if r is None else f"{r[0]}{DASH}{r[1]}" if r[0] != r[1] else str(r[0])

        rows.append(f"| {key} | {api_name(key)} | {fmt(k)} | {fmt(s)} | {what} |")
    same = sorted(key for key in set(kafka) & set(samsa) if kafka[key] == samsa[key])
    rows.append("")
    rows.append(f"Same ranges as Kafka {KAFKA_VERSION} ({len(same)} APIs): "
                + ", ".join(api_name(k) for k in same) + ".")
    return "\n".join(rows)


def render_known() -> str:
    lines = []
    for scenario in sorted(KNOWN_DIFFERENCES):
        for pattern, reason in KNOWN_DIFFERENCES[scenario]:
            lines.append(f"- `{scenario}` · `{pattern}`: {reason}")
    return "\n".join(lines)


def check_block(name: str, expected: str) -> None:
    text = README.read_text()
    m = re.search(rf"<!-- {name}:begin[^>]*-->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert m, f"README.md has no <!-- {name}:begin --> ... <!-- {name}:end --> block"
    if m.group(1).strip() == expected.strip():
        return
    if os.environ.get("UPDATE_COMPAT_TABLE") == "1":
        README.write_text(text[: m.start(1)] + expected.strip() + "\n" + text[m.end(1):])
        return
    pytest.fail(f"README.md's {name} block is stale (UPDATE_COMPAT_TABLE=1 rewrites it). It should read:\n"
                f"{expected}", pytrace=False)


def test_api_versions_table(kafka_oracle: Any, samsa_server: Any) -> None:
    table = render_table(api_versions(kafka_oracle.bootstrap), api_versions(samsa_server.bootstrap))
    check_block("api-versions", table)


def test_known_differences_list() -> None:
    check_block("known-differences", render_known())
