"""Every scenario of scenarios.py, once against the reference Apache Kafka and once against Samsa: same outcome.

A failure prints the unified diff of the two normalised outcomes (``--- kafka`` / ``+++ samsa``).
``DIFF_DUMP=DIR`` writes each raw outcome to ``DIR/<scenario>.<target>.json``; ``DIFF_STRICT=1``
does not mask ``normalize.KNOWN_DIFFERENCES`` (to see them all).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from differential import (  # noqa: F401  (register the scenarios)
    admin_apis,
    compaction,
    config_fidelity,
    features,
    kip848,
    kip1071,
    kip1242,
    newer_apis,
    raft_voters,
    scenarios,
    topic_compression,
    txn_v2,
    unregister_controller,
)
from differential.framework import SCENARIOS, ScenarioSkipped, compare, context, dumps
from differential.normalize import KNOWN_DIFFERENCES

pytestmark = [pytest.mark.differential, pytest.mark.kafka, pytest.mark.samsa]


def _run(name: str, target: str, bootstrap: str, t0: int) -> Any:
    with context(target, bootstrap, name, t0) as ctx:
        return SCENARIOS[name](ctx)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name: str, kafka_oracle: Any, samsa_server: Any) -> None:
    t0 = int(time.time() * 1000)
    outcomes: dict[str, Any] = {}
    for target, bootstrap in (("samsa", samsa_server.bootstrap), ("kafka", kafka_oracle.bootstrap)):
        try:
            outcomes[target] = _run(name, target, bootstrap, t0)
        except ScenarioSkipped as e:
            pytest.skip(f"{target}: {e}")
    if os.environ.get("DIFF_DUMP"):
        out = Path(os.environ["DIFF_DUMP"])
        out.mkdir(parents=True, exist_ok=True)
        for target, outcome in outcomes.items():
            (out / f"{name}.{target}.json").write_text(dumps(outcome))
    c = compare(name, outcomes["kafka"], outcomes["samsa"], t0=t0, now=int(time.time() * 1000),
                strict=os.environ.get("DIFF_STRICT") == "1")
    problems = []
    if not c.equal:
        problems.append(f"{name}: Samsa's outcome differs from Kafka's (after normalize.py):\n{c.report()}")
    if c.fixed:
        reasons = dict(KNOWN_DIFFERENCES.get(name, []))
        problems.append(f"{name}: these known differences are gone -- remove them from normalize.KNOWN_DIFFERENCES "
                        "(and the README table): " + "; ".join(f"{p} ({reasons[p]})" for p in c.fixed))
    assert not problems, "\n\n".join(problems)
