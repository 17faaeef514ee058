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


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0
