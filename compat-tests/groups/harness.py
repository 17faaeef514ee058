"""Group-member processes for the group compat tests: start, watch their JSON-line events, kill, stop.

`MEMBER_COMMANDS` says how each client's member program (members/) is run; `Member` follows one
process's events (see members/member_common.py) in a reader thread.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEMBERS = HERE / "members"
REPO = HERE.parent.parent
JAVA_LIB = REPO / "compat-tests" / "java" / "target" / "lib"
NODE_MODULES = REPO / "compat-tests" / "node" / "node_modules" / "kafkajs"
PYTHON = sys.executable
CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kafkajs", "java")

_java_classes: Path | None = None


def java_classes() -> Path | None:
    """Compile members/Member.java once per session (None when javac or the client jars are missing)."""
    global _java_classes
    if _java_classes is None:
        if shutil.which("javac") is None or not JAVA_LIB.is_dir():
            return None
        out = Path(tempfile.mkdtemp(prefix="samsa-group-java-"))
        subprocess.run(["javac", "-cp", f"{JAVA_LIB}/*", "-d", str(out), str(MEMBERS / "Member.java")],
                       check=True, capture_output=True, timeout=120)
        _java_classes = out
    return _java_classes


def missing(client: str) -> str | None:
    """Why a client cannot run here, or None."""
    if client == "kafkajs" and (shutil.which("node") is None or not NODE_MODULES.is_dir()):
        return "kafkajs is not installed (make compat-deps)"
    if client == "java" and (shutil.which("javac") is None or not JAVA_LIB.is_dir()):
        return "the Java client is not built (make compat-deps)"
    return None


def member_command(client: str, bootstrap: str, topic: str, group: str, instance: str | None) -> list[str]:
    tail = [bootstrap, topic, group] + ([instance] if instance else [])
    match client:
        case "kafka-python":
            return [PYTHON, str(MEMBERS / "kafka_python_member.py"), *tail]
        case "aiokafka":
            return [PYTHON, str(MEMBERS / "aiokafka_member.py"), *tail]
        case "confluent-kafka":
            return [PYTHON, str(MEMBERS / "confluent_member.py"), *tail]
        case "kafkajs":
            return ["node", str(MEMBERS / "member.js"), *tail]
        case "java":
            classes = java_classes()
            assert classes is not None
            return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{JAVA_LIB}/*", "Member", *tail]
    raise ValueError(client)


@dataclass
class Member:
    client: str
    name: str
    proc: subprocess.Popen[str]
    assignments: list[tuple[float, list[int]]] = field(default_factory=list)
    records: list[tuple[float, int, int]] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)
    stderr_path: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, client: str, name: str, bootstrap: str, topic: str, group: str, *,
              instance: str | None = None, session_ms: int = 6000, workdir: Path) -> Member:
        env = dict(os.environ, SESSION_MS=str(session_ms), MEMBER_LIFETIME_S="240",
                   PYTHONPATH=str(MEMBERS), PYTHONUNBUFFERED="1")
        stderr_path = workdir / f"{name}.stderr"
        proc = subprocess.Popen(member_command(client, bootstrap, topic, group, instance), stdout=subprocess.PIPE,
                                stderr=open(stderr_path, "w"), stdin=subprocess.DEVNULL, text=True, env=env,
                                cwd=workdir)
        member = cls(client, name, proc, stderr_path=stderr_path)
        threading.Thread(target=member._read, daemon=True).start()
        return member

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            now = time.monotonic()
            with self._lock:
                if e["event"] == "assigned":
                    self.assignments.append((now, list(e["partitions"])))
                elif e["event"] == "record":
                    self.records.append((now, int(e["p"]), int(e["o"])))
                elif e["event"] == "committed":
                    for p, o in e["offsets"].items():
                        self.committed[int(p)] = int(o)

    @property
    def assignment(self) -> list[int] | None:
        with self._lock:
            return self.assignments[-1][1] if self.assignments else None

    def seen(self) -> list[tuple[float, int, int]]:
        with self._lock:
            return list(self.records)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self) -> str:
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 30) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise


def wait_until(what: str, condition: Callable[[], bool], timeout_s: float, members: list[Member]) -> float:
    """Poll `condition` until true; returns the seconds it took.  On timeout, fail with the members' state."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if condition():
            return time.monotonic() - start
        for m in members:
            if not m.alive() and m.proc.returncode not in (0, -signal.SIGKILL, -signal.SIGTERM):
                raise AssertionError(f"{m.name} ({m.client}) exited {m.proc.returncode}:\n{m.stderr_tail()}")
        time.sleep(0.05)
    state = "\n".join(f"  {m.name}: alive={m.alive()} assignment={m.assignment} records={len(m.seen())} "
                      f"committed={m.committed}\n{m.stderr_tail()[-800:]}" for m in members)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}\n{state}")
