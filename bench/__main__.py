"""`make bench`: run every benchmark scenario in turn (each is also runnable on its own)."""

from __future__ import annotations

import importlib
import sys

SCENARIOS = ["bench.broker", "bench.compare"]  # bench.compare: side by side with the reference Apache Kafka
OPTIONAL = ["bench.storage"]


def main() -> int:
    failed = 0
    for name in SCENARIOS + OPTIONAL:
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            if name in OPTIONAL:
                print(f"== {name}: not available ({e})")
                continue
            raise
        print(f"== {name}")
        rc = module.main([])
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
