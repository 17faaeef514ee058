"""AddRaftVoter (key 80), v0-v1, RemoveRaftVoter (key 81), v0, and UpdateRaftVoter (key 82), v0 (KIP-853):
change the metadata quorum's voters.

kafka-metadata-quorum.sh add-controller / remove-controller send them. Both listeners take them, as in Kafka
4.4: the controller listener's leader handles them (the rules are raft.reconfig's, the I/O
broker.metadata.voter_changes'), and a broker listener forwards them to the active controller (KIP-590, in an
Envelope when the authorizer is on). They need ALTER on the cluster (Kafka's ControllerApis). A request for
another cluster is INCONSISTENT_CLUSTER_ID; a node that is not the quorum's leader answers
NOT_LEADER_OR_FOLLOWER. AddRaftVoter v1 adds ack_when_committed (KIP-1186): false answers once the
VotersRecord is appended, before it commits. UpdateRaftVoter is what a voter sends the leader to update its own
listeners and kraft.version range (and directory id, where the set has none; Samsa's voters send it, see
raft.voter_update); only the controller listener takes it, it carries the sender's epoch, has no error
message, and is answered once the VotersRecord is appended, with the leader it knows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.metadata.voter_changes import Answer, add_voter, remove_voter, update_voter
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.raft.voter_set import VoterEndpoint

if TYPE_CHECKING:
    from kio.schema.add_raft_voter import v0 as add0
    from kio.schema.add_raft_voter import v1 as add1
    from kio.schema.remove_raft_voter.v0 import RemoveRaftVoterRequest, RemoveRaftVoterResponse
    from kio.schema.update_raft_voter.v0 import UpdateRaftVoterRequest, UpdateRaftVoterResponse

    AddRaftVoterRequest = add0.AddRaftVoterRequest | add1.AddRaftVoterRequest
    AddRaftVoterResponse = add0.AddRaftVoterResponse | add1.AddRaftVoterResponse

ADD_RAFT_VOTER = ApiSpec(key=80, min_version=0, max_version=1)
REMOVE_RAFT_VOTER = ApiSpec(key=81, min_version=0, max_version=0)
UPDATE_RAFT_VOTER = ApiSpec(key=82, min_version=0, max_version=0)


def _refusal(ctx: RequestContext, cluster_id: str | None) -> Answer | None:
    denied = cluster_error(ctx, AclOperation.ALTER)
    if denied:
        return denied, None
    ours = ctx.broker.cluster_id
    if cluster_id is not None and cluster_id != ours:
        return ErrorCode.inconsistent_cluster_id, f'The given id "{cluster_id}" doesn\'t match the cluster id "{ours}"'
    return None


async def handle_add_raft_voter(request: AddRaftVoterRequest, ctx: RequestContext) -> AddRaftVoterResponse:
    cls: type[AddRaftVoterResponse] = response_class(80, ctx.version)
    answer = _refusal(ctx, request.cluster_id)
    if answer is None:
        endpoints = tuple(VoterEndpoint(str(e.name), str(e.host), int(e.port)) for e in request.listeners)
        answer = await add_voter(ctx.broker.quorum, int(request.voter_id), request.voter_directory_id, endpoints,
                                 int(request.timeout.total_seconds() * 1000),
                                 ack_when_committed=bool(getattr(request, "ack_when_committed", True)),
                                 security=ctx.broker.controller_security)
    return build(cls, {"throttle_time": 0, "error_code": answer[0], "error_message": answer[1]})


async def handle_remove_raft_voter(request: RemoveRaftVoterRequest, ctx: RequestContext) -> RemoveRaftVoterResponse:
    cls: type[RemoveRaftVoterResponse] = response_class(81, ctx.version)
    answer = _refusal(ctx, request.cluster_id)
    if answer is None:
        answer = await remove_voter(ctx.broker.quorum, int(request.voter_id), request.voter_directory_id)
    return build(cls, {"throttle_time": 0, "error_code": answer[0], "error_message": answer[1]})


def handle_update_raft_voter(request: UpdateRaftVoterRequest, ctx: RequestContext) -> UpdateRaftVoterResponse:
    """Kafka: ControllerApis.handleUpdateRaftVoter (CLUSTER_ACTION, a node's own request) and
    KafkaRaftClient.handleUpdateVoterRequest."""
    cls: type[UpdateRaftVoterResponse] = response_class(82, ctx.version)
    quorum = ctx.broker.quorum
    error = cluster_error(ctx, AclOperation.CLUSTER_ACTION)
    if not error and request.cluster_id is not None and request.cluster_id != ctx.broker.cluster_id:
        error = ErrorCode.inconsistent_cluster_id
    if not error:
        epoch = int(request.current_leader_epoch)
        if epoch < quorum.epoch:
            error = ErrorCode.fenced_leader_epoch
        elif epoch > quorum.epoch:
            error = ErrorCode.unknown_leader_epoch
    if not error:
        endpoints = tuple(VoterEndpoint(str(e.name), str(e.host), int(e.port)) for e in request.listeners)
        versions = (int(request.k_raft_version_feature.min_supported_version),
                    int(request.k_raft_version_feature.max_supported_version))
        error = update_voter(quorum, int(request.voter_id), request.voter_directory_id, endpoints, versions)
    leader = quorum.core.leader_id
    known = quorum.endpoint(leader) if leader is not None else None
    return build(cls, {"throttle_time": 0, "error_code": error, "current_leader": {
        "leader_id": -1 if leader is None else leader, "leader_epoch": quorum.epoch,
        "host": known.host if known is not None else "", "port": known.port if known is not None else -1}})
