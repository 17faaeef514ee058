"""DescribeLogDirs (key 35), v1-v4: each log directory's partitions, their sizes and offset lag (KIP-113).

v1 is v0 (which Kafka 4 dropped) with the same fields; v2 is flexible; v3 adds the top-level
error_code; v4 adds total_bytes and usable_bytes of the directory's volume (KIP-827). Mirrors Kafka's
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
from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.metadata.log import METADATA_TOPIC
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=35, min_version=1, max_version=4)

logger = logging.getLogger(__name__)


def handle_describe_log_dirs(request: Any, ctx: RequestContext) -> Any:
    log_manager = ctx.broker.log_manager
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, log in sorted(log_manager.all_logs(), key=lambda e: (e[0], e[1])):
        if topic == METADATA_TOPIC or (wanted is not None and (topic, partition) not in wanted):
            continue
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "partition_size": log.size_bytes,
            "offset_lag": max(log.high_watermark - log.log_end_offset, 0),
            "is_future_key": False,
        })
    log_dir = os.path.abspath(log_manager.data_dir)
    result: dict[str, Any] = {"error_code": ErrorCode.none, "log_dir": log_dir,
                              "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
                              "total_bytes": -1, "usable_bytes": -1}
    try:
        st = os.statvfs(log_dir)
        result["total_bytes"] = st.f_blocks * st.f_frsize
        result["usable_bytes"] = log_manager.file_io.disk_free_bytes(log_manager.data_dir)
    except OSError as e:
        logger.warning("DescribeLogDirs: cannot read the volume of %s: %s", log_dir, e)
        result = {"error_code": ErrorCode.kafka_storage_error, "log_dir": log_dir, "topics": [],
                  "total_bytes": -1, "usable_bytes": -1}
    return build(response_class(35, ctx.version), {"throttle_time": 0, "error_code": ErrorCode.none,
                                                   "results": [result]})
