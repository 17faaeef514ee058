"""The partition log on disk: segments, sparse indexes, recovery, retention, epoch cache, producer state."""

from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InconsistentOffsetsError,
    InvalidProducerEpochError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    StorageError,
)
from storage.file_io import FaultyFileIO, FileIO, OsFileIO
from storage.handle_cache import HandleCache
from storage.log import FetchDataInfo, FileRegion, Log, LogAppendInfo
from storage.log_manager import LogManager
from storage.producer_state import ProducerStateEntry

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
