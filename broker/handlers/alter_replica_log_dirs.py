"""AlterReplicaLogDirs (key 34), v1-v2 (KIP-113): move replicas between one broker's log directories.

A Samsa broker has a single log directory, so no replica ever moves: naming that directory (its absolute path,
as DescribeLogDirs gives it) for a partition the broker hosts is a no-op NONE, as Kafka answers for a replica
already there. The rest is Kafka's ReplicaManager.alterReplicaLogDirs, in its order: a topic whose future
directory name would pass 255 characters is INVALID_TOPIC_EXCEPTION, another path LOG_DIR_NOT_FOUND, an existing
partition not hosted here REPLICA_NOT_AVAILABLE, an unknown one UNKNOWN_TOPIC_OR_PARTITION. ALTER on the cluster
is needed (KafkaApis), else every partition is CLUSTER_AUTHORIZATION_FAILED. v1 is v0 (which Kafka 4 dropped);
v2 is flexible. Results are grouped by topic, in the order the request names them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.alter_replica_log_dirs import v1, v2
    AlterReplicaLogDirsRequest = v1.AlterReplicaLogDirsRequest | v2.AlterReplicaLogDirsRequest
    AlterReplicaLogDirsResponse = v1.AlterReplicaLogDirsResponse | v2.AlterReplicaLogDirsResponse

API = ApiSpec(key=34, min_version=1, max_version=2)

# UnifiedLog.logFutureDirName: "<topic>-<partition>.<32 hex>-future" must fit a file name (KAFKA-4893).
_FUTURE_SUFFIX = len(".") + 32 + len("-future")


def _error(ctx: RequestContext, log_dir: str, path: str, topic: str, partition: int) -> ErrorCode:
    if len(f"{topic}-{partition}") + _FUTURE_SUFFIX > 255:
        return ErrorCode.invalid_topic_exception
    if path != log_dir:
        return ErrorCode.log_dir_not_found
    if ctx.broker.replica_manager.get_partition(topic, partition) is not None:
        return ErrorCode.none  # already in the one log directory: nothing to move
    missing = ctx.broker.replica_manager.missing_error(topic, partition)
    return ErrorCode.replica_not_available if missing == ErrorCode.not_leader_or_follower else missing


def handle_alter_replica_log_dirs(request: AlterReplicaLogDirsRequest,
                                  ctx: RequestContext) -> AlterReplicaLogDirsResponse:
    denied = cluster_error(ctx, AclOperation.ALTER)
    log_dir = os.path.abspath(ctx.broker.log_manager.data_dir)
    # Kafka reads the request as a map partition -> path: a partition named twice keeps its last path.
    wanted: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted.pop((t.name, int(p)), None)
                wanted[(t.name, int(p))] = d.path
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), path in wanted.items():
        error = denied if denied else _error(ctx, log_dir, path, topic, partition)
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    cls: type[AlterReplicaLogDirsResponse] = response_class(34, ctx.version)
    return build(cls, {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": partitions} for name, partitions in by_topic.items()]})
