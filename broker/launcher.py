"""Start `samsa serve` as a child process, wait for its port, and stop it by PID: the one launcher behind
`samsa cluster up`, the tests, compat-tests and the benchmarks.

Processes are only ever signalled by the PID we started (with its start time, so a PID the kernel has
handed to another process since is never signalled), never found by name.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 25
PORT_POLL_S = 0.02
# How a broker is started when the caller names no program: this interpreter, this package.
DEFAULT_PROGRAM: tuple[str, ...] = (sys.executable, "-m", "samsa.broker.cli")


class LaunchError(RuntimeError):
    """The broker could not be started, or exited during start-up; the message quotes its log."""


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """`samsa serve`'s command line, as values."""

    data_dir: Path
    port: int
    host: str = HOST
    advertise: str | None = None  # HOST:PORT; None: what it listens on
    node_id: int | None = None
    controller_quorum: str | None = None
    controller_listen: str | None = None
    roles: str | None = None
    overrides: Sequence[str] = ()  # KEY=VALUE, each as --override
    log_level: str = "INFO"
    extra_args: Sequence[str] = ()
    program: Sequence[str] = DEFAULT_PROGRAM
    netns: str | None = None  # run inside this network namespace (`ip netns exec` execs in place)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def serve_command(o: ServeOptions) -> list[str]:
    command = [] if o.netns is None else ["ip", "netns", "exec", o.netns]
    command += [*o.program, "serve"]
    for flag, value in (("--node-id", o.node_id), ("--controller-quorum", o.controller_quorum),
                        ("--controller-listen", o.controller_listen), ("--roles", o.roles)):
        if value is not None:
            command += [flag, str(value)]
    command += ["--listen", o.bootstrap, "--advertise", o.advertise or o.bootstrap,
                "--data-dir", str(o.data_dir), "--log-level", o.log_level]
    for override in o.overrides:
        command += ["--override", override]
    return [*command, *o.extra_args]


# --- ports and processes -------------------------------------------------------------------------------


# Ports handed out are chosen below the kernel's ephemeral range (which port-0 binds and every outgoing
# connection draw from), from a slice of their own for each pytest-xdist worker, and in turn within a
# process: a port handed out but not yet bound can then be neither drawn again by a parallel test stream
# nor taken as the local port of some client's connection in the meantime.
PORTS_LOW = 10000


def _port_slice() -> tuple[int, int] | None:
    """[low, high) for this process, or None where the ephemeral range leaves no room below it."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if ephemeral_low - PORTS_LOW < 2000:
        return None
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    width = (ephemeral_low - PORTS_LOW) // workers
    low = PORTS_LOW + (index % workers) * width
    return low, low + width


_ports_lock = threading.Lock()
_next_port: list[int] = []  # this process's cursor in its slice, from a random start (a child process has its own)


def free_ports(count: int, host: str = HOST) -> list[int]:
    """Distinct ports free on `host` now, all held open together while choosing (see PORTS_LOW)."""
    socks: list[socket.socket] = []
    try:
        bounds = _port_slice()
        with _ports_lock:
            if bounds is not None and not _next_port:
                _next_port.append(bounds[0] + int.from_bytes(os.urandom(4), "big") % (bounds[1] - bounds[0]))
            tries = 0
            while len(socks) < count:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                port = 0
                if bounds is not None and tries < 4 * (bounds[1] - bounds[0]):
                    port = _next_port[0]
                    _next_port[0] = bounds[0] + (port + 1 - bounds[0]) % (bounds[1] - bounds[0])
                    tries += 1
                try:
                    s.bind((host, port))
                except OSError:
                    s.close()
                    if port == 0:
                        raise
                    continue
                socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = HOST) -> int:
    return free_ports(1, host)[0]


def port_open(port: int, timeout_s: float = 0.2, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn that kills the child if we die first. Linux signals when the forking *thread* exits,
    so it is only offered on the main thread (a worker thread may end early)."""
    return _die_with_parent if threading.current_thread() is threading.main_thread() else None


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None if gone or a
    zombie. With the PID it names a process uniquely: a reused PID has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """`pid` runs (not a zombie) and, when `start_time` is given, is still the process we started."""
    if not Path("/proc").is_dir():  # no procfs: signal 0 is the best we can do
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    current = process_start_time(pid)
    return current is not None and (start_time is None or current == start_time)


@dataclass(frozen=True, slots=True)
class OwnedProcess:
    """A PID we started, with its start time (None: unknown) and, for our own child, its Popen."""

    pid: int
    start_time: int | None = None
    child: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.child is not None:
            self.child.poll()  # reap our own child, or it lingers as a zombie
        return pid_alive(self.pid, self.start_time)

    def signal(self, signum: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def owned(child: subprocess.Popen[bytes]) -> OwnedProcess:
    return OwnedProcess(child.pid, process_start_time(child.pid), child)


def stop_pids(processes: Sequence[OwnedProcess], *, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """SIGTERM each (and SIGCONT, or a SIGSTOPped process cannot act on it), wait up to `timeout_s`
    for all, then SIGKILL the rest. Exactly one SIGTERM: a second one during a clean shutdown would
    hit Python's default handler. Returns the PIDs that needed SIGKILL."""
    running = [p for p in processes if p.alive()]
    for p in running:
        p.signal(signal.SIGTERM)
        p.signal(signal.SIGCONT)
    deadline = time.monotonic() + timeout_s
    while any(p.alive() for p in running) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = [p for p in running if p.alive()]
    for p in killed:
        p.signal(signal.SIGKILL)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while any(p.alive() for p in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p.pid for p in killed]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"(no log at {path})"
    return f"--- last {len(text)} lines of {path}\n" + "\n".join(text)


# --- one broker ------------------------------------------------------------------------------------------


@dataclass
class ServeProcess:
    """A `samsa serve` child: its options, Popen and log file."""

    options: ServeOptions
    popen: subprocess.Popen[bytes]
    log_path: Path
    command: list[str] = field(default_factory=list)
    log_start: int = 0  # where this process's output starts in log_path (restarts append to the same file)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def bootstrap(self) -> str:
        return self.options.bootstrap

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    def wait_listening(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Until the broker port accepts connections; the seconds it took. LaunchError (with the log's
        tail) if the process exits first or the time is up; the process is then left to the caller."""
        started = time.monotonic()
        while not (port_open(self.options.port, host=self.options.host) and self._announced_ready()):
            if not self.alive():
                raise LaunchError(f"samsa exited with code {self.popen.returncode} during start-up "
                                  f"({' '.join(self.command)})\n{self.log_tail()}")
            if time.monotonic() - started > timeout_s:
                raise LaunchError(f"samsa did not listen on {self.bootstrap} within {timeout_s:.0f} s\n"
                                  f"{self.log_tail()}")
            time.sleep(PORT_POLL_S)
        return time.monotonic() - started

    def _announced_ready(self) -> bool:
        """The port may answer for another process (a free port taken in between by someone else, whose
        bind made ours fail): at INFO and below, wait for this process's own "ready on" line too."""
        if self.options.log_level.upper() not in ("DEBUG", "INFO"):
            return True
        try:
            return b" ready on " in self.log_path.read_bytes()[self.log_start:]
        except OSError:
            return False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S, *, kill: bool = False) -> int | None:
        """SIGTERM (or SIGKILL with `kill`), SIGKILL after `timeout_s`; the exit code."""
        if self.alive():
            if kill:
                self.popen.kill()
            else:
                stop_pids([owned(self.popen)], timeout_s=timeout_s)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(STOP_TIMEOUT_S)
        return self.popen.returncode


def start_serve(options: ServeOptions, log_path: Path, *, cwd: Path | None = None, die_with_parent: bool = False,
                new_session: bool = False, env: Mapping[str, str] | None = None) -> ServeProcess:
    """Start `samsa serve` with `options`, appending its output to `log_path` (the command first)."""
    command = serve_command(options)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log_start = log.tell()
        log.write(("$ " + " ".join(command) + "\n").encode())
        log.flush()
        popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 cwd=cwd, env=None if env is None else dict(env), start_new_session=new_session,
                                 preexec_fn=die_with_parent_hook() if die_with_parent else None)
    return ServeProcess(options, popen, log_path, command, log_start)
