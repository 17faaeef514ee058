"""malformed_batches.py once against the reference Apache Kafka and once against Samsa: the same error codes."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from differential.framework import compare, context, dumps
from differential.malformed_batches import malformed_batches

pytestmark = [pytest.mark.differential, pytest.mark.kafka, pytest.mark.samsa]


def test_malformed_batches(kafka_oracle: Any, samsa_server: Any) -> None:
    t0 = int(time.time() * 1000)
    outcomes: dict[str, Any] = {}
    for target, bootstrap in (("samsa", samsa_server.bootstrap), ("kafka", kafka_oracle.bootstrap)):
        with context(target, bootstrap, "malformed_batches", t0) as ctx:
            outcomes[target] = malformed_batches(ctx)
    if os.environ.get("DIFF_DUMP"):
        out = Path(os.environ["DIFF_DUMP"])
        out.mkdir(parents=True, exist_ok=True)
        for target, outcome in outcomes.items():
            (out / f"malformed_batches.{target}.json").write_text(dumps(outcome))
    c = compare("malformed_batches", outcomes["kafka"], outcomes["samsa"], t0=t0, now=int(time.time() * 1000))
    assert c.equal, f"Samsa's outcome differs from Kafka's (after normalize.py):\n{c.report()}"
