"""Subprocess for the SIGKILL crash test: appends forever, printing each acknowledged append.

    python crash_writer.py <data_dir> <seed>

Each line on stdout is `<first_offset> <last_offset> <tag>` and is printed only after the append
returned, so everything printed must survive a SIGKILL.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from storage_batches import NOW_MS, make_batch

from samsa.storage import LogConfig, LogManager


def main() -> None:
    data_dir = Path(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    config = LogConfig(segment_bytes=rng.choice([2000, 20000]), index_interval_bytes=rng.choice([100, 4096]))
    manager = LogManager(data_dir, max_open_files=8)
    manager.load_logs(lambda _topic: config, NOW_MS)
    logs = [manager.get_or_create_log("crash.topic", p, config, NOW_MS) for p in range(3)]
    pid = 1000
    seq = [0, 0, 0]
    now_ms = NOW_MS
    for i in range(1_000_000):
        p = rng.randrange(3)
        n = rng.randint(1, 5)
        tag = f"{i}"
        values = [f"{tag}/{k}".encode() + b"." * rng.randint(0, 300) for k in range(n)]
        now_ms += 1
        batch = make_batch(values, base_timestamp=now_ms, producer_id=pid + p, producer_epoch=0,
                           base_sequence=seq[p])
        info = logs[p].append_as_leader(batch, leader_epoch=1, now_ms=now_ms)
        seq[p] += n
        logs[p].update_high_watermark(info.last_offset + 1)
        print(p, info.first_offset, info.last_offset, tag, flush=True)
        if i % 50 == 7:
            manager.flush_dirty(now_ms)
            manager.checkpoint_high_watermarks()
        if i % 97 == 3:
            manager.run_retention(now_ms)


if __name__ == "__main__":
    main()
