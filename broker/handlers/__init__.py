"""One module per Kafka API; the dispatch tables map api_key to its handler, built from each module's ApiSpec.

Each handler module declares the versions it implements beside its version notes; ApiVersions
advertises exactly these tables, so a version appears here only when its handler works.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer

from samsa.broker.context import ApiSpec
from samsa.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    envelope,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
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
    raft_voters,
    sasl_authenticate,
    sasl_handshake,
    streams_group_describe,
    streams_group_heartbeat,
    streams_group_topology_description_update,
    sync_group,
    txn_offset_commit,
    unregister_broker,
    unregister_controller,
    update_features,
    write_txn_markers,
)
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import RequestHeader, response_class, response_header_version


@dataclass(frozen=True, slots=True)
class Api:
    spec: ApiSpec
    handler: Callable[..., Any]

    @property
    def key(self) -> int:
        return self.spec.key

    @property
    def min_version(self) -> int:
        return self.spec.min_version

    @property
    def max_version(self) -> int:
        return self.spec.max_version


def _table(*pairs: tuple[ApiSpec, Callable[..., Any]]) -> dict[int, Api]:
    table: dict[int, Api] = {}
    for spec, handler in pairs:
        if spec.key in table:
            raise ValueError(f"api_key {spec.key} registered twice")
        table[spec.key] = Api(spec, handler)
    return table


# Which handler serves which API; the version ranges are each module's own declaration.
HANDLERS: dict[int, Api] = _table(
    (produce.API, produce.handle_produce),
    (fetch.API, fetch.handle_fetch),
    (list_offsets.API, list_offsets.handle_list_offsets),
    (metadata.API, metadata.handle_metadata),
    (offset_commit.API, offset_commit.handle_offset_commit),
    (offset_fetch.API, offset_fetch.handle_offset_fetch),
    (find_coordinator.API, find_coordinator.handle_find_coordinator),
    (join_group.API, join_group.handle_join_group),
    (heartbeat.API, heartbeat.handle_heartbeat),
    (leave_group.API, leave_group.handle_leave_group),
    (sync_group.API, sync_group.handle_sync_group),
    (describe_groups.API, describe_groups.handle_describe_groups),
    (list_groups.API, list_groups.handle_list_groups),
    (api_versions.API, api_versions.handle_api_versions),
    (create_topics.API, create_topics.handle_create_topics),
    (delete_topics.API, delete_topics.handle_delete_topics),
    (delete_records.API, delete_records.handle_delete_records),
    (init_producer_id.API, init_producer_id.handle_init_producer_id),
    (offset_for_leader_epoch.API, offset_for_leader_epoch.handle_offset_for_leader_epoch),
    (add_partitions_to_txn.API, add_partitions_to_txn.handle_add_partitions_to_txn),
    (add_offsets_to_txn.API, add_offsets_to_txn.handle_add_offsets_to_txn),
    (end_txn.API, end_txn.handle_end_txn),
    (write_txn_markers.API, write_txn_markers.handle_write_txn_markers),
    (txn_offset_commit.API, txn_offset_commit.handle_txn_offset_commit),
    (describe_configs.API, describe_configs.handle_describe_configs),
    (alter_configs.ALTER_CONFIGS, alter_configs.handle_alter_configs),
    (describe_log_dirs.API, describe_log_dirs.handle_describe_log_dirs),
    (alter_replica_log_dirs.API, alter_replica_log_dirs.handle_alter_replica_log_dirs),
    (create_partitions.API, create_partitions.handle_create_partitions),
    (delete_groups.API, delete_groups.handle_delete_groups),
    (elect_leaders.API, elect_leaders.handle_elect_leaders),
    (alter_configs.INCREMENTAL_ALTER_CONFIGS, alter_configs.handle_incremental_alter_configs),
    (partition_reassignments.ALTER_PARTITION_REASSIGNMENTS,
     partition_reassignments.handle_alter_partition_reassignments),
    (partition_reassignments.LIST_PARTITION_REASSIGNMENTS,
     partition_reassignments.handle_list_partition_reassignments),
    (offset_delete.API, offset_delete.handle_offset_delete),
    (describe_cluster.API, describe_cluster.handle_describe_cluster),
    (describe_producers.API, describe_producers.handle_describe_producers),
    (describe_client_quotas.API, describe_client_quotas.handle_describe_client_quotas),
    (describe_transactions.API, describe_transactions.handle_describe_transactions),
    (list_transactions.API, list_transactions.handle_list_transactions),
    (quorum.DESCRIBE_QUORUM, quorum.handle_describe_quorum_on_broker),
    (describe_acls.API, describe_acls.handle_describe_acls),
    (create_acls.API, create_acls.handle_create_acls),
    (delete_acls.API, delete_acls.handle_delete_acls),
    (consumer_group_heartbeat.API, consumer_group_heartbeat.handle_consumer_group_heartbeat),
    (consumer_group_describe.API, consumer_group_describe.handle_consumer_group_describe),
    (sasl_handshake.API, sasl_handshake.handle_sasl_handshake),
    (sasl_authenticate.API, sasl_authenticate.handle_sasl_authenticate),
    (describe_user_scram_credentials.API, describe_user_scram_credentials.handle_describe_user_scram_credentials),
    (alter_user_scram_credentials.API, alter_user_scram_credentials.handle_alter_user_scram_credentials),
    (list_config_resources.API, list_config_resources.handle_list_config_resources),
    (describe_topic_partitions.API, describe_topic_partitions.handle_describe_topic_partitions),
    (update_features.API, update_features.handle_update_features),
    (unregister_broker.API, unregister_broker.handle_unregister_broker),
    (raft_voters.ADD_RAFT_VOTER, raft_voters.handle_add_raft_voter),
    (raft_voters.REMOVE_RAFT_VOTER, raft_voters.handle_remove_raft_voter),
    (streams_group_heartbeat.API, streams_group_heartbeat.handle_streams_group_heartbeat),
    (streams_group_describe.API, streams_group_describe.handle_streams_group_describe),
    (streams_group_topology_description_update.API,
     streams_group_topology_description_update.handle_streams_group_topology_description_update),
    (unregister_controller.API, unregister_controller.handle_unregister_controller),
)

# The controller listener (controller.listener.names in Kafka): what voters and brokers send the
# quorum and the active controller. Forwarded admin requests run the brokers' own handlers.
CONTROLLER_HANDLERS: dict[int, Api] = _table(
    (quorum.RAFT_FETCH, quorum.handle_raft),
    (api_versions.API, api_versions.handle_api_versions),
    (create_topics.API, create_topics.handle_create_topics),
    (delete_topics.API, delete_topics.handle_delete_topics),
    (alter_configs.ALTER_CONFIGS, alter_configs.handle_alter_configs),
    (create_partitions.API, create_partitions.handle_create_partitions),
    (elect_leaders.API, elect_leaders.handle_elect_leaders),
    (alter_configs.INCREMENTAL_ALTER_CONFIGS, alter_configs.handle_incremental_alter_configs),
    (partition_reassignments.ALTER_PARTITION_REASSIGNMENTS,
     partition_reassignments.handle_alter_partition_reassignments),
    (partition_reassignments.LIST_PARTITION_REASSIGNMENTS,
     partition_reassignments.handle_list_partition_reassignments),
    (quorum.VOTE, quorum.handle_raft),
    (quorum.BEGIN_QUORUM_EPOCH, quorum.handle_raft),
    (quorum.END_QUORUM_EPOCH, quorum.handle_raft),
    (quorum.DESCRIBE_QUORUM, quorum.handle_describe_quorum),
    (quorum.ALTER_PARTITION, quorum.handle_alter_partition),
    (quorum.FETCH_SNAPSHOT, quorum.handle_raft),
    (quorum.BROKER_REGISTRATION, quorum.handle_broker_registration),
    (quorum.BROKER_HEARTBEAT, quorum.handle_broker_heartbeat),
    (quorum.ALLOCATE_PRODUCER_IDS, quorum.handle_allocate_producer_ids),
    (create_acls.API, create_acls.handle_create_acls),
    (delete_acls.API, delete_acls.handle_delete_acls),
    (envelope.API, envelope.handle_envelope),  # forwarded requests with their client's principal
    (alter_user_scram_credentials.API, alter_user_scram_credentials.handle_alter_user_scram_credentials),
    (update_features.API, update_features.handle_update_features),
    (unregister_broker.API, unregister_broker.handle_unregister_broker),
    (raft_voters.ADD_RAFT_VOTER, raft_voters.handle_add_raft_voter),
    (raft_voters.REMOVE_RAFT_VOTER, raft_voters.handle_remove_raft_voter),
    (describe_cluster.API, describe_cluster.handle_describe_cluster_on_controller),  # KIP-919
    (raft_voters.UPDATE_RAFT_VOTER, raft_voters.handle_update_raft_voter),
    (unregister_controller.API, unregister_controller.handle_unregister_controller),
)
envelope.set_handlers(CONTROLLER_HANDLERS)


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
