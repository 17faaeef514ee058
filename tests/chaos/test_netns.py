"""The chaos runs' own network (netns.py): nodes reachable from the client namespace, a cut node
unreachable both ways until mended, and nothing left behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from chaos.netns import NETNS_DIR, NetworkLab, NetworkLabUnavailable, node_host

PORT = 9092
# A node: a TCP server that answers each connection with a line, plus (for the outbound check) a
# client that reports whether it can reach another node's server.
ECHO = ("import socket,sys\n"
        "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
        "s.bind((sys.argv[1],int(sys.argv[2]))); s.listen()\n"
        "while True:\n"
        "    c,_=s.accept(); c.sendall(b'hi\\n'); c.close()\n")


def reach(host: str, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, PORT), timeout=timeout_s) as s:
            return s.recv(3) == b"hi\n"
    except OSError:
        return False


def reach_from(lab: NetworkLab, node_id: int, host: str) -> bool:
    """Whether node `node_id`'s namespace reaches `host`'s server."""
    probe = ("import socket,sys\n"
             "try:\n"
             "    socket.create_connection((sys.argv[1], 9092), timeout=1).close(); print('yes')\n"
             "except OSError:\n"
             "    print('no')\n")
    out = subprocess.run(["ip", "netns", "exec", lab.namespace(node_id), sys.executable, "-c", probe, host],
                         capture_output=True, text=True, timeout=10)
    return out.stdout.strip() == "yes"


@pytest.fixture
def lab() -> NetworkLab:
    try:
        made = NetworkLab.create(2)
    except NetworkLabUnavailable as e:
        pytest.skip(f"no network namespaces here, so the chaos runs leave the isolate fault out: {e}")
    yield made  # type: ignore[misc]
    made.destroy()


@pytest.mark.timeout(60)
def test_cut_isolates_a_node_both_ways_and_mend_restores_it(lab: NetworkLab) -> None:
    servers = [subprocess.Popen(["ip", "netns", "exec", lab.namespace(n), sys.executable, "-c", ECHO,
                                 node_host(n), str(PORT)]) for n in lab.node_ids]
    own = os.readlink("/proc/thread-self/ns/net")
    try:
        with lab.inside_clients():
            deadline = time.monotonic() + 20
            while not all(reach(node_host(n)) for n in lab.node_ids):
                assert time.monotonic() < deadline, "the nodes' servers never became reachable"
                time.sleep(0.1)
            assert reach_from(lab, 1, node_host(2))

            lab.cut(2)
            assert not reach(node_host(2)), "a cut node still answers the clients"
            assert reach(node_host(1)), "cutting node 2 cut node 1 too"
            assert not reach_from(lab, 2, node_host(1)), "a cut node still reaches the others"
            assert not reach_from(lab, 1, node_host(2))

            lab.mend(2)
            deadline = time.monotonic() + 10
            while not (reach(node_host(2)) and reach_from(lab, 2, node_host(1))):
                assert time.monotonic() < deadline, "a mended node stayed unreachable"
                time.sleep(0.1)
            assert os.readlink("/proc/thread-self/ns/net") != own, "inside_clients did not move this thread"
        assert os.readlink("/proc/thread-self/ns/net") == own, "this thread did not come back to its namespace"
    finally:
        for s in servers:
            s.kill()
            s.wait(10)
    names = list(lab.created)
    lab.destroy()
    assert names and not any((NETNS_DIR / name).exists() for name in names)
