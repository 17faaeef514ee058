"""The authorizer: Kafka's StandardAuthorizer decision over the ACLs of the metadata image, and the
calls handlers make (`authorize`, `filter_authorized`, `authorized_operations`).

Enabled when `authorizer.class.name` is set (Kafka's StandardAuthorizer class name, or any non-empty
name Samsa accepts for it); when it is empty every request is allowed, as before. The decision, as in
StandardAuthorizerData.authorize: a super user may do anything; otherwise a DENY ACL that matches the
principal (or User:*), the client host (or *) and the operation (or ALL) wins over any ALLOW; an
ALLOW on READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW on ALTER_CONFIGS also allows
DESCRIBE_CONFIGS; when no ACL at all names the resource, `allow.everyone.if.no.acl.found` decides.
Denials of resources a client asked for are logged on logger `samsa.authorizer` (Kafka's
kafka.authorizer.logger), at most AUDIT_LINES_PER_SECOND a second, the rest counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from samsa.broker.security.acl import (
    AUTHORIZER_CLASS_NAMES,
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    Acl,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.broker.security.audit import RateLimit

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "AuthContext",
    "Authorizer",
    "authorize",
    "authorize_by_resource_type",
    "authorize_cluster",
    "authorized_operations",
    "authorizer_for",
    "enabled",
    "filter_authorized",
]

audit_logger = logging.getLogger("samsa.authorizer")

AUDIT_LINES_PER_SECOND = 10
DECISIONS_MAX_COUNT = 100_000  # cached decisions per ACL set; past it the cache starts again

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str  # which rule decided, for the audit line (Kafka's MatchingRule.toString)


_SUPER_USER = Decision(True, "SuperUser")


class Authorizer:
    """StandardAuthorizer over one set of ACLs (an image's) and the authorizer configs. Its decisions never
    change (it caches them); a change of ACLs or configs makes a new one."""

    __slots__ = ("_allow_if_no_acl", "_decisions", "_literal", "_prefixed", "super_users")

    def __init__(self, acls: Iterable[Acl], super_users: Iterable[str], allow_if_no_acl: bool) -> None:
        self.super_users = frozenset(super_users)
        self._allow_if_no_acl = allow_if_no_acl
        # LITERAL ACLs by (type, name) (the wildcard "*" under its own name); PREFIXED by type.
        self._literal: dict[tuple[ResourceType, str], list[Acl]] = {}
        self._prefixed: dict[ResourceType, list[Acl]] = {}
        # Decisions already taken with these ACLs (an image's ACLs change rarely; a new set is a new
        # Authorizer): a produce or fetch decides each topic once, not once per ACL each time.
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], Decision] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            else:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)

    def _matching(self, resource_type: ResourceType, name: str) -> Iterable[Acl]:
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for acl in self._prefixed.get(resource_type, ()):
            if name.startswith(acl.resource_name):
                yield acl

    def decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
               name: str) -> Decision:
        key = (principal, host, operation, resource_type, name)
        found = self._decisions.get(key)
        if found is None:
            if len(self._decisions) >= DECISIONS_MAX_COUNT:
                self._decisions.clear()
            found = self._decisions[key] = self._decide(principal, host, operation, resource_type, name)
        return found

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> Decision:
        if principal in self.super_users:
            return _SUPER_USER
        has_resource_acls = False
        allow: Acl | None = None
        for acl in self._matching(resource_type, name):
            has_resource_acls = True
            result = _applies(acl, principal, host, operation)
            if result is AclPermissionType.DENY:
                return Decision(False, f"MatchingAcl(acl={_show(acl)})")
            if result is AclPermissionType.ALLOW:
                allow = acl
        if allow is not None:
            return Decision(True, f"MatchingAcl(acl={_show(allow)})")
        if not has_resource_acls:
            return Decision(self._allow_if_no_acl, "DefaultAllow" if self._allow_if_no_acl else "DefaultDeny")
        return Decision(False, "DefaultDeny")

    def decide_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                resource_type: ResourceType) -> bool:
        """KIP-679's authorizeByResourceType (Kafka's Authorizer default): could the principal `operation`
        on some resource of this type? Yes if it may on a made-up name (super users, allow.everyone for
        a name no ACL covers, an ALLOW on "*"), or if an ALLOW ACL applies to it whose pattern no DENY
        ACL covers (a DENY on "*" covers all)."""
        if self.decide(principal, host, operation, resource_type, "hardcode").allowed:
            return True
        acls = [a for lst in self._literal.values() for a in lst if a.resource_type == resource_type]
        acls += self._prefixed.get(resource_type, [])
        matching = [a for a in acls if _principal_host_match(a, principal, host)
                    and a.operation in (operation, AclOperation.ALL)]
        denies = [a for a in matching if a.permission_type == AclPermissionType.DENY]
        if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies):
            return False
        deny_literal = {d.resource_name for d in denies if d.pattern_type == PatternType.LITERAL}
        deny_prefixes = [d.resource_name for d in denies if d.pattern_type == PatternType.PREFIXED]
        for allow in matching:
            if allow.permission_type != AclPermissionType.ALLOW:
                continue
            if allow.pattern_type == PatternType.LITERAL and allow.resource_name == WILDCARD:
                return True
            if any(allow.resource_name.startswith(p) for p in deny_prefixes):
                continue
            if allow.pattern_type == PatternType.LITERAL and allow.resource_name in deny_literal:
                continue
            return True
        return False

    def operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field: bit `op` set for each supported op allowed here."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.decide(principal, host, op, resource_type, name).allowed:
                bits |= 1 << op
        return bits


def _principal_host_match(acl: Acl, principal: str, host: str) -> bool:
    return acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (WILDCARD, host)


def _applies(acl: Acl, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """ALLOW / DENY if `acl` applies to this principal, host and operation, else None (findResult)."""
    if not _principal_host_match(acl, principal, host):
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            # Only an ALLOW implies: a DENY of READ does not deny DESCRIBE.
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission_type


def _show(acl: Acl) -> str:
    return (f"{acl.principal} {acl.permission_type.name} {acl.operation.name} from {acl.host} on "
            f"{acl.resource_type.name}:{acl.pattern_type.name}:{acl.resource_name}")


# --- what handlers call ----------------------------------------------------------------------------------

class _Header(Protocol):
    @property
    def api_key(self) -> int: ...


class _Config(Protocol):
    def get(self, key: str) -> str: ...
    def get_bool(self, key: str) -> bool: ...


class _Image(Protocol):
    @property
    def acls(self) -> Mapping[str, Acl]: ...


class _Broker(Protocol):
    @property
    def config(self) -> _Config: ...
    @property
    def image(self) -> _Image: ...


class AuthContext(Protocol):
    """What authorizing needs of a request (broker.context.RequestContext is one)."""

    @property
    def header(self) -> _Header: ...
    @property
    def broker(self) -> _Broker: ...
    @property
    def principal(self) -> str: ...
    @property
    def client_host(self) -> str: ...
    @property
    def now_ms(self) -> int: ...
    @property
    def controller_plane(self) -> bool: ...


# The Authorizers of the (config, ACLs) pairs last seen, by the objects' ids (each entry holds the objects,
# so an id is not reused while its entry lives): one per broker of the process, rebuilt only when its
# config or its image's ACLs change. A few entries: one process runs one broker (tests run a few).
AUTHORIZERS_MAX_COUNT = 8
_authorizers: dict[tuple[int, int], tuple[object, object, Authorizer]] = {}


def authorizer_for(config: _Config, acls: Mapping[str, Acl]) -> Authorizer | None:
    """The authorizer to apply, or None when authorization is off (authorizer.class.name unset)."""
    if not config.get("authorizer.class.name"):
        return None
    key = (id(config), id(acls))
    found = _authorizers.get(key)
    if found is not None:
        return found[2]
    supers = [s.strip() for s in config.get("super.users").split(";") if s.strip()]
    authorizer = Authorizer(acls.values(), supers, config.get_bool("allow.everyone.if.no.acl.found"))
    if len(_authorizers) >= AUTHORIZERS_MAX_COUNT:
        del _authorizers[next(iter(_authorizers))]
    _authorizers[key] = (config, acls, authorizer)
    return authorizer


def _authorizer(ctx: AuthContext) -> Authorizer | None:
    """The authorizer for this request; None lets it through: authorization is off, or the request came on
    the controller listener from a node (Kafka's inter-broker principal is a super user). A client request
    a broker forwards there comes in an Envelope, whose context is the client's, not controller_plane."""
    if ctx.controller_plane:
        return None
    return authorizer_for(ctx.broker.config, ctx.broker.image.acls)


def authorize(ctx: AuthContext, operation: AclOperation, resource_type: ResourceType, name: str, *,
              log_if_denied: bool = True) -> bool:
    """May the request's principal, from its host, do `operation` on this resource?"""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    decision = authorizer.decide(ctx.principal, ctx.client_host, operation, resource_type, name)
    if not decision.allowed and log_if_denied:
        _audit.denied(ctx, operation, resource_type, name, decision.rule)
    return decision.allowed


def authorize_cluster(ctx: AuthContext, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def authorize_by_resource_type(ctx: AuthContext, operation: AclOperation, resource_type: ResourceType) -> bool:
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    return authorizer.decide_by_resource_type(ctx.principal, ctx.client_host, operation, resource_type)


def filter_authorized(ctx: AuthContext, operation: AclOperation, resource_type: ResourceType,
                      items: Iterable[T], name_of: Callable[[T], str], *, log_if_denied: bool = True) -> set[str]:
    """The names among `items` the principal may `operation` (each name decided once: filterByAuthorized)."""
    names = {name_of(item) for item in items}
    return {n for n in names if authorize(ctx, operation, resource_type, n, log_if_denied=log_if_denied)}


def authorized_operations(ctx: AuthContext, resource_type: ResourceType, name: str) -> int:
    """The authorized-operations bit field of a resource for this request's principal (all, when off)."""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            bits |= 1 << op
        return bits
    return authorizer.operations(ctx.principal, ctx.client_host, resource_type, name)


def enabled(ctx: AuthContext) -> bool:
    return bool(ctx.broker.config.get("authorizer.class.name"))


class _AuditLog:
    """Denials, at most AUDIT_LINES_PER_SECOND lines a second; the ones left out are counted in the next."""

    def __init__(self) -> None:
        self._limit = RateLimit(AUDIT_LINES_PER_SECOND)

    def denied(self, ctx: AuthContext, operation: AclOperation, resource_type: ResourceType, name: str,
               rule: str) -> None:
        suppressed = self._limit.admit(ctx.now_ms)
        if suppressed is None:
            return
        audit_logger.info(
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s for request = "
            "%s based on rule %s%s", ctx.principal, operation.name, ctx.client_host, resource_type.name, name,
            _api_name(ctx.header.api_key), rule,
            f" ({suppressed} more denials not logged)" if suppressed else "")


def _api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"api_key {api_key}")


API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn",
    26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls",
    31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs", 37: "CreatePartitions",
    42: "DeleteGroups", 43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 55: "DescribeQuorum", 60: "DescribeCluster",
    61: "DescribeProducers", 65: "DescribeTransactions", 66: "ListTransactions",
}

_audit = _AuditLog()
