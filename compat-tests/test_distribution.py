"""The distribution as a user installs it: sdist and wheel build, and the wheel installed into a clean venv
beside kafka-python, aiokafka and confluent-kafka adds exactly one top-level import package, `samsa`,
whose `samsa serve` works with a stock client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from importlib.metadata import requires, version
from pathlib import Path

import pytest

from samsa.broker import launcher

REPO = Path(__file__).resolve().parents[1]
CLIENTS = [f"{name}=={version(name)}" for name in ("kafka-python", "aiokafka", "confluent-kafka")]
START_TIMEOUT_S = 60

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _run(*cmd: str | Path, cwd: Path, timeout_s: float = 300) -> str:
    # PYTHONPATH and the repo as cwd would let the checkout's folders stand in for the installed package.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _top_level(site_packages: Path) -> set[str]:
    """Importable top-level names: packages (folders) and modules, not metadata or .pth files."""
    names = set()
    for entry in site_packages.iterdir():
        if entry.name.endswith((".dist-info", ".egg-info", ".pth")) or entry.name.startswith(("_", ".")):
            continue
        if entry.is_dir() or entry.suffix in (".py", ".so"):
            names.add(entry.name.split(".")[0])
    return names


def _free_port() -> int:
    return launcher.free_port()  # outside the ephemeral range, a slice per xdist worker: no port race


CLIENT_SCRIPT = """
import sys
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
bootstrap = sys.argv[1]
producer = KafkaProducer(bootstrap_servers=bootstrap)
for i in range(3):
    producer.send("installed", key=b"k", value=b"v%d" % i).get(timeout=30)
producer.close()
consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10000)
consumer.assign([TopicPartition("installed", 0)])
consumer.seek_to_beginning()
print(",".join(r.value.decode() for r in consumer))
for name in ("broker", "storage", "raft", "kproto"):
    try:
        __import__(name)
    except ModuleNotFoundError:
        continue
    print("shadowing", name)
"""


def test_wheel_installs_one_top_level_package_and_serves(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", dist, REPO, cwd=tmp_path)
    (wheel,) = dist.glob("samsa_broker-*.whl")
    (sdist,) = dist.glob("samsa_broker-*.tar.gz")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        roots = {n.split("/")[0] for n in names}
        assert "samsa/kproto/records.py" in z.namelist() and "samsa/broker/cli/__init__.py" in z.namelist()
    assert {r for r in roots if not r.endswith(".dist-info")} == {"samsa"}
    # every package of the four folders is in the wheel (pyproject lists them by hand)
    for folder in ("kproto", "storage", "raft", "broker"):
        for init in (REPO / folder).rglob("__init__.py"):
            assert f"samsa/{init.relative_to(REPO)}" in names, f"{init.parent} is missing from the wheel"
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "kproto/records.py", "storage/log.py", "raft/core.py",
            "broker/cli/__init__.py"} <= members

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    py = venv / "bin" / "python"
    # Samsa's own dependencies (kio, crc32c, ...) go in first: what the wheel itself adds is then only ours.
    runtime = [r for r in requires("samsa-broker") or () if "extra ==" not in r]
    _run(py, "-m", "pip", "install", "-q", *CLIENTS, *runtime, cwd=tmp_path)
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    before = _top_level(site_packages)
    _run(py, "-m", "pip", "install", "-q", "--no-deps", wheel, cwd=tmp_path)
    _run(py, "-m", "pip", "check", cwd=tmp_path)  # nothing the wheel needs is missing
    assert _top_level(site_packages) - before == {"samsa"}

    assert _run(venv / "bin" / "samsa", "--version", cwd=tmp_path).strip() == f"samsa {version('samsa-broker')}"

    port = _free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([venv / "bin" / "samsa", "serve", "--data-dir", tmp_path / "data",
                             "--listen", f"127.0.0.1:{port}"], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "samsa serve did not listen"
                time.sleep(0.05)
        out = _run(py, "-c", CLIENT_SCRIPT, f"127.0.0.1:{port}", cwd=tmp_path, timeout_s=120)
        assert out.split() == ["v0,v1,v2"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()
