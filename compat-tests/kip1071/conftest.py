"""The KIP-1071 streams-group tests: a Kafka Streams application (compat-tests/java) against Kafka and Samsa.
This folder is on sys.path so the tests share the application's helpers (test_streams_word_count.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
