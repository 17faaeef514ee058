"""UpdateFeatures (key 57), v0-v2 (KIP-584): finalize feature levels, written as FeatureLevelRecord.

v0 says allow_downgrade (true reads as SAFE_DOWNGRADE); v1 replaces it with upgrade_type (KIP-778) and
adds validate_only; v2 drops the per-feature results (KIP-1022: an error is the top-level one). As in
the reference Kafka's controller, one refused update refuses the whole request (INVALID_UPDATE_VERSION with
"The update failed for all features since ..."); a successful v0/v1 answer lists every update with
error_message "NONE". A later update of the same feature in one request wins. kraft.version lives with the
quorum (no FeatureLevelRecord): its level is the quorum's, and an upgrade from 0 to 1 (Kafka 4.4's
`kafka-features.sh upgrade --feature kraft.version=1`) has the quorum's leader append the KRaftVersionRecord
and the first VotersRecord (raft.reconfig.upgrade_kraft_version), answered once committed; it is refused
(INVALID_UPDATE_VERSION) until every static voter has been heard from. Needs ALTER on the cluster;
forwarded to the active controller (KIP-590) like the other metadata writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.metadata.features import KRAFT_VERSION, UpgradeType, all_failed_message, check_update
from samsa.broker.metadata.records import FeatureLevelRecord, MetadataRecord
from samsa.broker.metadata.voter_changes import upgrade_kraft_version
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.update_features import v0, v1, v2
    UpdateFeaturesRequest = v0.UpdateFeaturesRequest | v1.UpdateFeaturesRequest | v2.UpdateFeaturesRequest
    UpdateFeaturesResponse = v0.UpdateFeaturesResponse | v1.UpdateFeaturesResponse | v2.UpdateFeaturesResponse

API = ApiSpec(key=57, min_version=0, max_version=2)


async def handle_update_features(request: UpdateFeaturesRequest, ctx: RequestContext) -> UpdateFeaturesResponse:
    cls: type[UpdateFeaturesResponse] = response_class(57, ctx.version)
    denied = cluster_error(ctx, AclOperation.ALTER)
    if denied:
        return build(cls, {"throttle_time": 0, "error_code": denied, "error_message": None, "results": ()})
    controller = ctx.broker.controller
    controller.require_active()
    current = controller.image.finalized_features()
    updates: list[tuple[str, int, int]] = []
    for update in request.feature_updates:
        kind: int
        if ctx.version == 0:
            kind = UpgradeType.SAFE_DOWNGRADE if field(update, "allow_downgrade") else UpgradeType.UPGRADE
        else:
            kind = int(field(update, "upgrade_type"))
        updates.append((update.feature, int(update.max_version_level), kind))
    for name, level, kind in updates:
        refused = check_update(name, level, kind, current, ctx.broker.node_id)
        if refused is not None:
            return build(cls, {"throttle_time": 0, "error_code": ErrorCode.invalid_update_version,
                               "error_message": all_failed_message(refused), "results": ()})
    validate_only = ctx.version >= 1 and bool(field(request, "validate_only"))
    kraft = [(level, kind) for name, level, kind in updates if name == KRAFT_VERSION]
    if kraft and kraft[-1][1] == UpgradeType.UPGRADE:
        error, message = await upgrade_kraft_version(ctx.broker.quorum, kraft[-1][0], validate_only,
                                                     max(1, int(request.timeout.total_seconds() * 1000)))
        if error != ErrorCode.none:
            return build(cls, {"throttle_time": 0, "error_code": error, "results": (),
                               "error_message": all_failed_message(message) if message else None})
    final = {name: level for name, level, _kind in updates if name != KRAFT_VERSION}
    records: list[MetadataRecord] = [FeatureLevelRecord(name, level) for name, level in final.items()
                                     if level != current.get(name, 0)]
    if records and not validate_only:
        await controller.commit(None, records)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": [
        {"feature": name, "error_code": ErrorCode.none, "error_message": "NONE"} for name, _level, _kind in updates]})
