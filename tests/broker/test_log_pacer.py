"""broker.log_pacer: a large change of partition logs is done in steps with the event loop free between
them; a small one at once; a log deleted and created again is deleted first."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from samsa.broker.log_pacer import INLINE_LOG_CHANGES, Created, Key, LogPacer, StepDone


class Recorder:
    def __init__(self, create_s: float = 0.0) -> None:
        self.events: list[tuple[str, Key | int]] = []
        self.steps: list[StepDone] = []
        self.create_s = create_s

    def create(self, key: Key) -> Created | None:
        if self.create_s:
            time.sleep(self.create_s)  # a slow file system: the loop is held while a log is made
        self.events.append(("create", key))
        return Created(follower=False, internal=key[0].startswith("__"))

    def detach(self, key: Key) -> Path | None:
        if self.create_s:
            time.sleep(self.create_s)
        self.events.append(("detach", key))
        return Path(f"/nonexistent/{key[0]}-{key[1]}.x-delete")

    def finish(self, doomed: list[Path]) -> None:
        self.events.append(("finish", len(doomed)))

    def pacer(self) -> LogPacer:
        return LogPacer(self.create, self.detach, self.finish, self.steps.append)


def test_a_small_change_is_done_at_once_without_a_loop() -> None:
    r = Recorder()
    pacer = r.pacer()
    pacer.submit([("t", i) for i in range(3)], [("old", 0), ("old", 1)])
    assert pacer.waiting == 0
    assert [e for e in r.events if e[0] == "create"] == [("create", ("t", i)) for i in range(3)]
    assert ("finish", 2) in r.events  # one directory sync for both deletions


def test_a_large_change_runs_in_steps_and_others_run_between_them() -> None:
    r = Recorder(create_s=0.001)
    count = INLINE_LOG_CHANGES * 4

    async def main() -> list[int]:
        pacer = r.pacer()
        pacer.submit([("big", i) for i in range(count)], [])
        assert 0 < pacer.waiting < count  # the first step ran inline, the rest is queued
        seen: list[int] = []
        while pacer.waiting:
            # another client's work: runs between steps, seeing how many logs exist so far
            seen.append(sum(1 for e in r.events if e[0] == "create"))
            await asyncio.sleep(0)
        return seen

    seen = asyncio.run(main())
    assert sum(1 for e in r.events if e[0] == "create") == count
    assert len({s for s in seen if 0 < s < count}) > 1  # it ran while creation was part way, more than once
    assert r.steps and r.steps[-1].finished and not any(s.finished for s in r.steps[:-1])


def test_a_log_deleted_and_created_again_is_deleted_first() -> None:
    r = Recorder(create_s=0.001)

    async def main() -> None:
        pacer = r.pacer()
        pacer.submit([], [("t", i) for i in range(INLINE_LOG_CHANGES * 2)])
        pacer.submit([("t", 5), ("new", 0)], [])
        while pacer.waiting:
            await asyncio.sleep(0)

    asyncio.run(main())
    assert r.events.index(("detach", ("t", 5))) < r.events.index(("create", ("t", 5)))
    # a new log that no deletion holds up is not kept waiting behind the deletions
    assert r.events.index(("create", ("new", 0))) < r.events.index(("detach", ("t", INLINE_LOG_CHANGES * 2 - 1)))
