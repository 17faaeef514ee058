"""Samsa side by side with the reference Apache Kafka (issue 8, "Benchmarks"): see ``bench/compare/runner.py``.

    .venv/bin/python -m bench.compare [--smoke] [--records N] [--scenarios a,b] [--out DIR]
"""

from __future__ import annotations


def main(argv: list[str]) -> int:
    from bench.compare.runner import main as run

    return run(argv)
