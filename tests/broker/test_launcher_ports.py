"""The launcher's port choice: below the kernel's ephemeral range, a slice per pytest-xdist worker, never the
same port twice in a row, and skipping a port something already holds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.broker import launcher

EPHEMERAL_LOW = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])

pytestmark = pytest.mark.skipif(EPHEMERAL_LOW - launcher.PORTS_LOW < 2000,
                                reason="this kernel's ephemeral range leaves no room below it: port 0 is used")


def ports_in_worker(worker: str, count: int) -> list[int]:
    env = dict(os.environ, PYTEST_XDIST_WORKER=worker, PYTEST_XDIST_WORKER_COUNT="2")
    program = f"from samsa.broker import launcher; print(launcher.free_ports({count}))"
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [int(p) for p in out.strip().strip("[]").split(",")]


def test_ports_come_from_below_the_ephemeral_range_and_are_not_repeated() -> None:
    first = launcher.free_ports(5)
    then = [launcher.free_port() for _ in range(20)]
    assert len(set(first + then)) == 25
    assert all(launcher.PORTS_LOW <= p < EPHEMERAL_LOW for p in first + then)


def test_two_xdist_workers_draw_from_disjoint_slices() -> None:
    middle = launcher.PORTS_LOW + (EPHEMERAL_LOW - launcher.PORTS_LOW) // 2
    assert all(launcher.PORTS_LOW <= p < middle for p in ports_in_worker("gw0", 10))
    assert all(middle <= p < EPHEMERAL_LOW for p in ports_in_worker("gw1", 10))


def test_a_port_in_use_is_skipped() -> None:
    nxt = launcher.free_port() + 1
    with socket.socket() as held:
        try:
            held.bind(("127.0.0.1", nxt))
        except OSError:
            pytest.skip(f"port {nxt} is in use by something else already")
        held.listen()
        assert launcher.free_port() != nxt
