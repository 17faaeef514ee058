"""The partition log on disk: segments, sparse indexes, recovery, retention, epoch cache, producer state."""

from samsa.storage.config import LogConfig
from samsa.storage.errors import (
    CorruptRecordError,
    InconsistentOffsetsError,
    InvalidProducerEpochError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    StorageError,
)
from samsa.storage.file_io import FaultyFileIO, FileIO, OsFileIO
from samsa.storage.handle_cache import HandleCache
from samsa.storage.log import FetchDataInfo, FileRegion, Log, LogAppendInfo
from samsa.storage.log_manager import LogManager
from samsa.storage.producer_state import ProducerStateEntry

__all__ = [
    "CorruptRecordError",
    "FaultyFileIO",
    "FetchDataInfo",
    "FileIO",
    "FileRegion",
    "HandleCache",
    "InconsistentOffsetsError",
    "InvalidProducerEpochError",
    "KafkaStorageError",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "OsFileIO",
    "OutOfOrderSequenceError",
    "ProducerStateEntry",
    "StorageError",
]
