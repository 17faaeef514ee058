"""raft.codec: Raft messages <-> kio classes <-> wire bytes (through kproto), and entries <-> record batches."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.broker.wire import build
from samsa.kproto import messages as kproto
from samsa.kproto.batch import BATCH_HEADER_BYTES, iter_batches
from samsa.kproto.records import ControlType, decode_batches, decode_control_record, encode_batch
from samsa.raft.codec import (
    BEGIN_QUORUM_EPOCH_KEY,
    END_QUORUM_EPOCH_KEY,
    FETCH_KEY,
    FETCH_MAX_BYTES,
    FETCH_SNAPSHOT_KEY,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    REQUEST_VERSIONS,
    VOTE_KEY,
    CodecError,
    decode_entries,
    decode_request,
    decode_response,
    describe_quorum_response,
    encode_entries,
    encode_request,
    encode_response,
    error_response,
)
from samsa.raft.log import EntryKind, LogEntry, SnapshotId
from samsa.raft.messages import (
    NO_EPOCH,
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
LC = EntryKind.LEADER_CHANGE


def _over_the_wire_request(request: object) -> Any:
    """Serialise a kio request to a frame with kproto and parse it back, as the receiving broker does."""
    frame = kproto.encode_request(request, correlation_id=41, client_id="raft-1")
    payload = frame[4:]
    return kproto.decode_request(kproto.parse_request_header(payload), payload)


def _over_the_wire_response(response: object) -> Any:
    cls: Any = type(response)
    api_key, version = int(cls.__api_key__), int(cls.__version__)
    header = kproto.RequestHeader(api_key, version, 41, "raft-1", 0)
    correlation_id, decoded = kproto.decode_response(api_key, version, kproto.encode_response(header, response)[4:])
    assert correlation_id == 41
    return decoded


def _version(obj: object) -> int:
    return int(type(obj).__version__)  # type: ignore[attr-defined]


def _entries(*spec: tuple[int, EntryKind], start: int = 0) -> list[LogEntry]:
    return [LogEntry(start + i, epoch, _payload(start + i, kind), kind) for i, (epoch, kind) in enumerate(spec)]


def _payload(offset: int, kind: EntryKind) -> bytes:
    # the core's leader change payload names the leader; data is opaque
    return f"leader={offset % 7}".encode() if kind == EntryKind.LEADER_CHANGE else f"entry {offset}".encode()


D = EntryKind.DATA
SOME_ENTRIES = tuple(_entries((4, LC), (4, D), (4, D), (5, LC), (5, D), start=10))

# -- requests ------------------------------------------------------------------------------------

REQUESTS: list[tuple[RaftRequest, int, int]] = [  # message, its source, the version sent
    (VoteRequest(replica_id=1, replica_epoch=5, last_offset_epoch=4, last_offset=10, pre_vote=True), 1, 2),
    (VoteRequest(replica_id=3, replica_epoch=1, last_offset_epoch=0, last_offset=0, pre_vote=False), 3, 2),
    (BeginQuorumEpochRequest(leader_id=2, leader_epoch=3), 2, 1),
    (EndQuorumEpochRequest(leader_id=2, leader_epoch=3, preferred_candidates=(3, 1)), 2, 1),
    (EndQuorumEpochRequest(leader_id=2, leader_epoch=3, preferred_candidates=()), 2, 1),
    (
        FetchRequest(
            3, current_leader_epoch=5, fetch_offset=10, last_fetched_epoch=4, log_start_offset=0, max_wait_ms=500
        ),
        3,
        17,
    ),
    (
        FetchRequest(
            4, current_leader_epoch=7, fetch_offset=0, last_fetched_epoch=0, log_start_offset=0, max_wait_ms=0
        ),
        4,
        17,
    ),
    (
        FetchSnapshotRequest(3, current_leader_epoch=5, snapshot_id=SnapshotId(10, 4), position=100, max_bytes=1 << 20),
        3,
        1,
    ),
]


@pytest.mark.parametrize(("msg", "source", "version"), REQUESTS)
def test_request_round_trips_through_the_wire(msg: RaftRequest, source: int, version: int) -> None:
    request = encode_request(msg, cluster_id=CLUSTER, destination_id=9, leader_endpoint=("c1.local", 9093))
    assert _version(request) == version
    assert decode_request(_over_the_wire_request(request), cluster_id=CLUSTER) == (source, msg)


def test_fetch_request_is_a_replica_fetch_of_the_metadata_topic_id() -> None:
    msg = FetchRequest(
        3, current_leader_epoch=5, fetch_offset=10, last_fetched_epoch=4, log_start_offset=2, max_wait_ms=500
    )
    request = _over_the_wire_request(encode_request(msg, cluster_id=CLUSTER))
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (3, -1)
    assert (request.min_bytes, request.max_bytes, request.isolation_level) == (0, FETCH_MAX_BYTES, 0)
    assert request.cluster_id == CLUSTER
    (topic,) = request.topics
    assert topic.topic_id == METADATA_TOPIC_ID
    (partition,) = topic.partitions
    assert (partition.partition, partition.partition_max_bytes, partition.log_start_offset) == (0, FETCH_MAX_BYTES, 2)


def test_metadata_topic_id_is_kafkas() -> None:
    assert base64.urlsafe_b64encode(METADATA_TOPIC_ID.bytes).rstrip(b"=") == b"AAAAAAAAAAAAAAAAAAAAAQ"


def test_begin_quorum_epoch_names_the_voter_and_the_leader_endpoint() -> None:
    request = _over_the_wire_request(
        encode_request(BeginQuorumEpochRequest(2, 3), cluster_id=None, destination_id=7, leader_endpoint=("h", 9093))
    )
    assert request.voter_id == 7
    assert [(e.name, e.host, e.port) for e in request.leader_endpoints] == [("CONTROLLER", "h", 9093)]
    assert request.cluster_id is None


def _build_request(api_key: int, version: int, values: dict[str, Any]) -> Any:
    return build(kproto.request_class(api_key, version), values)


def _vote_v(version: int, topic: str = METADATA_TOPIC, partition: int = 0, **fields: Any) -> Any:
    p = {"partition_index": partition, "replica_epoch": 5, "replica_id": 1, "last_offset_epoch": 4, "last_offset": 10}
    p.update(fields)
    return _build_request(
        VOTE_KEY, version, {"cluster_id": CLUSTER, "topics": [{"topic_name": topic, "partitions": [p]}]}
    )


def _fetch_v(version: int, replica_id: int = 3, topic_id: Any = METADATA_TOPIC_ID, **fields: Any) -> Any:
    p = {"partition": 0, "current_leader_epoch": 5, "fetch_offset": 10, "last_fetched_epoch": 4, "log_start_offset": 1}
    p.update(fields)
    values: dict[str, Any] = {"max_wait": 250, "topics": [{"topic_id": topic_id, "partitions": [p]}]}
    if version >= 15:
        values["replica_state"] = {"replica_id": replica_id}
    else:
        values["replica_id"] = replica_id
    return _build_request(FETCH_KEY, version, values)


def _fetch_snapshot_v(version: int, topic: str = METADATA_TOPIC, partition: int = 0) -> Any:
    p = {
        "partition": partition,
        "current_leader_epoch": 5,
        "snapshot_id": {"end_offset": 10, "epoch": 4},
        "position": 3,
    }
    values = {"replica_id": 3, "max_bytes": 4096, "topics": [{"name": topic, "partitions": [p]}]}
    return _build_request(FETCH_SNAPSHOT_KEY, version, values)


@pytest.mark.parametrize("version", [0, 1])
def test_vote_before_v2_is_never_a_pre_vote(version: int) -> None:
    source, msg = decode_request(_over_the_wire_request(_vote_v(version)), cluster_id=CLUSTER)
    assert (source, msg) == (1, VoteRequest(1, 5, 4, 10, pre_vote=False))


def test_begin_quorum_epoch_v0() -> None:
    request = _build_request(
        BEGIN_QUORUM_EPOCH_KEY,
        0,
        {
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [{"partition_index": 0, "leader_id": 2, "leader_epoch": 6}],
                }
            ]
        },
    )
    assert decode_request(_over_the_wire_request(request), cluster_id=CLUSTER) == (2, BeginQuorumEpochRequest(2, 6))


def test_end_quorum_epoch_v0_reads_preferred_successors() -> None:
    partition = {"partition_index": 0, "leader_id": 2, "leader_epoch": 6, "preferred_successors": [3, 1]}
    request = _build_request(
        END_QUORUM_EPOCH_KEY, 0, {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}
    )
    assert decode_request(_over_the_wire_request(request), cluster_id=CLUSTER) == (
        2,
        EndQuorumEpochRequest(2, 6, (3, 1)),
    )


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17, 18])
def test_fetch_of_every_topic_id_version(version: int) -> None:
    """v13-v14 carry the replica id at the top, v15+ in replica_state."""
    source, msg = decode_request(_over_the_wire_request(_fetch_v(version, replica_id=6)), cluster_id=CLUSTER)
    assert (source, msg) == (6, FetchRequest(6, 5, 10, 4, 1, max_wait_ms=250))


def test_fetch_snapshot_v0() -> None:
    source, msg = decode_request(_over_the_wire_request(_fetch_snapshot_v(0)), cluster_id=CLUSTER)
    assert (source, msg) == (3, FetchSnapshotRequest(3, 5, SnapshotId(10, 4), 3, 4096))


# -- refused requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(("ours", "theirs"), [(CLUSTER, CLUSTER), (CLUSTER, None), (None, "other")])
def test_cluster_id_is_checked_only_when_both_sides_have_one(ours: str | None, theirs: str | None) -> None:
    request = encode_request(BeginQuorumEpochRequest(2, 3), cluster_id=theirs)
    assert decode_request(request, cluster_id=ours)[1] == BeginQuorumEpochRequest(2, 3)


@pytest.mark.parametrize("msg", [m for m, _, _ in REQUESTS])
def test_another_cluster_is_refused(msg: RaftRequest) -> None:
    request = _over_the_wire_request(encode_request(msg, cluster_id="other-cluster"))
    with pytest.raises(CodecError) as e:
        decode_request(request, cluster_id=CLUSTER)
    assert e.value.error_code == ErrorCode.inconsistent_cluster_id


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (_vote_v(2, topic="orders"), ErrorCode.invalid_request),
        (_vote_v(2, partition=1), ErrorCode.invalid_request),
        (_fetch_v(17, topic_id=METADATA_TOPIC_ID.__class__(int=2)), ErrorCode.invalid_request),
        (_fetch_v(17, partition=1), ErrorCode.invalid_request),
        (_fetch_snapshot_v(1, topic="orders"), ErrorCode.unknown_topic_or_partition),
        (_fetch_snapshot_v(1, partition=3), ErrorCode.unknown_topic_or_partition),
    ],
)
def test_another_partition_is_refused_as_kafka_does(request_: Any, error: ErrorCode) -> None:
    with pytest.raises(CodecError) as e:
        decode_request(_over_the_wire_request(request_), cluster_id=CLUSTER)
    assert e.value.error_code == error


def test_two_partitions_are_an_invalid_request() -> None:
    p = {"partition_index": 0, "replica_epoch": 5, "replica_id": 1, "last_offset_epoch": 4, "last_offset": 10}
    request = _build_request(VOTE_KEY, 2, {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [p, p]}]})
    with pytest.raises(CodecError) as e:
        decode_request(request, cluster_id=CLUSTER)
    assert e.value.error_code == ErrorCode.invalid_request
    empty = _build_request(FETCH_KEY, 17, {"max_wait": 0, "topics": []})
    with pytest.raises(CodecError) as e:
        decode_request(empty, cluster_id=CLUSTER)
    assert e.value.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize(
    "request_",
    [
        _vote_v(2, last_offset=-1),
        _vote_v(2, last_offset_epoch=-1),
        _vote_v(2, last_offset_epoch=5),  # a candidate asking for the epoch its log already has
        _vote_v(2, replica_id=-1),
        _fetch_v(17, fetch_offset=-1),
        _fetch_v(17, last_fetched_epoch=-1),
        _fetch_v(17, last_fetched_epoch=6),  # from an epoch after the one it fetches in
        _fetch_v(17, replica_id=-1),  # a consumer, not a replica
        _fetch_v(14, replica_id=-1),
    ],
)
def test_fields_kafka_refuses_before_looking_at_its_state(request_: Any) -> None:
    with pytest.raises(CodecError) as e:
        decode_request(_over_the_wire_request(request_), cluster_id=CLUSTER)
    assert e.value.error_code == ErrorCode.invalid_request


def test_a_fetch_without_topic_ids_is_unsupported() -> None:
    request = _build_request(FETCH_KEY, 12, {"max_wait": 0, "replica_id": 3, "topics": []})
    with pytest.raises(CodecError) as e:
        decode_request(request, cluster_id=CLUSTER)
    assert e.value.error_code == ErrorCode.unsupported_version


def test_not_a_raft_request_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        decode_request(_build_request(3, 12, {"topics": None}), cluster_id=CLUSTER)  # Metadata
    with pytest.raises(TypeError):
        decode_request(encode_response(VoteResponse(ErrorCode.none, 1, 5, True), 2), cluster_id=CLUSTER)


@pytest.mark.parametrize(
    "api_key", [VOTE_KEY, BEGIN_QUORUM_EPOCH_KEY, END_QUORUM_EPOCH_KEY, FETCH_KEY, FETCH_SNAPSHOT_KEY]
)
def test_error_response_is_a_top_level_error_without_a_leader(api_key: int) -> None:
    low, high = REQUEST_VERSIONS[api_key]
    for version in range(low, high + 1):
        response = _over_the_wire_response(error_response(api_key, version, ErrorCode.inconsistent_cluster_id))
        assert response.error_code == ErrorCode.inconsistent_cluster_id
        msg = decode_response(response)
        assert (msg.error_code, msg.leader_id, msg.leader_epoch) == (
            ErrorCode.inconsistent_cluster_id,
            NO_LEADER,
            NO_EPOCH,
        )


# -- responses -----------------------------------------------------------------------------------

RESPONSES: list[RaftResponse] = [
    VoteResponse(ErrorCode.none, leader_id=-1, leader_epoch=5, vote_granted=True),
    VoteResponse(ErrorCode.fenced_leader_epoch, leader_id=2, leader_epoch=7, vote_granted=False),
    BeginQuorumEpochResponse(ErrorCode.none, leader_id=1, leader_epoch=5),
    EndQuorumEpochResponse(ErrorCode.inconsistent_voter_set, leader_id=-1, leader_epoch=5),
    FetchResponse(ErrorCode.none, 1, 5, high_watermark=12, log_start_offset=0, records=SOME_ENTRIES),
    FetchResponse(ErrorCode.none, 1, 5, high_watermark=12, log_start_offset=3),
    FetchResponse(ErrorCode.none, 1, 5, 12, 0, diverging_epoch=EpochEndOffset(epoch=0, end_offset=0)),
    FetchResponse(ErrorCode.none, 1, 5, 12, 0, diverging_epoch=EpochEndOffset(epoch=3, end_offset=9)),
    FetchResponse(ErrorCode.none, 1, 5, 12, 10, snapshot_id=SnapshotId(end_offset=10, epoch=3)),
    FetchResponse(ErrorCode.not_leader_or_follower, -1, 6, high_watermark=12, log_start_offset=0),
    FetchSnapshotResponse(
        ErrorCode.none, 1, 5, SnapshotId(10, 3), size=100, position=40, unaligned_records=b"\x00chunk"
    ),
    FetchSnapshotResponse(ErrorCode.snapshot_not_found, 1, 5, SnapshotId(10, 3), -1, -1, b""),
]
_RESPONSE_KEYS: dict[type, int] = {
    VoteResponse: VOTE_KEY,
    BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH_KEY,
    EndQuorumEpochResponse: END_QUORUM_EPOCH_KEY,
    FetchResponse: FETCH_KEY,
    FetchSnapshotResponse: FETCH_SNAPSHOT_KEY,
}


def _every_version(msgs: Sequence[RaftResponse]) -> list[tuple[RaftResponse, int]]:
    cases = []
    for msg in msgs:
        low, high = REQUEST_VERSIONS[_RESPONSE_KEYS[type(msg)]]
        cases += [(msg, v) for v in range(low, high + 1)]
    return cases


@pytest.mark.parametrize(("msg", "version"), _every_version(RESPONSES))
def test_response_round_trips_through_the_wire_at_every_version(msg: RaftResponse, version: int) -> None:
    response = encode_response(msg, version, nodes=[(1, "c1.local", 9093)])
    assert (type(response).__api_key__, _version(response)) == (_RESPONSE_KEYS[type(msg)], version)  # type: ignore[attr-defined]
    assert decode_response(_over_the_wire_response(response)) == msg


def test_fetch_response_fields() -> None:
    msg = FetchResponse(ErrorCode.none, 1, 5, 12, 0, diverging_epoch=EpochEndOffset(3, 9))
    (topic,) = _over_the_wire_response(encode_response(msg, 17)).responses
    (p,) = topic.partitions
    assert topic.topic_id == METADATA_TOPIC_ID
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (3, 9)
    assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == (-1, -1)  # Kafka's "no snapshot"
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 5)
    assert p.records == b""


def test_node_endpoints_where_the_version_has_them() -> None:
    msg = VoteResponse(ErrorCode.none, 1, 5, True)
    v2 = _over_the_wire_response(encode_response(msg, 2, nodes=[(1, "c1.local", 9093)]))
    assert [(n.node_id, n.host, n.port) for n in v2.node_endpoints] == [(1, "c1.local", 9093)]
    assert not hasattr(
        _over_the_wire_response(encode_response(msg, 0, nodes=[(1, "c1.local", 9093)])), "node_endpoints"
    )
    fetch = encode_response(FetchResponse(ErrorCode.none, 1, 5, 0, 0), 16, nodes=[(1, "c1.local", 9093)])
    assert [(n.node_id, n.port) for n in _over_the_wire_response(fetch).node_endpoints] == [(1, 9093)]


def test_response_to_an_unsupported_version_is_refused() -> None:
    with pytest.raises(CodecError) as e:
        encode_response(FetchResponse(ErrorCode.none, 1, 5, 0, 0), 12)
    assert e.value.error_code == ErrorCode.unsupported_version


def test_response_for_another_partition_is_dropped() -> None:
    partition = {"partition_index": 1, "error_code": 0, "leader_id": 1, "leader_epoch": 5, "vote_granted": True}
    response = build(
        kproto.response_class(VOTE_KEY, 2), {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}
    )
    with pytest.raises(CodecError):
        decode_response(response)
    fetch = build(kproto.response_class(FETCH_KEY, 17), {"responses": [{"topic_id": None, "partitions": [{}]}]})
    with pytest.raises(CodecError):
        decode_response(fetch)


def test_fetch_response_cut_inside_a_batch_keeps_the_whole_batches() -> None:
    cut = encode_entries(SOME_ENTRIES)[:-5]  # inside the last batch, the one of entry 14
    partition = {"partition_index": 0, "high_watermark": 12, "current_leader": {"leader_id": 1, "leader_epoch": 5}}
    partition["records"] = cut
    response = build(
        kproto.response_class(FETCH_KEY, 17),
        {"responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}]},
    )
    msg = decode_response(_over_the_wire_response(response))
    assert isinstance(msg, FetchResponse)
    assert msg.records == SOME_ENTRIES[:4]


# -- DescribeQuorum ------------------------------------------------------------------------------

QUORUM = DescribeQuorumResponse(
    ErrorCode.none,
    leader_id=1,
    leader_epoch=5,
    high_watermark=12,
    current_voters=(
        ReplicaDescription(1, 14, 1_700_000_000_000, 1_700_000_000_000),
        ReplicaDescription(2, 12, 1_699_999_999_000, -1),
    ),
    observers=(ReplicaDescription(9, 3, 1_699_999_000_000, 1_699_999_000_000),),
)
NODES = [(1, "c1.local", 9093), (2, "c2.local", 9094)]


def _quorum_partition(response: Any) -> Any:
    (topic,) = response.topics
    assert topic.topic_name == METADATA_TOPIC
    (partition,) = topic.partitions
    assert partition.partition_index == 0
    return partition


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_serialises_the_leaders_view(version: int) -> None:
    response = _over_the_wire_response(describe_quorum_response(QUORUM, version, nodes=NODES))
    assert response.error_code == ErrorCode.none
    p = _quorum_partition(response)
    assert (p.error_code, p.leader_id, p.leader_epoch, p.high_watermark) == (ErrorCode.none, 1, 5, 12)
    assert [(r.replica_id, r.log_end_offset) for r in p.current_voters] == [(1, 14), (2, 12)]
    assert [(r.replica_id, r.log_end_offset) for r in p.observers] == [(9, 3)]


def test_describe_quorum_v0_has_no_timestamps() -> None:
    p = _quorum_partition(_over_the_wire_response(describe_quorum_response(QUORUM, 0)))
    assert not hasattr(p.current_voters[0], "last_fetch_timestamp")


def test_describe_quorum_v1_adds_timestamps() -> None:
    p = _quorum_partition(_over_the_wire_response(describe_quorum_response(QUORUM, 1)))
    assert [(r.last_fetch_timestamp, r.last_caught_up_timestamp) for r in p.current_voters] == [
        (1_700_000_000_000, 1_700_000_000_000),
        (1_699_999_999_000, -1),
    ]
    assert not hasattr(_over_the_wire_response(describe_quorum_response(QUORUM, 1)), "nodes")


def test_describe_quorum_v2_adds_nodes_and_directory_ids() -> None:
    response = _over_the_wire_response(describe_quorum_response(QUORUM, 2, nodes=NODES))
    assert response.error_message is None
    p = _quorum_partition(response)
    assert p.error_message is None
    assert [r.replica_directory_id for r in p.current_voters + p.observers] == [None, None, None]  # kio: zero uuid
    assert [(r.last_fetch_timestamp, r.last_caught_up_timestamp) for r in p.observers] == [
        (1_699_999_000_000, 1_699_999_000_000)
    ]
    assert [(n.node_id, [(ls.name, ls.host, ls.port) for ls in n.listeners]) for n in response.nodes] == [
        (1, [("CONTROLLER", "c1.local", 9093)]),
        (2, [("CONTROLLER", "c2.local", 9094)]),
    ]


def test_describe_quorum_v3_does_not_exist() -> None:
    with pytest.raises(CodecError):
        describe_quorum_response(QUORUM, 3)


# -- entries <-> record batches ------------------------------------------------------------------


@st.composite
def _logs(draw: st.DrawFn) -> list[LogEntry]:
    offset = draw(st.integers(0, 2**40))
    epoch = draw(st.integers(0, 2**31 - 1000))
    entries = []
    for _ in range(draw(st.integers(0, 25))):
        epoch += draw(st.sampled_from([0, 0, 0, 1, 7]))
        kind = draw(st.sampled_from([EntryKind.DATA, EntryKind.DATA, EntryKind.LEADER_CHANGE]))
        payload = (f"leader={draw(st.integers(-1, 2**31 - 1))}".encode() if kind == EntryKind.LEADER_CHANGE
                   else draw(st.binary(max_size=64)))
        entries.append(LogEntry(offset, epoch, payload, kind))
        offset += 1
    return entries


@given(_logs(), st.integers(0, 2**41))
def test_entries_round_trip(entries: list[LogEntry], timestamp_ms: int) -> None:
    assert decode_entries(encode_entries(entries, timestamp_ms=timestamp_ms)) == entries


def test_data_entries_of_one_epoch_share_a_batch_and_each_leader_change_has_its_own() -> None:
    entries = _entries((1, LC), (1, D), (1, D), (1, D), (2, D), (2, LC), (2, LC), (2, D), start=5)
    data = encode_entries(entries, timestamp_ms=1234)
    shape = [
        (h.base_offset, h.records_count, h.partition_leader_epoch, h.is_control, h.is_transactional, h.producer_id)
        for _, h in iter_batches(data)
    ]
    assert shape == [
        (5, 1, 1, True, False, -1),
        (6, 3, 1, False, False, -1),
        (9, 1, 2, False, False, -1),
        (10, 1, 2, True, False, -1),
        (11, 1, 2, True, False, -1),
        (12, 1, 2, False, False, -1),
    ]
    batches = list(decode_batches(data, max_decompressed_bytes=1 << 20))
    control = batches[0][1][0]
    assert decode_control_record(control).type == ControlType.LEADER_CHANGE
    # Kafka's LeaderChangeMessage v0: version 0, leader id, no voters, no tagged fields
    assert control.value == (0).to_bytes(2, "big") + (5 % 7).to_bytes(4, "big") + b"\x01\x01\x00"
    data_records = batches[1][1]
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in data_records] == [
        (6, None, b"entry 6", 1234),
        (7, None, b"entry 7", 1234),
        (8, None, b"entry 8", 1234),
    ]


def test_no_entries_are_no_bytes() -> None:
    assert encode_entries([]) == b""
    assert decode_entries(b"") == []


def test_a_truncated_last_batch_is_ignored() -> None:
    head = _entries((4, LC), (4, D), (4, D), start=10)
    tail = _entries((5, D), (5, D), start=13)
    first = encode_entries(head)
    last = encode_entries(tail)
    for cut in [1, 11, 12, BATCH_HEADER_BYTES - 1, BATCH_HEADER_BYTES, len(last) - 1]:
        assert decode_entries(first + last[:cut]) == head, cut
    assert decode_entries(first + last) == head + tail


def test_a_corrupt_complete_batch_is_refused() -> None:
    data = bytearray(encode_entries(_entries((4, D), (4, D), (5, D), start=10)))
    data[-1] ^= 0xFF  # inside the last batch's records, covered by its CRC
    with pytest.raises(CodecError) as e:
        decode_entries(bytes(data))
    assert e.value.error_code == ErrorCode.corrupt_message


def test_entries_that_do_not_follow_each_other_are_refused() -> None:
    gap = encode_entries(_entries((4, D), start=10)) + encode_entries(_entries((4, D), start=12))
    backwards = encode_entries(_entries((5, D), start=10)) + encode_entries(_entries((4, D), start=11))
    for data in (gap, backwards):
        with pytest.raises(CodecError) as e:
            decode_entries(data)
        assert e.value.error_code == ErrorCode.corrupt_message


def test_control_records_other_than_leader_change_are_refused() -> None:
    voters = encode_batch([(struct.pack(">hh", 0, ControlType.KRAFT_VOTERS), b"", ())], timestamp_ms=0, is_control=True)
    with pytest.raises(CodecError) as e:
        decode_entries(voters)
    assert e.value.error_code == ErrorCode.corrupt_message
