"""The partition log's invariants are checked with `raise`, so they hold under `python -O` too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_batches import make_batch, open_log

from samsa.storage.invariants import (
    StorageInvariantError,
    check_appended,
    check_high_watermark_advance,
    check_offsets,
    check_read_header,
    check_write_header,
)

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


def test_checks_refuse_a_high_watermark_going_back_and_a_batch_that_does_not_fit() -> None:
    check_high_watermark_advance("p-0", 3, 3, 5)
    check_high_watermark_advance("p-0", 3, 5, 5)
    with pytest.raises(StorageInvariantError, match="from 3 to 2"):
        check_high_watermark_advance("p-0", 3, 2, 5)
    with pytest.raises(StorageInvariantError):
        check_high_watermark_advance("p-0", 3, 6, 5)  # past the log end
    check_write_header("p-0", 2, 10, 19, 0, 10)
    check_write_header("p-0", 2, 12, 19, 0, 10)  # a follower of a compacted topic, past a gap
    with pytest.raises(StorageInvariantError):
        check_write_header("p-0", 1, 10, 19, 0, 10)  # not magic 2
    with pytest.raises(StorageInvariantError):
        check_write_header("p-0", 2, 9, 19, 0, 10)  # over offsets already written
    with pytest.raises(StorageInvariantError):
        check_write_header("p-0", 2, 10, 19, 11, 10)  # before its segment's base offset
    with pytest.raises(StorageInvariantError):
        check_write_header("p-0", 2, 10, 10 + (1 << 31), 0, 10)  # past what the offset index can hold


def test_the_high_watermark_moves_back_only_by_truncation(log_dir: Path) -> None:
    log = open_log(log_dir)
    for value in (b"a", b"b", b"c", b"d"):
        log.append_as_leader(make_batch([value]), leader_epoch=0, now_ms=1)
    log.advance_high_watermark(3)
    assert log.high_watermark == 3
    with pytest.raises(StorageInvariantError, match="from 3 to 2"):
        log.advance_high_watermark(2)
    with pytest.raises(StorageInvariantError, match="log end 4"):
        log.advance_high_watermark(5)
    assert log.high_watermark == 3  # neither refused move changed it
    log.truncate_to(1)  # the explicit way back: a follower reconciling with its leader
    assert log.high_watermark == 1
    log.advance_high_watermark(1)
    log.close()


def test_a_batch_that_does_not_fit_its_segment_is_refused_before_the_write(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(make_batch([b"a"]), leader_epoch=0, now_ms=1)
    seg = log.segments[-1]
    size_before = seg.size_bytes
    seg.base_offset = 5  # our own bug, simulated: the active segment claims to start past the log end
    for batch in (make_batch([b"b"]), make_batch([b"b"]) + make_batch([b"c"])):  # the fast path, then the other
        with pytest.raises(StorageInvariantError, match="does not fit the active segment"):
            log.append_as_leader(batch, leader_epoch=0, now_ms=1)
    assert seg.size_bytes == size_before  # nothing reached the file
    with pytest.raises(StorageInvariantError):
        log.append_as_follower(make_batch([b"b"], base_offset=1, leader_epoch=0), now_ms=1)
    assert seg.size_bytes == size_before
    seg.base_offset = 0
    log.close()


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
        log.advance_high_watermark(1)
        for move in (lambda: log.advance_high_watermark(0), lambda: log.append_as_leader(make_batch([b"b"]),
                                                                                      leader_epoch=0, now_ms=1)):
            try:
                move()
            except StorageInvariantError as e:
                print("refused:", e)
            else:
                print("accepted")
            log.segments[-1].base_offset = 9  # for the second move: a segment that starts past the log end
        log.segments[-1].base_offset = 0
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
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("refused:") for line in lines), done.stdout
