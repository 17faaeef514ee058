"""AddRaftVoter and RemoveRaftVoter on the metadata quorum's leader (Kafka: KafkaRaftClient's
handleAddVoterRequest / handleRemoveVoterRequest and the ApiVersions round trip of AddVoterHandler).

The rules live in the sans-IO core (raft.reconfig); this module does the I/O they need: it asks the new
voter's controller listener for its ApiVersions (its supported kraft.version range), and waits for the
VotersRecord to commit (AddRaftVoter v1's ack_when_committed=false answers once it is appended, KIP-1186).
Answers are (error code, error message), as the handlers put them on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from samsa.broker.metadata.quorum import MetadataQuorum, NotControllerError
from samsa.broker.metadata.quorum_types import now_ms
from samsa.broker.node_client import ClientSecurity, NodeClient
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class
from samsa.kproto.wire import build
from samsa.raft import reconfig
from samsa.raft.codec import CONTROLLER_LISTENER_NAME
from samsa.raft.events import NotLeader
from samsa.raft.reconfig import VoterChangeAppended, VoterChangeRefused
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterEndpoint, VoterNode

__all__ = ["Answer", "add_voter", "format_standalone", "remove_voter", "update_voter", "upgrade_kraft_version"]

logger = logging.getLogger(__name__)

Answer = tuple[ErrorCode, str | None]
_API_VERSIONS_VERSION = 4  # Kafka sends its newest; before v4 a range from 0 (kraft.version) is left out


async def add_voter(quorum: MetadataQuorum, voter_id: int, directory_id: uuid.UUID | None,
                    endpoints: Sequence[VoterEndpoint], timeout_ms: int, *, ack_when_committed: bool = True,
                    security: ClientSecurity | None = None) -> Answer:
    if voter_id < 0 or directory_id is None or directory_id == ZERO_DIRECTORY_ID:
        return ErrorCode.invalid_request, "Add voter request didn't include a valid voter"
    own = next((e for e in endpoints if e.name == CONTROLLER_LISTENER_NAME), None)
    if own is None:
        shown = "Endpoints(endpoints={" + ", ".join(f"ListenerName({e.name})=/{e.host}:{e.port}"
                                                    for e in endpoints) + "})"
        return (ErrorCode.invalid_request, f"Add voter request didn't include the endpoint ({shown}) for the "
                                           f"default listener ListenerName({CONTROLLER_LISTENER_NAME})")
    core = quorum.core
    timeout_ms = max(1, min(timeout_ms, 5 * 60_000)) if timeout_ms > 0 else core.config.request_timeout_ms
    refused, actions = core.change_voters(partial(reconfig.begin_add_voter, voter_id=voter_id,
                                                  directory_id=directory_id, timeout_ms=timeout_ms), now_ms())
    quorum.execute(actions)  # (none of its own; whatever the end of a core call asks, as after any step)
    if isinstance(refused, NotLeader):
        return ErrorCode.not_leader_or_follower, None
    if isinstance(refused, VoterChangeRefused):
        return refused.error_code, refused.message
    try:
        api_error, kraft_versions = await _kraft_versions(own, core.config.request_timeout_ms / 1000, security)
    except BaseException:
        # (cancelled, or an answer that does not decode): the pending add must not block the next change
        quorum.execute(core.change_voters(partial(reconfig.abort_voter_change, voter_id=voter_id), now_ms())[1])
        raise
    voter = VoterNode(voter_id, directory_id, tuple(endpoints))
    result, actions = core.change_voters(partial(reconfig.complete_add_voter, voter=voter,
                                                 api_versions_error=api_error, kraft_versions=kraft_versions),
                                         now_ms())
    return await _finish(quorum, result, actions, timeout_ms, ack_when_committed)


async def remove_voter(quorum: MetadataQuorum, voter_id: int, directory_id: uuid.UUID | None) -> Answer:
    if voter_id < 0 or directory_id is None or directory_id == ZERO_DIRECTORY_ID:
        return ErrorCode.invalid_request, "Remove voter request didn't include a valid voter"
    core = quorum.core
    result, actions = core.change_voters(partial(reconfig.remove_voter, voter_id=voter_id,
                                                 directory_id=directory_id), now_ms())
    # Kafka's RemoveVoterHandlerState expires after controller.quorum.request.timeout.ms (2 s by default).
    return await _finish(quorum, result, actions, max(core.config.request_timeout_ms, 2000), True)


def update_voter(quorum: MetadataQuorum, voter_id: int, directory_id: uuid.UUID | None,
                 endpoints: Sequence[VoterEndpoint], kraft_versions: tuple[int, int]) -> ErrorCode:
    """Kafka: KafkaRaftClient.handleUpdateVoterRequest (after the epoch check) -- answered at the append."""
    if voter_id < 0 or directory_id is None or directory_id == ZERO_DIRECTORY_ID:
        return ErrorCode.invalid_request
    if not any(e.name == CONTROLLER_LISTENER_NAME for e in endpoints):
        return ErrorCode.invalid_request
    low, high = kraft_versions
    if low < 0 or high < 0 or high < low:
        return ErrorCode.invalid_request
    voter = VoterNode(voter_id, directory_id, tuple(endpoints), low, high)
    result, actions = quorum.core.change_voters(partial(reconfig.update_voter, voter=voter), now_ms())
    quorum.execute(actions)
    if isinstance(result, VoterChangeAppended):
        logger.info("UpdateRaftVoter: voter %s with listeners %s appended at offset %d", voter.key_text(),
                    [f"{e.name}://{e.host}:{e.port}" for e in endpoints], result.offset)
    if isinstance(result, NotLeader):
        return ErrorCode.not_leader_or_follower
    return result.error_code if isinstance(result, VoterChangeRefused) else ErrorCode.none


def format_standalone(quorum: MetadataQuorum) -> None:
    """A node that is its own one-voter quorum (no controller.quorum.voters) is what Kafka's
    `kafka-storage format --standalone` makes: its log starts at kraft.version 1 with itself as the voter
    (Kafka writes both control records in the bootstrap checkpoint; Samsa's leader appends them once, the
    first time it starts, and a single voter commits them at once). A static quorum stays at 0."""
    core = quorum.core
    if reconfig.kraft_version(core) == 1:
        return
    result, actions = core.change_voters(partial(reconfig.upgrade_kraft_version, level=1, validate_only=False),
                                         now_ms())
    quorum.execute(actions)
    if not isinstance(result, VoterChangeAppended):
        logger.warning("single voter stays at kraft.version 0: %s", result)


async def upgrade_kraft_version(quorum: MetadataQuorum, level: int, validate_only: bool, timeout_ms: int) -> Answer:
    """UpdateFeatures kraft.version (UPGRADE) on the active controller (Kafka: FeatureControlManager.updateFeature
    calls KafkaRaftClient.upgradeKRaftVersion, then commits a NoOpRecord, so its answer follows the commit of
    the KRaftVersionRecord and VotersRecord appended before it): answered once they are committed."""
    result, actions = quorum.core.change_voters(partial(reconfig.upgrade_kraft_version, level=level,
                                                        validate_only=validate_only), now_ms())
    if result is None:
        quorum.execute(actions)
        return ErrorCode.none, None
    if isinstance(result, VoterChangeAppended):
        logger.info("kraft.version %d: KRaftVersionRecord and VotersRecord appended up to offset %d", level,
                    result.offset)
    return await _finish(quorum, result, actions, timeout_ms, True)


async def _finish(quorum: MetadataQuorum, result: Any, actions: Any, timeout_ms: int, ack_when_committed: bool
                  ) -> Answer:
    if isinstance(result, NotLeader):
        return ErrorCode.not_leader_or_follower, None
    if not isinstance(result, VoterChangeAppended):
        quorum.execute(actions)
        assert isinstance(result, VoterChangeRefused)
        return result.error_code, result.message
    logger.info("voter change appended at offset %d (epoch %d); voters now %s", result.offset, result.epoch,
                sorted(quorum.core.config.voters))
    if not ack_when_committed:
        quorum.execute(actions)
        return ErrorCode.none, None
    committed = quorum.await_commit(actions, result.offset, result.epoch)
    try:
        await asyncio.wait_for(committed, timeout_ms / 1000)
    except TimeoutError:
        return ErrorCode.request_timed_out, None
    except NotControllerError:
        return ErrorCode.not_leader_or_follower, None
    return ErrorCode.none, None


async def _kraft_versions(endpoint: VoterEndpoint, timeout_s: float, security: ClientSecurity | None
                          ) -> tuple[ErrorCode, tuple[int, int] | None]:
    """Ask the new voter's controller listener for ApiVersions: (error, its kraft.version range)."""
    client = NodeClient(endpoint.host, endpoint.port, client_id="raft-add-voter", security=security)
    request = build(request_class(18, _API_VERSIONS_VERSION),
                    {"client_software_name": "samsa", "client_software_version": "1"})
    try:
        response = await client.request(request, timeout_s=timeout_s)
    except Exception as e:  # unreachable, no answer in time, or an answer that does not decode: the peer's
        logger.info("ApiVersions to the new voter at %s:%d failed: %s", endpoint.host, endpoint.port, e)
        return ErrorCode.broker_not_available, None  # Kafka's KafkaNetworkChannel: a disconnection
    finally:
        await client.close()
    error = ErrorCode(int(response.error_code))
    for feature in response.supported_features:
        if feature.name == "kraft.version":
            return error, (int(feature.min_version), int(feature.max_version))
    return error, None


