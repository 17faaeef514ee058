"""Where `make test`'s CPU goes: a pytest plugin that writes each test's wall time and CPU time (its own
process and every child it reaped: brokers, clients, JVMs) as a JSON line, so the suite's budget can be
spent where it buys coverage. On a 2-core machine the suite is bound by CPU, not by waiting.

    SAMSA_TEST_CPU=/tmp/cpu.jsonl .venv/bin/python -m pytest -p bench.pytest_cpu -n 2 --dist loadgroup tests \
        compat-tests
    .venv/bin/python -m bench.pytest_cpu /tmp/cpu.jsonl        # the totals by module, the largest first

A module or session fixture's teardown counts to the last test that used it; a child still running when the
test ends (a session broker) counts nowhere, so the figures are a lower bound.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Generator

import pytest


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    path = os.environ.get("SAMSA_TEST_CPU")
    start_wall, (start_self, start_children) = time.monotonic(), _cpu()
    yield
    if path:
        end_self, end_children = _cpu()
        line = json.dumps({"test": item.nodeid, "wall": round(time.monotonic() - start_wall, 2),
                           "self": round(end_self - start_self, 2),
                           "children": round(end_children - start_children, 2)})
        with open(path, "a") as f:
            f.write(line + "\n")


def main(path: str) -> None:
    by_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            m = by_module[row["test"].split("::")[0]]
            m[0] += row["wall"]
            m[1] += row["self"] + row["children"]
            m[2] += row["children"]
            m[3] += 1
    total = sum(m[1] for m in by_module.values())
    print(f"{'cpu s':>8} {'wall s':>8} {'children':>8} {'tests':>5}  module   (all: {total:.0f} s of CPU)")
    for module, (wall, cpu, children, count) in sorted(by_module.items(), key=lambda kv: -kv[1][1]):
        print(f"{cpu:8.1f} {wall:8.1f} {children:8.1f} {count:5d}  {module}")


if __name__ == "__main__":
    main(sys.argv[1])
