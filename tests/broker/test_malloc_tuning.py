"""broker/malloc_tuning.py: the heap kept for request-sized buffers, and the operator's own settings left alone."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from samsa.broker.malloc_tuning import (
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    maybe_tune_malloc,
    operator_configured,
)

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# Two 3 MiB buffers allocated and freed, over and over (a Produce frame and its decoded copy, larger): page
# faults counted over the second half (in a fresh interpreter, so nothing else has shaped its heap).
CHURN = """
import resource, sys
from samsa.broker.malloc_tuning import maybe_tune_malloc
if sys.argv[1] == "tuned":
    assert maybe_tune_malloc({})
def churn():
    for _ in range(50):
        a = bytearray(3 << 20); b = bytearray(3 << 20)
        del a, b
churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True, timeout=60)
    return int(out.stdout.strip())


@glibc_only
def test_freed_buffers_are_reused_without_faulting_them_in_again() -> None:
    default, tuned = _faults("default"), _faults("tuned")
    # 50 rounds of 6 MiB: ~75,000 faults when glibc trims the heap each time; the tuned heap keeps them.
    assert default > 10_000, default
    assert tuned < default // 10, (tuned, default)


@glibc_only
def test_sets_both_thresholds() -> None:
    code = "from samsa.broker.malloc_tuning import maybe_tune_malloc; print(sorted(maybe_tune_malloc({}).items()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == str(sorted({"M_MMAP_THRESHOLD": MMAP_THRESHOLD_BYTES,
                                             "M_TRIM_THRESHOLD": TRIM_THRESHOLD_BYTES}.items()))


@pytest.mark.parametrize("environ", [
    {"MALLOC_TRIM_THRESHOLD_": "131072"},
    {"MALLOC_MMAP_THRESHOLD_": "131072"},
    {"MALLOC_TOP_PAD_": "0"},
    {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"},
])
def test_the_operators_settings_win(environ: dict[str, str]) -> None:
    assert operator_configured(environ)
    assert maybe_tune_malloc(environ) == {}


def test_other_environment_is_not_a_setting() -> None:
    assert not operator_configured({"GLIBC_TUNABLES": "glibc.rtld.nns=2", "MALLOC_ARENA_MAX": "2"})
