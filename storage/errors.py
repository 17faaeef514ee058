"""Storage exceptions; each carries the Kafka error code a broker should answer with in `.error_code`."""

from __future__ import annotations


class StorageError(Exception):
    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    error_code = 1  # OFFSET_OUT_OF_RANGE


class CorruptRecordError(StorageError):
    error_code = 2  # CORRUPT_MESSAGE


class InvalidRecordError(StorageError):
    """A retried sequence whose records differ from the batch already written under it (producer_state)."""

    error_code = 87  # INVALID_RECORD


class OutOfOrderSequenceError(StorageError):
    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    error_code = 47  # INVALID_PRODUCER_EPOCH


class KafkaStorageError(StorageError):
    error_code = 56  # KAFKA_STORAGE_ERROR: disk reserve hit, I/O error, partition offline


class InconsistentOffsetsError(StorageError):
    """A follower append that does not start at the log end offset (overlap or gap) or is not monotonic.

    Kafka raises UnexpectedAppendOffsetException / OffsetsOutOfOrderException here, which map to
    UNKNOWN_SERVER_ERROR (-1) on the wire; the replica fetcher treats it as "reconcile and retry".
    """

    error_code = -1
