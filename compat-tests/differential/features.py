"""Differential scenario of feature levels (KIP-584): ApiVersions' supported and finalized features on a
fresh broker, and UpdateFeatures' answers (v0-v2, validate_only, refusals and their messages, a downgrade
and the upgrade back), on the reference Kafka and on Samsa. The scenario leaves the levels as it found them.
finalized_features_epoch is an offset of each broker's own metadata log (Kafka's also moves with the
controller's periodic no-op records): only whether it moved after a change is shown. ApiVersions is asked at
v3 (before KIP-1022, ranges starting at 0 are left out) and v4."""

from __future__ import annotations

from typing import Any

from differential.framework import Ctx, err, scenario
from samsa.broker.client import Connection

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _features(conn: Connection, version: int = 4) -> tuple[dict[str, Any], int]:
    r = conn.request(18, {"client_software_name": "samsa-differential", "client_software_version": "1"},
                     version=version)
    return ({"supported": [(f.name, f.min_version, f.max_version) for f in r.supported_features],
             "finalized": {f.name: (f.min_version_level, f.max_version_level)
                           for f in sorted(r.finalized_features, key=lambda f: f.name)}},
            r.finalized_features_epoch)


def _update(conn: Connection, version: int, updates: list[tuple[str, int, int]],
            validate_only: bool = False) -> dict[str, Any]:
    r = conn.request(57, {"timeout": 5000, "validate_only": validate_only, "feature_updates": [
        {"feature": name, "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind != UPGRADE}
        for name, level, kind in updates]}, version=version)
    return {"error": err(r), "message": r.error_message,
            "results": [(x.feature, err(x), x.error_message) for x in getattr(r, "results", ())]}


@scenario
def update_features(ctx: Ctx) -> Any:
    c = ctx.connect()
    before, _epoch = _features(c)
    before_v3, _epoch = _features(c, 3)
    steps: list[Any] = []
    for version, updates, validate_only in [
        (2, [("transaction.version", 3, UPGRADE)], True),
        (1, [("nosuch.version", 1, UPGRADE)], True),
        (1, [("transaction.version", 1, UPGRADE)], True),
        (1, [("transaction.version", -1, SAFE_DOWNGRADE)], True),
        (1, [("transaction.version", 1, 0)], True),
        (2, [("metadata.version", 20, SAFE_DOWNGRADE)], True),
        (2, [("metadata.version", 20, UNSAFE_DOWNGRADE)], True),
        (2, [("metadata.version", 6, SAFE_DOWNGRADE)], True),
        (2, [("kraft.version", 0, SAFE_DOWNGRADE)], True),
        (2, [("streams.version", 1, UPGRADE)], True),
        (1, [("transaction.version", 2, UPGRADE), ("group.version", 2, UPGRADE)], True),
        (1, [("transaction.version", 1, SAFE_DOWNGRADE), ("group.version", 0, UNSAFE_DOWNGRADE)], True),
        (2, [("metadata.version", 27, UPGRADE), ("kraft.version", 1, UPGRADE)], False),
        # kraft.version is the quorum's (1: formatted --standalone / a single Samsa node): the upgrade to the
        # level in force writes nothing; past the supported range is refused
        (2, [("kraft.version", 1, UPGRADE)], False),
        (1, [("kraft.version", 1, UPGRADE)], True),
        (2, [("kraft.version", 2, UPGRADE)], True),
        (0, [("transaction.version", 3, UPGRADE)], True),
        (1, [], False),
    ]:
        steps.append({"version": version, "updates": updates, "validate_only": validate_only,
                      "response": _update(c, version, updates, validate_only)})
    after_checks, epoch1 = _features(c)
    downgrade = _update(c, 1, [("transaction.version", 1, SAFE_DOWNGRADE)])
    downgraded, epoch2 = _features(c)
    upgrade = _update(c, 2, [("transaction.version", 2, UPGRADE)])
    upgraded, epoch3 = _features(c)
    return {"fresh": before, "fresh_v3": before_v3, "steps": steps, "unchanged_by_checks": after_checks == before,
            "downgrade": downgrade, "downgraded": downgraded["finalized"], "epoch_moved": epoch2 > epoch1,
            "upgrade": upgrade, "upgraded": upgraded["finalized"], "epoch_moved_again": epoch3 > epoch2}
