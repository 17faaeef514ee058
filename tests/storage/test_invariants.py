"""The partition log's invariants are checked with `raise`, so they hold under `python -O` too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_batches import make_batch, open_log

from samsa.storage.invariants import StorageInvariantError, check_appended, check_offsets, check_read_header

HERE = Path(__file__).parent


def test_checks_refuse_offsets_out_of_order() -> None:
    check_offsets("p-0", 0, 3, 5)
    with pytest.raises(StorageInvariantError, match="log start 4, high watermark 3"):
        check_offsets("p-0", 4, 3, 5)
    with pytest.raises(StorageInvariantError):
        check_offsets("p-0", 0, 6, 5)
    check_appended("p-0", 5, 9, 10)
    with pytest.raises(StorageInvariantError):
        check_appended("p-0", 5, 9, 12)  # a gap between the batch and the log end
    with pytest.raises(StorageInvariantError):
        check_read_header("p-0", 1, 0, 9, 3)  # not magic 2
    with pytest.raises(StorageInvariantError):
        check_read_header("p-0", 2, 0, 2, 3)  # does not hold the fetch offset


def test_a_log_whose_offsets_disagree_refuses_to_move_its_high_watermark(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=0, now_ms=1)
    log.update_high_watermark(2)
    assert log.high_watermark == 2
    log.log_start_offset = 5  # our own bug, simulated: a start past the end
    with pytest.raises(StorageInvariantError):
        log.update_high_watermark(2)
    log.close()


def test_the_checks_survive_python_dash_o(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(HERE)!r})
        assert False, "this line vanishes under -O"
        from storage_batches import make_batch, open_log
        from samsa.storage.invariants import StorageInvariantError
        log = open_log(__import__("pathlib").Path({str(tmp_path / "t-0")!r}))
        log.append_as_leader(make_batch([b"a"]), leader_epoch=0, now_ms=1)
        log.log_start_offset = 7
        try:
            log.update_high_watermark(1)
        except StorageInvariantError as e:
            print("refused:", e)
        else:
            print("accepted")
    """)
    done = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:"), done.stdout
