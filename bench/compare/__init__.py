"""Samsa side by side with Apache Kafka 4.1.2 (issue 8, "Benchmarks"): see ``bench/compare/runner.py``.

    .venv/bin/python -m bench.compare [--smoke] [--records N] [--scenarios a,b] [--out DIR]
"""

from __future__ import annotations


def main(argv: list[str]) -> int:
    from bench.compare.runner import main as run

    return run(argv)
