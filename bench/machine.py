"""A description of the machine a benchmark ran on, for printing and for results JSON."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any


def describe() -> dict[str, Any]:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    try:
        kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        kernel = ""
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "python": platform.python_version(), "kernel": kernel}


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def thread_cpu_seconds(pid: int, tid: int) -> float:
    """user + system CPU seconds of one thread of a process (tid == pid: its main thread), from /proc."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def prefault_memory(limit_bytes: int, keep_free_bytes: int = 4 << 30) -> dict[str, float]:
    """Touch free memory once (up to ``limit_bytes``, leaving ``keep_free_bytes``), then give it back.

    On a freshly booted VM the hypervisor backs guest memory on first touch: here a first touch cost
    9.6 us per 4 KiB page and a second 2.7 us, about 1.8 s more per GiB. The page cache of a broker that
    writes 1 GiB into never-touched memory pays that inside its write(2)s, and whichever broker ran first
    would pay it; after this the kernel hands both brokers pages that have been touched. Returns the
    GiB touched and the microseconds per page it took (near 2-3 on memory touched before).
    """
    available = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable"):
                available = int(line.split()[1]) * 1024
    size = max(0, min(limit_bytes, available - keep_free_bytes)) // (1 << 20) * (1 << 20)
    if size == 0:
        return {"gib": 0.0, "us_per_page": 0.0}
    import mmap
    import time

    chunk = b"\x01" * (1 << 20)
    t0 = time.perf_counter()
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for _ in range(size >> 20):
            m.write(chunk)
    finally:
        m.close()
    seconds = time.perf_counter() - t0
    return {"gib": round(size / (1 << 30), 1), "us_per_page": round(seconds / (size / 4096) * 1e6, 2)}
