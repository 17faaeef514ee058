"""The metadata quorum driver's small types: its errors, a voter's endpoint, a write awaiting commit.

Split from broker.metadata.quorum (MetadataQuorum), which re-exports the public ones.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

from samsa.kproto.errors import ErrorCode

__all__ = ["Endpoint", "MetadataWriteRefusedError", "NotControllerError", "PendingWrite", "halt_process",
           "now_ms"]


class NotControllerError(Exception):
    """This node cannot carry out a metadata write now; `leader_id` is the active controller if known.

    `error_code` is what a client of a controller API gets for it (server.py answers with it)."""

    error_code: ErrorCode = ErrorCode.not_controller

    def __init__(self, leader_id: int | None, message: str = "this node is not the active controller") -> None:
        super().__init__(message)
        self.leader_id = leader_id


class MetadataWriteRefusedError(NotControllerError):
    """The metadata log cannot take this write: free disk is under samsa.min.free.disk.bytes, or the log
    failed (fatal). Nothing was appended; callers treat it like NotControllerError (retry later)."""

    error_code = ErrorCode.kafka_storage_error


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


def now_ms() -> int:
    return int(time.time() * 1000)


def halt_process(error: BaseException) -> None:
    """Kafka's fatal fault handler: the process stops at once (a supervisor restarts it)."""
    logging.shutdown()
    os._exit(1)


class PendingWrite:
    __slots__ = ("epoch", "error", "future", "offset", "proposed_s")

    def __init__(self, epoch: int) -> None:
        self.epoch, self.proposed_s = epoch, time.perf_counter()
        self.offset: int | None = None
        self.error: NotControllerError | None = None
        self.future: asyncio.Future[int] | None = None

    def succeed(self, offset: int) -> None:
        self.offset = offset
        if self.future is not None and not self.future.done():
            self.future.set_result(offset)

    def fail(self, error: NotControllerError) -> None:
        self.error = error
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)
