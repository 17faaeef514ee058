"""Shared by the Python group-member programs: arguments, JSON-line events, a bounded lifetime.

Every member program (``<client>_member.py BOOTSTRAP TOPIC GROUP [INSTANCE_ID]``, ``member.js``,
``Member.java``) subscribes to TOPIC in GROUP (auto.offset.reset=earliest, no auto-commit,
session.timeout.ms=$SESSION_MS or 6000), and prints one JSON object per line on stdout:

    {"event": "assigned", "partitions": [0, 3]}        after each completed rebalance
    {"event": "record", "p": 0, "o": 17}              each record, before its offset is committed
    {"event": "committed", "offsets": {"0": 18}}      after each successful synchronous commit

SIGTERM: close the consumer (which leaves the group) and exit 0.  The program exits on its own after
MEMBER_LIFETIME_S (default 240) seconds so a lost test cannot leave it behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

SESSION_MS = int(os.environ.get("SESSION_MS", "6000"))
LIFETIME_S = float(os.environ.get("MEMBER_LIFETIME_S", "240"))


def args() -> tuple[str, str, str, str | None]:
    if len(sys.argv) < 4:
        print(f"usage: {sys.argv[0]} BOOTSTRAP TOPIC GROUP [INSTANCE_ID]", file=sys.stderr)
        sys.exit(2)
    return sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None


_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    with _lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


class Stop:
    """Set by SIGTERM or when the lifetime runs out."""

    def __init__(self) -> None:
        self.event = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: self.event.set())
        timer = threading.Timer(LIFETIME_S, self.event.set)
        timer.daemon = True
        timer.start()

    def __bool__(self) -> bool:
        return self.event.is_set()
