"""Where the metadata quorum keeps its log: `__cluster_metadata-0`, a partition log like any other.

The driver (broker.metadata.quorum) writes Raft entries into it as record batches (raft.codec), one
record per entry; an entry holds the records of one controller operation (broker.metadata.records).
"""

from __future__ import annotations

from samsa.storage.config import LogConfig

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_LOG_CONFIG = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)

__all__ = ["METADATA_LOG_CONFIG", "METADATA_PARTITION", "METADATA_TOPIC"]
