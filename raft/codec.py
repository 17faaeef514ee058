"""The Raft core's messages as kio's Kafka wire classes (Kafka: RaftUtil); entries are in batch_codec.

The driver's codec: sans-IO, one partition (`__cluster_metadata`-0, topic id AAAAAAAAAAAAAAAAAAAAAQ).

    request = encode_request(msg, cluster_id=..., destination_id=..., leader_endpoint=...)   # newest version
    source, msg = decode_request(request, cluster_id=...)   # any version in REQUEST_VERSIONS; CodecError
    response = encode_response(msg, request_api_version, nodes=...)   # same API and version as the request
    msg = decode_response(response)                         # a top-level error becomes the message's error_code
    response = error_response(api_key, api_version, error.error_code)   # the answer to a CodecError
    response = describe_quorum_response(core.describe_quorum(), version, nodes=...)   # DescribeQuorum v0-v2
    data = encode_entries(entries); entries = decode_entries(data)   # Fetch records and the log on disk

Versions sent: Vote v2, BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v17 (a replica fetch:
replica_state.replica_id), FetchSnapshot v1. Versions read: Vote v0-v2 (v2 adds pre_vote, KIP-996),
BeginQuorumEpoch and EndQuorumEpoch v0-v1 (v1, KIP-853: directory ids, leader endpoints, and
EndQuorumEpoch's preferred_successors become preferred_candidates), Fetch v13-v18 (topic ids from v13,
KIP-516; replica_id moves into replica_state in v15, KIP-903), FetchSnapshot v0-v1.

decode_request checks what Kafka's KafkaRaftClient checks before it looks at any state: the cluster
id (INCONSISTENT_CLUSTER_ID when both sides have one and they differ), exactly one topic and one
partition that are ours (INVALID_REQUEST, "until we support multi-raft"; FetchSnapshot naming another
partition: UNKNOWN_TOPIC_OR_PARTITION), and the field bounds of handleVoteRequest and
handleFetchRequest (INVALID_REQUEST). error_response answers them all with a top-level error (Kafka:
RaftUtil.errorResponse; Kafka puts the field-bound and FetchSnapshot errors in the partition instead,
which a sender handles the same way). Responses carry the core's error in the partition, as
KafkaRaftClient's singletonResponse does.

Entries travel as v2 record batches: see batch_codec (encode_entries and decode_entries are named here too,
for the driver).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from samsa.kproto.messages import request_class, response_class
from samsa.kproto.wire import build, ms
from samsa.raft.batch_codec import MAX_DECOMPRESSED_BATCH_BYTES, CodecError, decode_entries, encode_entries
from samsa.raft.log import SnapshotId
from samsa.raft.messages import (
    NO_EPOCH,
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    ReplicaDescription,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)

__all__ = [
    "BEGIN_QUORUM_EPOCH_KEY",
    "CONTROLLER_LISTENER_NAME",
    "DESCRIBE_QUORUM_KEY",
    "END_QUORUM_EPOCH_KEY",
    "FETCH_KEY",
    "FETCH_MAX_BYTES",
    "FETCH_SNAPSHOT_KEY",
    "MAX_DECOMPRESSED_BATCH_BYTES",
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "REQUEST_VERSIONS",
    "UPDATE_RAFT_VOTER_KEY",
    "VOTE_KEY",
    "CodecError",
    "NodeEndpoint",
    "decode_entries",
    "decode_request",
    "decode_response",
    "describe_quorum_response",
    "encode_entries",
    "encode_request",
    "encode_response",
    "error_response",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's Topic.CLUSTER_METADATA_TOPIC_ID: Uuid(0, 1), "AAAAAAAAAAAAAAAAAAAAAQ". kio reads a uuid as
# uuid.UUID, and the all-zero uuid as None.
METADATA_TOPIC_ID = uuid.UUID(int=1)
_ZERO_UUID = uuid.UUID(int=0)

FETCH_KEY = 1
VOTE_KEY = 52
BEGIN_QUORUM_EPOCH_KEY = 53
END_QUORUM_EPOCH_KEY = 54
DESCRIBE_QUORUM_KEY = 55
FETCH_SNAPSHOT_KEY = 59
UPDATE_RAFT_VOTER_KEY = 82  # sent (v0) and its answer read; the broker's handler answers it, not decode_request

# (min, max) versions read and answered; encode_request sends the max (Fetch: v17, see _FETCH_SENT).
REQUEST_VERSIONS: Mapping[int, tuple[int, int]] = {
    VOTE_KEY: (0, 2),
    BEGIN_QUORUM_EPOCH_KEY: (0, 1),
    END_QUORUM_EPOCH_KEY: (0, 1),
    FETCH_KEY: (13, 18),
    FETCH_SNAPSHOT_KEY: (0, 1),
    DESCRIBE_QUORUM_KEY: (0, 2),
}
_FETCH_SENT = 17  # v18 adds only a tagged high_watermark (the follower's), which the core does not use

# Kafka: KafkaRaftClient.MAX_FETCH_SIZE_BYTES, both the request's and the partition's byte bound.
FETCH_MAX_BYTES = 8 * 1024 * 1024
CONTROLLER_LISTENER_NAME = "CONTROLLER"

# (node_id, host, port) of a controller listener, for node_endpoints and DescribeQuorum's nodes.
NodeEndpoint = tuple[int, str, int]


# -- requests ------------------------------------------------------------------------------------


def encode_request(
    msg: RaftRequest | UpdateVoterRequest,
    *,
    cluster_id: str | None,
    destination_id: int = -1,
    leader_endpoint: tuple[str, int] | None = None,
) -> object:
    """The kio request for `msg`, at the newest version we send.

    `destination_id` is Vote's and BeginQuorumEpoch's voter_id (-1: unknown, which Kafka accepts);
    `leader_endpoint` (host, port) is BeginQuorumEpoch's and EndQuorumEpoch's leader_endpoints entry
    (listener CONTROLLER), ignored by the other APIs.
    """
    endpoints: list[dict[str, Any]] = []
    partition: dict[str, Any]
    body: dict[str, Any]
    if leader_endpoint is not None:
        endpoints = [{"name": CONTROLLER_LISTENER_NAME, "host": leader_endpoint[0], "port": leader_endpoint[1]}]
    match msg:
        case VoteRequest():
            partition = {
                "partition_index": METADATA_PARTITION,
                "replica_epoch": msg.replica_epoch,
                "replica_id": msg.replica_id,
                "last_offset_epoch": msg.last_offset_epoch,
                "last_offset": msg.last_offset,
                "pre_vote": msg.pre_vote,
            }
            body = {"voter_id": destination_id, "topics": [_topic_data(partition)]}
            return _build_request(VOTE_KEY, 2, cluster_id, body)
        case BeginQuorumEpochRequest():
            partition = {
                "partition_index": METADATA_PARTITION,
                "leader_id": msg.leader_id,
                "leader_epoch": msg.leader_epoch,
            }
            body = {"voter_id": destination_id, "topics": [_topic_data(partition)], "leader_endpoints": endpoints}
            return _build_request(BEGIN_QUORUM_EPOCH_KEY, 1, cluster_id, body)
        case EndQuorumEpochRequest():
            partition = {
                "partition_index": METADATA_PARTITION,
                "leader_id": msg.leader_id,
                "leader_epoch": msg.leader_epoch,
                "preferred_candidates": [{"candidate_id": c} for c in msg.preferred_candidates],
            }
            body = {"topics": [_topic_data(partition)], "leader_endpoints": endpoints}
            return _build_request(END_QUORUM_EPOCH_KEY, 1, cluster_id, body)
        case FetchRequest():
            fetch_partition = {
                "partition": METADATA_PARTITION,
                "current_leader_epoch": msg.current_leader_epoch,
                "fetch_offset": msg.fetch_offset,
                "last_fetched_epoch": msg.last_fetched_epoch,
                "log_start_offset": msg.log_start_offset,
                "partition_max_bytes": FETCH_MAX_BYTES,
                # v17 (KIP-853): the leader tells observers apart by replica key, and AddRaftVoter checks it
                "replica_directory_id": None if msg.replica_directory_id == _ZERO_UUID else msg.replica_directory_id,
            }
            body = {
                "replica_state": {"replica_id": msg.replica_id, "replica_epoch": -1},
                "max_wait": msg.max_wait_ms,
                "min_bytes": 0,
                "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": 0,
                "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [fetch_partition]}],
                "forgotten_topics_data": [],
            }
            return _build_request(FETCH_KEY, _FETCH_SENT, cluster_id, body)
        case FetchSnapshotRequest():
            snapshot_partition = {
                "partition": METADATA_PARTITION,
                "current_leader_epoch": msg.current_leader_epoch,
                "snapshot_id": {"end_offset": msg.snapshot_id.end_offset, "epoch": msg.snapshot_id.epoch},
                "position": msg.position,
            }
            body = {
                "replica_id": msg.replica_id,
                "max_bytes": msg.max_bytes,
                "topics": [{"name": METADATA_TOPIC, "partitions": [snapshot_partition]}],
            }
            return _build_request(FETCH_SNAPSHOT_KEY, 1, cluster_id, body)
        case UpdateVoterRequest():
            body = {
                "current_leader_epoch": msg.current_leader_epoch,
                "voter_id": msg.voter_id,
                "voter_directory_id": msg.voter_directory_id,
                "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in msg.listeners],
                "k_raft_version_feature": {"min_supported_version": msg.min_kraft_version,
                                           "max_supported_version": msg.max_kraft_version},
            }
            return _build_request(UPDATE_RAFT_VOTER_KEY, 0, cluster_id, body)


def _topic_data(partition: Mapping[str, Any]) -> dict[str, Any]:
    return {"topic_name": METADATA_TOPIC, "partitions": [partition]}


def _build_request(api_key: int, version: int, cluster_id: str | None, body: dict[str, Any]) -> object:
    return build(request_class(api_key, version), {"cluster_id": cluster_id, **body})


def decode_request(obj: object, *, cluster_id: str | None) -> tuple[int, RaftRequest]:
    """(source node id, message) from a kio Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch or
    FetchSnapshot request of any version in REQUEST_VERSIONS.

    Raises CodecError for a request to refuse (its error_code is the answer), TypeError for an object
    that is not one of those requests (the driver routed it wrong).
    """
    req: Any = obj
    api_key, version = _api_key_and_version(obj, EntityType.request)
    _check_version(api_key, version)
    theirs = req.cluster_id
    if cluster_id is not None and theirs is not None and theirs != cluster_id:
        raise CodecError(ErrorCode.inconsistent_cluster_id, f"request for cluster {theirs!r}, this is {cluster_id!r}")
    if api_key == VOTE_KEY:
        p = _only_partition(req.topics, "topic_name", "partition_index")
        vote = VoteRequest(
            p.replica_id, p.replica_epoch, p.last_offset_epoch, p.last_offset, getattr(p, "pre_vote", False)
        )
        # Kafka: handleVoteRequest refuses these before it looks at its own state.
        if vote.last_offset < 0 or vote.last_offset_epoch < 0 or vote.last_offset_epoch >= vote.replica_epoch:
            raise CodecError(ErrorCode.invalid_request, f"vote for epoch {vote.replica_epoch} from {vote}")
        return _source(vote.replica_id), vote
    if api_key == BEGIN_QUORUM_EPOCH_KEY:
        p = _only_partition(req.topics, "topic_name", "partition_index")
        return _source(p.leader_id), BeginQuorumEpochRequest(p.leader_id, p.leader_epoch)
    if api_key == END_QUORUM_EPOCH_KEY:
        p = _only_partition(req.topics, "topic_name", "partition_index")
        if version >= 1:
            candidates = tuple(int(c.candidate_id) for c in p.preferred_candidates)
        else:
            candidates = tuple(int(c) for c in p.preferred_successors)
        return _source(p.leader_id), EndQuorumEpochRequest(p.leader_id, p.leader_epoch, candidates)
    if api_key == FETCH_KEY:
        return _decode_fetch_request(req, version)
    if api_key == FETCH_SNAPSHOT_KEY:
        return _decode_fetch_snapshot_request(req)
    raise TypeError(f"{type(obj).__name__} is not a Raft request")


def _decode_fetch_request(req: Any, version: int) -> tuple[int, FetchRequest]:
    if len(req.topics) != 1 or len(req.topics[0].partitions) != 1:
        raise CodecError(ErrorCode.invalid_request, "a Raft fetch names exactly one partition")
    topic = req.topics[0]
    p = topic.partitions[0]
    if topic.topic_id != METADATA_TOPIC_ID or p.partition != METADATA_PARTITION:
        raise CodecError(ErrorCode.invalid_request, f"fetch of topic id {topic.topic_id} partition {p.partition}")
    replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
    fetch = FetchRequest(
        int(replica_id),
        p.current_leader_epoch,
        p.fetch_offset,
        p.last_fetched_epoch,
        p.log_start_offset,
        ms(req.max_wait),
        getattr(p, "replica_directory_id", None) or _ZERO_UUID,
    )
    # Kafka: handleFetchRequest refuses these before it looks at its own state.
    if (
        fetch.max_wait_ms < 0
        or fetch.fetch_offset < 0
        or fetch.last_fetched_epoch < 0
        or fetch.last_fetched_epoch > fetch.current_leader_epoch
    ):
        raise CodecError(ErrorCode.invalid_request, f"fetch {fetch}")
    return _source(fetch.replica_id), fetch


def _decode_fetch_snapshot_request(req: Any) -> tuple[int, FetchSnapshotRequest]:
    if len(req.topics) != 1 or len(req.topics[0].partitions) != 1:
        raise CodecError(ErrorCode.invalid_request, "a FetchSnapshot names exactly one partition")
    topic = req.topics[0]
    p = topic.partitions[0]
    if topic.name != METADATA_TOPIC or p.partition != METADATA_PARTITION:
        # Kafka answers this one UNKNOWN_TOPIC_OR_PARTITION, unlike the other Raft APIs.
        raise CodecError(ErrorCode.unknown_topic_or_partition, f"snapshot of {topic.name}-{p.partition}")
    snapshot_id = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    request = FetchSnapshotRequest(int(req.replica_id), p.current_leader_epoch, snapshot_id, p.position, req.max_bytes)
    return _source(request.replica_id), request


def _only_partition(topics: Any, name_field: str, index_field: str) -> Any:
    """The one partition of a Vote/BeginQuorumEpoch/EndQuorumEpoch. Kafka: RaftUtil.hasValidTopicPartition."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise CodecError(ErrorCode.invalid_request, "a Raft request names exactly one partition")
    name = getattr(topics[0], name_field)
    index = getattr(topics[0].partitions[0], index_field)
    if name != METADATA_TOPIC or index != METADATA_PARTITION:
        raise CodecError(ErrorCode.invalid_request, f"request for {name}-{index}")
    return topics[0].partitions[0]


def _source(replica_id: int) -> int:
    # The source keys the leader's per-replica state and where the answer goes: a consumer's -1 is
    # not a replica.
    if replica_id < 0:
        raise CodecError(ErrorCode.invalid_request, f"replica id {replica_id}")
    return int(replica_id)


def _api_key_and_version(obj: object, kind: EntityType) -> tuple[int, int]:
    cls: Any = type(obj)
    if getattr(cls, "__type__", None) is not kind or int(getattr(cls, "__api_key__", -1)) not in REQUEST_VERSIONS:
        raise TypeError(f"{cls.__name__} is not a Raft {kind.name}")
    return int(cls.__api_key__), int(cls.__version__)


def _check_version(api_key: int, version: int) -> None:
    low, high = REQUEST_VERSIONS[api_key]
    if not low <= version <= high:
        raise CodecError(ErrorCode.unsupported_version, f"api key {api_key} v{version}; we read v{low}-v{high}")


# -- responses -----------------------------------------------------------------------------------


def encode_response(msg: RaftResponse, request_api_version: int, *, nodes: Sequence[NodeEndpoint] = ()) -> object:
    """The kio response answering a request of `request_api_version`, `msg` in its one partition.

    `nodes` fill node_endpoints where the version has them (Vote, BeginQuorumEpoch, EndQuorumEpoch and
    FetchSnapshot v1+, Fetch v16+): Kafka sends the leader's there.
    """
    node_endpoints = [{"node_id": n, "host": host, "port": port} for n, host, port in nodes]
    partition: dict[str, Any]
    body: dict[str, Any]
    match msg:
        case VoteResponse():
            partition = _partition_response(msg.error_code, msg.leader_id, msg.leader_epoch)
            partition["vote_granted"] = msg.vote_granted
            body = {"topics": [_topic_data(partition)]}
            api_key = VOTE_KEY
        case BeginQuorumEpochResponse():
            partition = _partition_response(msg.error_code, msg.leader_id, msg.leader_epoch)
            body, api_key = {"topics": [_topic_data(partition)]}, BEGIN_QUORUM_EPOCH_KEY
        case EndQuorumEpochResponse():
            partition = _partition_response(msg.error_code, msg.leader_id, msg.leader_epoch)
            body, api_key = {"topics": [_topic_data(partition)]}, END_QUORUM_EPOCH_KEY
        case FetchResponse():
            body, api_key = {"responses": [_fetchable_topic(msg)]}, FETCH_KEY
        case FetchSnapshotResponse():
            snapshot_partition = {
                "index": METADATA_PARTITION,
                "error_code": msg.error_code,
                "snapshot_id": {"end_offset": msg.snapshot_id.end_offset, "epoch": msg.snapshot_id.epoch},
                "current_leader": {"leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch},
                "size": msg.size,
                "position": msg.position,
                "unaligned_records": msg.unaligned_records,
            }
            body = {"topics": [{"name": METADATA_TOPIC, "partitions": [snapshot_partition]}]}
            api_key = FETCH_SNAPSHOT_KEY
    _check_version(api_key, request_api_version)
    body.update(error_code=ErrorCode.none, node_endpoints=node_endpoints)
    return build(response_class(api_key, request_api_version), body)


def _partition_response(error_code: ErrorCode, leader_id: int, leader_epoch: int) -> dict[str, Any]:
    return {
        "partition_index": METADATA_PARTITION,
        "error_code": error_code,
        "leader_id": leader_id,
        "leader_epoch": leader_epoch,
    }


def _fetchable_topic(msg: FetchResponse) -> dict[str, Any]:
    partition: dict[str, Any] = {
        "partition_index": METADATA_PARTITION,
        "error_code": msg.error_code,
        "high_watermark": msg.high_watermark,
        "last_stable_offset": -1,
        "log_start_offset": msg.log_start_offset,
        "current_leader": {"leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch},
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": encode_entries(msg.records),
    }
    if msg.diverging_epoch is not None:
        partition["diverging_epoch"] = {
            "epoch": msg.diverging_epoch.epoch,
            "end_offset": msg.diverging_epoch.end_offset,
        }
    if msg.snapshot_id is not None:
        partition["snapshot_id"] = {"end_offset": msg.snapshot_id.end_offset, "epoch": msg.snapshot_id.epoch}
    return {"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}


def error_response(api_key: int, api_version: int, error_code: ErrorCode) -> object:
    """A response with a top-level error and no partitions: the answer to a request decode_request
    refused (Kafka: RaftUtil.errorResponse)."""
    _check_version(api_key, api_version)
    return build(response_class(api_key, api_version), {"error_code": error_code})


def decode_response(obj: object) -> RaftResponse | UpdateVoterResponse:
    """The message in a kio Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot or UpdateRaftVoter response.

    A top-level error (Kafka: handleTopLevelError) comes back as the message's error_code, with no
    leader (NO_LEADER, NO_EPOCH). CodecError for a response that is not about exactly our partition
    (Kafka ignores those) or whose records are corrupt.
    """
    resp: Any = obj
    cls: Any = type(obj)
    if getattr(cls, "__type__", None) is EntityType.response and cls.__api_key__ == UPDATE_RAFT_VOTER_KEY:
        leader = resp.current_leader
        return UpdateVoterResponse(ErrorCode(resp.error_code), leader.leader_id, leader.leader_epoch)
    api_key, version = _api_key_and_version(obj, EntityType.response)
    _check_version(api_key, version)
    top_error = ErrorCode(resp.error_code)
    if api_key == VOTE_KEY:
        if top_error != ErrorCode.none:
            return VoteResponse(top_error, NO_LEADER, NO_EPOCH, False)
        p = _only_response_partition(resp.topics, "topic_name", "partition_index")
        return VoteResponse(ErrorCode(p.error_code), p.leader_id, p.leader_epoch, p.vote_granted)
    if api_key == BEGIN_QUORUM_EPOCH_KEY:
        if top_error != ErrorCode.none:
            return BeginQuorumEpochResponse(top_error, NO_LEADER, NO_EPOCH)
        p = _only_response_partition(resp.topics, "topic_name", "partition_index")
        return BeginQuorumEpochResponse(ErrorCode(p.error_code), p.leader_id, p.leader_epoch)
    if api_key == END_QUORUM_EPOCH_KEY:
        if top_error != ErrorCode.none:
            return EndQuorumEpochResponse(top_error, NO_LEADER, NO_EPOCH)
        p = _only_response_partition(resp.topics, "topic_name", "partition_index")
        return EndQuorumEpochResponse(ErrorCode(p.error_code), p.leader_id, p.leader_epoch)
    if api_key == FETCH_KEY:
        if top_error != ErrorCode.none:
            return FetchResponse(top_error, NO_LEADER, NO_EPOCH, -1, -1)
        return _decode_fetch_response(resp)
    if api_key == FETCH_SNAPSHOT_KEY:
        if top_error != ErrorCode.none:
            return FetchSnapshotResponse(top_error, NO_LEADER, NO_EPOCH, SnapshotId(-1, NO_EPOCH), -1, -1, b"")
        p = _only_response_partition(resp.topics, "name", "index")
        return FetchSnapshotResponse(
            ErrorCode(p.error_code),
            p.current_leader.leader_id,
            p.current_leader.leader_epoch,
            SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            p.size,
            p.position,
            bytes(p.unaligned_records),
        )
    raise TypeError(f"{type(obj).__name__} is not a Raft response")


def _only_response_partition(topics: Any, name_field: str, index_field: str) -> Any:
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise CodecError(ErrorCode.unknown_topic_or_partition, "a Raft response holds exactly one partition")
    name = getattr(topics[0], name_field)
    index = getattr(topics[0].partitions[0], index_field)
    if name != METADATA_TOPIC or index != METADATA_PARTITION:
        raise CodecError(ErrorCode.unknown_topic_or_partition, f"response for {name}-{index}")
    return topics[0].partitions[0]


def _decode_fetch_response(resp: Any) -> FetchResponse:
    if len(resp.responses) != 1 or len(resp.responses[0].partitions) != 1:
        raise CodecError(ErrorCode.unknown_topic_or_partition, "a Raft fetch response holds exactly one partition")
    topic = resp.responses[0]
    p = topic.partitions[0]
    if topic.topic_id != METADATA_TOPIC_ID or p.partition_index != METADATA_PARTITION:
        raise CodecError(
            ErrorCode.unknown_topic_or_partition, f"fetch response for {topic.topic_id}-{p.partition_index}"
        )
    # Kafka (handleFetchResponse): a diverging epoch counts when its epoch is set, a snapshot id when
    # both halves are.
    diverging = None
    if p.diverging_epoch.epoch >= 0:
        diverging = EpochEndOffset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
    snapshot_id = None
    if p.snapshot_id.epoch >= 0 or p.snapshot_id.end_offset >= 0:
        if p.snapshot_id.epoch < 0 or p.snapshot_id.end_offset < 0:
            raise CodecError(ErrorCode.invalid_request, f"snapshot id {p.snapshot_id}")
        snapshot_id = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    return FetchResponse(
        ErrorCode(p.error_code),
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
        p.high_watermark,
        p.log_start_offset,
        tuple(decode_entries(p.records or b"")),
        diverging,
        snapshot_id,
    )


# -- DescribeQuorum ------------------------------------------------------------------------------


def describe_quorum_response(
    resp: DescribeQuorumResponse, version: int, *, nodes: Sequence[NodeEndpoint] = ()
) -> object:
    """DescribeQuorum v0-v2 for `resp` (RaftCore.describe_quorum), as kafka-metadata-quorum.sh reads it.

    v1 adds the replicas' last_fetch_timestamp and last_caught_up_timestamp: the tool shows them as
    wall-clock epoch milliseconds ("ms ago" with --human-readable, which refuses a time in the future),
    so the driver passes wall-clock timestamps. v2 adds error messages, replica_directory_id (KIP-853: what
    the voter set or the replica's fetches say; zero: unknown) and `nodes`, one CONTROLLER listener each,
    which --status prints as endpoints.
    """
    _check_version(DESCRIBE_QUORUM_KEY, version)
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": resp.error_code,
        "error_message": None,
        "leader_id": resp.leader_id,
        "leader_epoch": resp.leader_epoch,
        "high_watermark": resp.high_watermark,
        "current_voters": [_replica_state(r) for r in resp.current_voters],
        "observers": [_replica_state(r) for r in resp.observers],
    }
    body = {
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": [_topic_data(partition)],
        "nodes": [
            {"node_id": n, "listeners": [{"name": CONTROLLER_LISTENER_NAME, "host": host, "port": port}]}
            for n, host, port in nodes
        ],
    }
    return build(response_class(DESCRIBE_QUORUM_KEY, version), body)


def _replica_state(r: ReplicaDescription) -> dict[str, Any]:
    return {
        "replica_id": r.replica_id,
        "replica_directory_id": r.replica_directory_id,
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp,
        "last_caught_up_timestamp": r.last_caught_up_timestamp,
    }
