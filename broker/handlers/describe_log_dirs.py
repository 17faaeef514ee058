"""DescribeLogDirs (key 35), v1-v5: each log directory's partitions, their sizes and offset lag (KIP-113).

v1 is v0 (which Kafka 4 dropped) with the same fields; v2 is flexible; v3 adds the top-level
error_code; v4 adds total_bytes and usable_bytes of the directory's volume (KIP-827); v5 adds is_cordoned
(Kafka 4.4's cordoned.log.dirs: no new partition goes there), always false here: Samsa does not cordon. Mirrors Kafka's
ReplicaManager.describeLogDirs: topics=null asks for every hosted partition, else only the named ones
this broker holds (others are left out, not errors); partitions are grouped by topic and topics without
any requested partition are dropped; offset_lag is max(high watermark - log end offset, 0), which is 0
for a current (not future) log. Samsa has one log directory and no future logs (AlterReplicaLogDirs),
so is_future_key is always false. The metadata log (__cluster_metadata) is the quorum's, not
LogManager's, so it is not listed, as in Kafka.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.metadata.log import METADATA_TOPIC
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_log_dirs import v1, v2, v3, v4, v5
    DescribeLogDirsRequest = (v1.DescribeLogDirsRequest | v2.DescribeLogDirsRequest | v3.DescribeLogDirsRequest
                              | v4.DescribeLogDirsRequest | v5.DescribeLogDirsRequest)
    DescribeLogDirsResponse = (v1.DescribeLogDirsResponse | v2.DescribeLogDirsResponse | v3.DescribeLogDirsResponse
                               | v4.DescribeLogDirsResponse | v5.DescribeLogDirsResponse)

API = ApiSpec(key=35, min_version=1, max_version=5)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionSize:
    """One partition's answer (a DescribeLogDirsPartition before it is built for the version)."""

    partition_index: int
    partition_size: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class LogDirResult:
    """The log directory's answer (a DescribeLogDirsResult): its partitions by topic, and its volume's
    total and usable bytes (-1 when unknown)."""

    error: ErrorCode
    log_dir: str
    topics: tuple[tuple[str, tuple[PartitionSize, ...]], ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1


def handle_describe_log_dirs(request: DescribeLogDirsRequest, ctx: RequestContext) -> DescribeLogDirsResponse:
    log_manager = ctx.broker.log_manager
    denied = cluster_error(ctx, AclOperation.DESCRIBE)  # KafkaApis: DESCRIBE on the cluster, else no results
    if denied:
        cls: type[DescribeLogDirsResponse] = response_class(35, ctx.version)
        return build(cls, {"throttle_time": 0, "error_code": denied, "results": ()})
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    by_topic: dict[str, list[PartitionSize]] = {}
    for topic, partition, log in sorted(log_manager.all_logs(), key=lambda e: (e[0], e[1])):
        if topic == METADATA_TOPIC or (wanted is not None and (topic, partition) not in wanted):
            continue
        by_topic.setdefault(topic, []).append(
            PartitionSize(partition, log.size_bytes, max(log.high_watermark - log.log_end_offset, 0)))
    log_dir = os.path.abspath(log_manager.data_dir)
    topics = tuple((t, tuple(parts)) for t, parts in by_topic.items())
    try:
        st = os.statvfs(log_dir)
        result = LogDirResult(ErrorCode.none, log_dir, topics, st.f_blocks * st.f_frsize,
                              log_manager.file_io.disk_free_bytes(log_manager.data_dir))
    except OSError as e:
        logger.warning("DescribeLogDirs: cannot read the volume of %s: %s", log_dir, e)
        result = LogDirResult(ErrorCode.kafka_storage_error, log_dir)
    return _response(ctx, result)


def _response(ctx: RequestContext, result: LogDirResult) -> DescribeLogDirsResponse:
    """The one place the answer becomes the kio response of the request's version (is_future_key is always
    false: no future logs)."""
    cls: type[DescribeLogDirsResponse] = response_class(35, ctx.version)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "results": [{
        "error_code": result.error, "log_dir": result.log_dir, "total_bytes": result.total_bytes,
        "usable_bytes": result.usable_bytes, "is_cordoned": False, "topics": [
            {"name": name, "partitions": [
                {"partition_index": p.partition_index, "partition_size": p.partition_size,
                 "offset_lag": p.offset_lag, "is_future_key": False} for p in partitions]}
            for name, partitions in result.topics]}]})
