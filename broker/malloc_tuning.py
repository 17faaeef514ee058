"""glibc malloc settings `samsa serve` applies to itself: large request buffers reused, not faulted in anew.

A Produce request's frame (up to batch.size, ~1 MiB) is copied out of the receive buffer into a bytes object,
decoded and appended; every one of those buffers is freed again a few microseconds later. With glibc's
dynamic thresholds the top of the heap above ~2 MiB free is handed back to the kernel (brk) after each
request and faulted in again, page by page, by the next one: measured here (bench.tls_profile, 1 KiB
records, 1 GiB) ~290,000 page faults per GiB produced over PLAINTEXT and ~470,000 over SASL_SSL (the TLS
path frees and allocates more), about 0.7 s of the broker's CPU per GiB in both. With the heap kept
(M_TRIM_THRESHOLD) and buffers up to MMAP_THRESHOLD_BYTES served from it rather than from mmap, the same
run has a few hundred faults.

The cost is memory the process keeps: at most TRIM_THRESHOLD_BYTES of free heap top per malloc arena (the
event loop's thread, and a worker thread that allocates large buffers) is not given back; the broker's peak
RSS in that run did not change (~58 MB). An operator's own setting wins: with any MALLOC_*_ variable or a
glibc.malloc tunable in the environment we change nothing. Elsewhere than glibc (no mallopt) nothing is done.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping

# mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# Buffers up to this size come from the heap (glibc's dynamic threshold also stops at 32 MiB on 64-bit).
MMAP_THRESHOLD_BYTES = 8 * 1024 * 1024
# Free memory at the heap's top kept rather than returned to the kernel: twice the above, as glibc's own dynamic
# rule sets it (16 MiB kept the faults as low as 64 MiB did in the run above).
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES

_OPERATOR_KEYS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def operator_configured(environ: Mapping[str, str]) -> bool:
    """Whether the environment already sets glibc's malloc thresholds (then they are the operator's)."""
    return any(key in environ for key in _OPERATOR_KEYS) or "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")


def maybe_tune_malloc(environ: Mapping[str, str] = os.environ) -> dict[str, int]:
    """Apply the thresholds above unless the operator set their own; returns what was set (empty: nothing)."""
    if operator_configured(environ):
        return {}
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS has no mallopt)
        return {}
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    applied: dict[str, int] = {}
    for name, parameter, value in (("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
                                   ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)):
        if mallopt(parameter, value) == 1:  # mallopt returns 1 on success
            applied[name] = value
    return applied
