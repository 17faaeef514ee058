"""One module per Kafka API; this table maps api_key to its handler and the versions it implements.

ApiVersions advertises exactly this table, so a version appears here only when its handler works.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer

from samsa.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    quorum,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import RequestHeader, response_class, response_header_version


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    min_version: int
    max_version: int
    handler: Callable[..., Any]


HANDLERS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, 3, 12, produce.handle_produce),
        Api(1, 4, 17, fetch.handle_fetch),
        Api(2, 1, 10, list_offsets.handle_list_offsets),
        Api(3, 0, 13, metadata.handle_metadata),
        Api(8, 2, 9, offset_commit.handle_offset_commit),
        Api(9, 1, 9, offset_fetch.handle_offset_fetch),
        Api(10, 0, 6, find_coordinator.handle_find_coordinator),
        Api(11, 0, 9, join_group.handle_join_group),
        Api(12, 0, 4, heartbeat.handle_heartbeat),
        Api(13, 0, 5, leave_group.handle_leave_group),
        Api(14, 0, 5, sync_group.handle_sync_group),
        Api(15, 0, 6, describe_groups.handle_describe_groups),
        Api(16, 0, 5, list_groups.handle_list_groups),
        Api(18, 0, 4, api_versions.handle_api_versions),
        Api(19, 2, 7, create_topics.handle_create_topics),
        Api(20, 1, 6, delete_topics.handle_delete_topics),
        Api(21, 0, 2, delete_records.handle_delete_records),
        Api(22, 0, 5, init_producer_id.handle_init_producer_id),
        Api(23, 2, 4, offset_for_leader_epoch.handle_offset_for_leader_epoch),
        Api(24, 0, 5, add_partitions_to_txn.handle_add_partitions_to_txn),
        Api(25, 0, 4, add_offsets_to_txn.handle_add_offsets_to_txn),
        Api(26, 0, 4, end_txn.handle_end_txn),
        Api(27, 1, 1, write_txn_markers.handle_write_txn_markers),
        Api(28, 0, 4, txn_offset_commit.handle_txn_offset_commit),
        Api(32, 1, 4, describe_configs.handle_describe_configs),
        Api(33, 0, 2, alter_configs.handle_alter_configs),
        Api(35, 1, 4, describe_log_dirs.handle_describe_log_dirs),
        Api(37, 0, 3, create_partitions.handle_create_partitions),
        Api(42, 0, 2, delete_groups.handle_delete_groups),
        Api(43, 0, 2, elect_leaders.handle_elect_leaders),
        Api(44, 0, 1, alter_configs.handle_incremental_alter_configs),
        Api(45, 0, 0, partition_reassignments.handle_alter_partition_reassignments),
        Api(46, 0, 0, partition_reassignments.handle_list_partition_reassignments),
        Api(47, 0, 0, offset_delete.handle_offset_delete),
        Api(60, 0, 1, describe_cluster.handle_describe_cluster),
        Api(61, 0, 0, describe_producers.handle_describe_producers),
        Api(65, 0, 0, describe_transactions.handle_describe_transactions),
        Api(66, 0, 2, list_transactions.handle_list_transactions),
        Api(55, 0, 2, quorum.handle_describe_quorum_on_broker),
    )
}

# The controller listener (controller.listener.names in Kafka): what voters and brokers send the
# quorum and the active controller. Forwarded admin requests run the brokers' own handlers.
CONTROLLER_HANDLERS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(1, 13, 17, quorum.handle_raft),
        Api(18, 0, 4, api_versions.handle_api_versions),
        Api(19, 2, 7, create_topics.handle_create_topics),
        Api(20, 1, 6, delete_topics.handle_delete_topics),
        Api(33, 0, 2, alter_configs.handle_alter_configs),
        Api(37, 0, 3, create_partitions.handle_create_partitions),
        Api(43, 0, 2, elect_leaders.handle_elect_leaders),
        Api(44, 0, 1, alter_configs.handle_incremental_alter_configs),
        Api(45, 0, 0, partition_reassignments.handle_alter_partition_reassignments),
        Api(46, 0, 0, partition_reassignments.handle_list_partition_reassignments),
        Api(52, 0, 2, quorum.handle_raft),
        Api(53, 0, 1, quorum.handle_raft),
        Api(54, 0, 1, quorum.handle_raft),
        Api(55, 0, 2, quorum.handle_describe_quorum),
        Api(56, 2, 3, quorum.handle_alter_partition),
        Api(59, 0, 1, quorum.handle_raft),
        Api(62, 0, 4, quorum.handle_broker_registration),
        Api(63, 0, 1, quorum.handle_broker_heartbeat),
        Api(67, 0, 0, quorum.handle_allocate_producer_ids),
    )
}


def _advertised(table: dict[int, Api]) -> Callable[[], list[tuple[int, int, int]]]:
    return lambda: [(a.key, a.min_version, a.max_version) for a in sorted(table.values(), key=lambda a: a.key)]


api_versions.set_supported(_advertised(HANDLERS), _advertised(CONTROLLER_HANDLERS))


def api_versions_v0_fallback(header: RequestHeader) -> bytes:
    """KIP-511: an ApiVersions request of a version we don't know gets a v0 response with error 35,
    listing only ApiVersions' own range (as Kafka does) so the client retries with a version we speak."""
    cls = response_class(18, 0)
    own = HANDLERS[18]
    body = build(cls, {"error_code": ErrorCode.unsupported_version,
                       "api_keys": [{"api_key": 18, "min_version": own.min_version, "max_version": own.max_version}]})
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    assert response_header_version(18, 0) == 0
    out.write(header.correlation_id.to_bytes(4, "big", signed=True))
    entity_writer(cls)(out, body)
    data = bytearray(out.getvalue())
    data[0:4] = (len(data) - 4).to_bytes(4, "big")
    return bytes(data)
