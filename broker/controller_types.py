"""What the controller shares with its parts: answers (Pending, results), the per-operation record
limit, and the narrow interface (ControllerCore) the parts decide through.

The parts (broker.cluster_control, broker.topic_control, broker.reassignment) import this module
and never broker.controller, so no part imports the controller that imports it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import MetadataRecord
from samsa.kproto.errors import ErrorCode

T = TypeVar("T")
U = TypeVar("U")

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP (= MAX_RECORDS_PER_BATCH): a user operation that
# would write more records than this is refused whole, creating nothing. Kafka's BoundedList throws
# BoundedListTooLongException, which the controller answers as a PolicyViolationException
# (EventHandlerExceptionInfo): POLICY_VIOLATION (44) with this message, for every item of the request.
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


class TooManyRecordsError(Exception):
    """A user operation would write more than MAX_RECORDS_PER_USER_OP records (Kafka's
    BoundedListTooLongException): the caller answers POLICY_VIOLATION for the whole request."""

    error_code = ErrorCode.policy_violation

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} records is more than the {MAX_RECORDS_PER_USER_OP} one operation may write")
        self.count = count
        self.message = EXCESSIVE_BATCH_MESSAGE


def check_record_count(count: int) -> None:
    """Raise TooManyRecordsError when an operation's records would pass the limit. Called with the
    count known before the records are built, so a refused operation costs no more than counting."""
    if count > MAX_RECORDS_PER_USER_OP:
        raise TooManyRecordsError(count)


class Pending(Generic[T]):
    """A controller answer whose records may still await their commit."""

    __slots__ = ("_commit", "value")

    def __init__(self, value: T, commit: asyncio.Future[int] | int | None) -> None:
        self.value = value
        self._commit = commit

    @property
    def done(self) -> bool:
        return not isinstance(self._commit, asyncio.Future)

    def result(self) -> T:
        """The value, once committed (a one-voter quorum: at once)."""
        assert self.done, "the metadata write has not been committed yet"
        return self.value

    def map(self, fn: Callable[[T], U]) -> Pending[U]:
        """The same commit, with the value `fn` makes of this one."""
        return Pending(fn(self.value), self._commit)

    def __await__(self) -> Generator[Any, None, T]:
        if isinstance(self._commit, asyncio.Future):
            yield from self._commit.__await__()
        return self.value


class ControllerCore(Protocol):
    """What the controller's parts need from it: the image to decide on, and a way to write."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def active(self) -> bool: ...

    def require_active(self) -> None: ...

    def commit(self, value: T, records: Sequence[MetadataRecord]) -> Pending[T]: ...

    def unclean_allowed(self, image: MetadataImage, topic: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class PartitionsSpec:
    """One topic of a CreatePartitions request: the new total count, and optional assignments."""

    name: str
    count: int
    assignments: Sequence[tuple[int, ...]] | None = None


TOPIC_RESOURCE_TYPE, BROKER_RESOURCE_TYPE = 2, 4  # ConfigResource.Type ids on the wire


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One resource of an AlterConfigs / IncrementalAlterConfigs request: config name -> new value,
    None to delete the override."""

    resource_type: int
    resource_name: str
    changes: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class AlterPartitionChange:
    topic_id: str
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    change: AlterPartitionChange
    error_code: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


def new_topic_id() -> str:
    while True:
        topic_id = uuid.uuid4()
        # Kafka reserves the zero UUID and the metadata topic's id; never hand them out.
        if topic_id.int not in (0, 1):
            return str(topic_id)
