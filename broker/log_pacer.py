"""Creates and deletes partition logs in bounded steps on the event loop, so that one metadata change
of thousands of partitions (a CreateTopics or DeleteTopics that Kafka's 10,000-records bound allows)
never holds the loop: other clients are served between steps. Kafka does this work on its metadata
publisher's thread, off the request path.

A change of at most INLINE_LOG_CHANGES logs is done at once, as before, even while a larger one
goes on; a larger one is done in steps of LOG_STEP_S. Creations go first in each step (a new topic
is not held up behind a deletion), except that a log still waiting to be deleted is created only
once it is gone (a topic deleted and created again under the same name must get a new, empty log).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

INLINE_LOG_CHANGES = 256
LOG_STEP_S = 0.02

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Created:
    """What a created partition means for the listeners."""

    follower: bool  # another broker leads it: the replica fetchers must learn of it
    internal: bool  # an internal topic's: the coordinators may lead it now


@dataclass(slots=True)
class StepDone:
    finished: bool
    followers: bool = False
    internal: bool = False


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class LogPacer:
    def __init__(self, create: Callable[[Key], Created | None], detach: Callable[[Key], Path | None],
                 finish: Callable[[list[Path]], None], after_step: Callable[[StepDone], None]) -> None:
        self._create = create  # creates the log and partition, None if the image no longer wants it
        self._detach = detach  # forgets a log and renames its directory
        self._finish = finish  # syncs the data directory once and removes the renamed directories
        self._after_step = after_step  # told after every step that ran later, not inline
        self._to_create: dict[Key, None] = {}  # insertion-ordered sets
        self._to_delete: dict[Key, None] = {}
        self._handle: asyncio.Handle | None = None

    @property
    def waiting(self) -> int:
        return len(self._to_create) + len(self._to_delete)

    def deleting(self, key: Key) -> bool:
        return key in self._to_delete

    def creating(self, key: Key) -> bool:
        return key in self._to_create

    def submit(self, creates: list[Key], deletes: list[Key]) -> None:
        """Do a small change at once (even while a large one goes on in steps: a small topic is not
        held up behind a large one), and queue a large one for steps."""
        if not _loop_running() or len(creates) + len(deletes) <= INLINE_LOG_CHANGES:
            self._at_once(creates, deletes)
            return
        self._to_delete.update(dict.fromkeys(deletes))
        self._to_create.update(dict.fromkeys(creates))
        self._step(LOG_STEP_S)

    def _at_once(self, creates: list[Key], deletes: list[Key]) -> None:
        doomed: list[Path] = []
        # a queued deletion of a log created again goes now, before its creation
        for key in [*deletes, *(k for k in creates if k in self._to_delete)]:
            self._to_delete.pop(key, None)
            self._to_create.pop(key, None)
            path = self._detach(key)
            if path is not None:
                doomed.append(path)
        self._finish(doomed)
        for key in creates:
            self._to_create.pop(key, None)
            self._create(key)
        if not _loop_running() and self.waiting:
            self._step(None)

    def close(self) -> None:
        """Stop (the logs are closing); what was not deleted yet goes at the next start (unknown logs)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._to_create.clear()
        self._to_delete.clear()

    def _step(self, budget_s: float | None) -> StepDone:
        deadline = None if budget_s is None else time.monotonic() + budget_s
        done = StepDone(finished=False)

        def over() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        for key in list(self._to_create):
            if over():
                break
            if key in self._to_delete:
                continue  # its old log goes first
            del self._to_create[key]
            created = self._create(key)
            if created is not None:
                done.followers |= created.follower
                done.internal |= created.internal
        doomed: list[Path] = []
        while self._to_delete and not over():
            key = next(iter(self._to_delete))
            del self._to_delete[key]
            path = self._detach(key)
            if path is not None:
                doomed.append(path)
        self._finish(doomed)
        if budget_s is None and self._to_create:
            self._step(None)  # created only now that their old logs are gone
        done.finished = not self.waiting
        if not done.finished and self._handle is None and budget_s is not None:
            logger.info("partition logs: %d to create, %d to delete in later steps", len(self._to_create),
                        len(self._to_delete))
            self._handle = asyncio.get_running_loop().call_soon(self._next_step)
        return done

    def _next_step(self) -> None:
        self._handle = None
        self._after_step(self._step(LOG_STEP_S))
