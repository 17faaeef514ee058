"""`samsa serve` with a controllable disk, for the metadata-log fault tests (test_metadata_log_faults.py).

    python tests/broker/disk_fault_launcher.py CONTROL_DIR serve --data-dir ... --listen ...

Before the broker starts, the OS file interface (storage/file_io.py OsFileIO) is patched: while the file
CONTROL_DIR/free_bytes exists, the free-disk probe reports the number in it; while CONTROL_DIR/fail_fsync
exists, every fsync through the file interface fails with EIO (the segment fsyncs of every log).
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from samsa.storage.file_io import OsFileIO


def main() -> int:
    control = Path(sys.argv[1])
    real_free = OsFileIO.disk_free_bytes
    real_fsync = OsFileIO.fsync

    def disk_free_bytes(self: OsFileIO, path: Path) -> int:
        try:
            return int((control / "free_bytes").read_text())
        except FileNotFoundError:
            return real_free(self, path)

    def fsync(self: OsFileIO, fd: int) -> None:
        if (control / "fail_fsync").exists():
            raise OSError(errno.EIO, "injected fsync failure (disk_fault_launcher)")
        real_fsync(self, fd)

    OsFileIO.disk_free_bytes = disk_free_bytes  # type: ignore[method-assign]
    OsFileIO.fsync = fsync  # type: ignore[method-assign]
    from samsa.broker.cli import main as samsa_main

    return samsa_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
