"""Feature levels (KIP-584): what this broker supports, what a fresh cluster finalizes, and UpdateFeatures' checks.

Finalized levels live in the metadata log as FeatureLevelRecord (KRaft's FeatureControlManager); a feature
without a record is at its bootstrap level, the level Kafka 4.4.0 finalizes when it formats a fresh node
(`kafka-storage format` without --feature / --release-version), so a Samsa log that predates the records
reads as a fresh cluster -- except share.version, which Kafka 4.4 finalizes but Samsa does not: share groups
(KIP-932) are not implemented, so a client that reads the finalized levels must not take them for enabled
(normalize.KNOWN_DIFFERENCES). streams.version 1 is finalized as Kafka does: streams groups (KIP-1071) work.
A record at level 0 takes the
feature out of the finalized set, as in Kafka. The checks and their messages are Kafka 4.4.0's
(FeatureControlManager.updateFeature), measured against the reference broker by the differential scenario
`update_features`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"

# metadata.version 4.4-IV2 is level 33 (what Kafka 4.4.0 finalizes); 3.3-IV3 (level 7) is the oldest a KRaft
# controller accepts. Every downgrade from 33 changes metadata (4.4-IV2 did), so Kafka refuses them all, as here.
METADATA_VERSION_LEVEL = 33
MINIMUM_METADATA_VERSION_LEVEL = 7


@dataclass(frozen=True, slots=True)
class SupportedFeature:
    name: str
    min_version: int
    max_version: int
    bootstrap_level: int  # finalized on a fresh node (0: not finalized)


# In the order Kafka 4.4.0's ApiVersions lists them. Kafka finalizes share.version 2 and streams.version 1 on a
# fresh node; Samsa supports the same ranges (UpdateFeatures accepts them) and finalizes streams.version only.
SUPPORTED: tuple[SupportedFeature, ...] = (
    SupportedFeature(GROUP_VERSION, 0, 1, 1),
    SupportedFeature(KRAFT_VERSION, 0, 1, 0),  # the quorum's: 1 once its log has voter records
    SupportedFeature(METADATA_VERSION, MINIMUM_METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
    SupportedFeature("share.version", 0, 2, 0),
    SupportedFeature("streams.version", 0, 1, 1),
    SupportedFeature(TRANSACTION_VERSION, 0, 2, 2),
    SupportedFeature("eligible.leader.replicas.version", 0, 1, 1),
)
SUPPORTED_BY_NAME: Mapping[str, SupportedFeature] = {f.name: f for f in SUPPORTED}
# The order of Kafka's finalized_features (the iteration order of its FeaturesImage map).
FINALIZED_ORDER = (GROUP_VERSION, "share.version", "streams.version", TRANSACTION_VERSION,
                   "eligible.leader.replicas.version", KRAFT_VERSION, METADATA_VERSION)


class UpgradeType(IntEnum):
    """FeatureUpdate.UpgradeType, as UpdateFeatures v1+ sends it."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


def finalized_levels(explicit: Mapping[str, int], kraft_version: int) -> dict[str, int]:
    """Every finalized feature's level (above 0), in Kafka's order: records first, bootstrap levels otherwise;
    kraft.version is the quorum's (Kafka's KRaftMetadataCache lists it only above 0)."""
    out: dict[str, int] = {}
    for name in FINALIZED_ORDER + tuple(sorted(set(explicit) - set(FINALIZED_ORDER))):
        supported = SUPPORTED_BY_NAME.get(name)
        level = explicit.get(name, supported.bootstrap_level if supported is not None else 0)
        if name == KRAFT_VERSION:
            level = kraft_version
        if level > 0:
            out[name] = level
    return out


def check_update(name: str, level: int, upgrade_type: int, current: Mapping[str, int], node_id: int) -> str | None:
    """Why this controller refuses to finalize `name` at `level` (None: it may), in Kafka's words."""
    prefix = f"Invalid update version {level} for feature {name}. "
    if level < 0:
        return prefix + "A feature version cannot be less than 0."
    if upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE):
        return prefix + "The controller does not support the given upgrade type."
    supported = SUPPORTED_BY_NAME.get(name)
    if supported is None:
        return prefix + f"Local controller {node_id} does not support this feature."
    if not supported.min_version <= level <= supported.max_version:
        return prefix + f"Local controller {node_id} only supports versions {supported.min_version}-" \
                        f"{supported.max_version}"
    now = current.get(name, 0)
    if level > now:
        return None if upgrade_type == UpgradeType.UPGRADE else prefix + "Can't downgrade to a newer version."
    if level == now:
        return None
    if upgrade_type == UpgradeType.UPGRADE:
        return prefix + ("Can't downgrade the version of this feature without setting the upgrade type to either "
                         "safe or unsafe downgrade.")
    if name == METADATA_VERSION:
        why = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type ==
               UpgradeType.UNSAFE_DOWNGRADE else
               "Refusing to perform the requested downgrade because it might delete metadata information.")
        return f"Unsupported metadata.version downgrade from {now} to {level}. {why}"
    if name == KRAFT_VERSION:
        return prefix + "Can't downgrade the version of this feature."
    return None


def all_failed_message(reason: str) -> str:
    return f"The update failed for all features since the following feature had an error: {reason}"
