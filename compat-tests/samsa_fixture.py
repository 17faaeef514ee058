"""Start and stop a Samsa broker process for compat tests.

    from samsa_fixture import samsa_broker

    with samsa_broker() as s:          # free loopback port, data in a temporary directory
        print(s.bootstrap)             # "127.0.0.1:PORT"

Runs ``.venv/bin/samsa serve --listen 127.0.0.1:PORT --advertise 127.0.0.1:PORT --data-dir DIR
--log-level LEVEL`` (``SAMSA_BIN`` overrides the executable), waits until the port accepts TCP
(at most ``ready_timeout`` s: ``SAMSA_READY_TIMEOUT`` or 60), and stops the process by its PID: SIGTERM, then
SIGKILL after ``stop_timeout`` s. stdout and stderr go to ``DIR/../samsa.log``; errors quote its tail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from oracle_fixture import HOST, free_port, stop_pid

from samsa.broker.launcher import LaunchError, ServeOptions, start_serve

REPO = Path(__file__).resolve().parent.parent
SAMSA_BIN = Path(os.environ.get("SAMSA_BIN", REPO / ".venv" / "bin" / "samsa"))


class SamsaError(RuntimeError):
    """The Samsa broker could not be started, or died."""


@dataclass
class SamsaProcess:
    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    log_path: Path
    workdir: Path
    start_seconds: float = 0.0

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last {len(text)} lines of {self.log_path}\n" + "\n".join(text)

    def check_alive(self) -> None:
        if not self.alive():
            raise SamsaError(f"samsa (PID {self.pid}) exited with code {self.proc.returncode}\n{self.log_tail()}")

    def stop(self, timeout: float = 10.0, *, keep: bool = False) -> int | None:
        """SIGTERM, wait ``timeout`` s, SIGKILL. Returns the exit code. Deletes the work dir unless ``keep``."""
        stop_pid(self.proc, timeout=timeout)
        if not keep and os.environ.get("SAMSA_KEEP_DATA") != "1":
            shutil.rmtree(self.workdir, ignore_errors=True)
        return self.proc.returncode


def start_samsa(
    *,
    port: int | None = None,
    data_dir: Path | None = None,
    log_level: str = "INFO",
    extra_args: Sequence[str] = (),
    ready_timeout: float | None = None,
) -> SamsaProcess:
    if ready_timeout is None:
        ready_timeout = float(os.environ.get("SAMSA_READY_TIMEOUT", "60"))
    if not (SAMSA_BIN.is_file() and os.access(SAMSA_BIN, os.X_OK)):
        raise SamsaError(
            f"the samsa console script is missing: {SAMSA_BIN} does not exist. It comes from "
            "pyproject's [project.scripts] samsa = samsa.broker.cli:main (`make test` installs the package); "
            "set SAMSA_BIN to use another executable."
        )
    t0 = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="samsa-compat-"))
    data = data_dir if data_dir is not None else workdir / "data"
    log_path = workdir / "samsa.log"
    port = port or free_port()
    options = ServeOptions(data_dir=data, port=port, host=HOST, log_level=log_level, extra_args=tuple(extra_args),
                           program=(str(SAMSA_BIN),))
    served = start_serve(options, log_path, cwd=workdir, die_with_parent=True)
    s = SamsaProcess(proc=served.popen, port=port, data_dir=data, log_path=log_path, workdir=workdir)
    ok = False
    try:
        served.wait_listening(ready_timeout)
        s.start_seconds = time.monotonic() - t0
        ok = True
        return s
    except LaunchError as e:
        raise SamsaError(str(e)) from None
    finally:
        if not ok:
            s.stop(timeout=5)  # the error message quotes the log


@contextlib.contextmanager
def samsa_broker(*, stop_timeout: float = 10.0, **kwargs: object) -> Iterator[SamsaProcess]:
    """Context manager: start Samsa (see ``start_samsa``), yield it, always stop it by PID."""
    s = start_samsa(**kwargs)  # type: ignore[arg-type]
    try:
        yield s
    finally:
        s.stop(timeout=stop_timeout)
