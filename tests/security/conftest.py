"""Fixtures of the security tests (security_harness.py): test certificates and a broker with secured listeners."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from security_harness import certs, secured_broker

__all__ = ["certs", "secured_broker"]
