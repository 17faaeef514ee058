"""ACLs as values: Kafka's resource, pattern, operation and permission codes, one ACL (StandardAcl), the
filters of DescribeAcls / DeleteAcls (AclBindingFilter), and the checks CreateAcls applies to a new ACL.

The numeric codes are Kafka's (org.apache.kafka.common.acl / resource), as they travel on the wire and
as they are stored in AccessControlEntryRecord.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# authorizer.class.name values that turn the ACL authorizer on (Kafka's KRaft one; Samsa's own short name).
AUTHORIZER_CLASS_NAMES = (STANDARD_AUTHORIZER, "samsa.StandardAuthorizer")

WILDCARD = "*"  # a LITERAL resource name matching every name; a host matching every host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource (Kafka's Resource.CLUSTER_NAME)

# StandardAuthorizerData: an ALLOW for any of these grants DESCRIBE; for ALTER_CONFIGS, DESCRIBE_CONFIGS.
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# What Kafka reports in the authorized-operations bit fields, per resource type (AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class Acl:
    """One access control entry on a resource pattern (Kafka's StandardAcl / AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address, or "*"
    operation: AclOperation
    permission_type: AclPermissionType

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Does this ACL's pattern cover the literal resource `name` of `resource_type`?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls's filter (Kafka's AclBindingFilter): None matches any value."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def unknown_field(self) -> str | None:
        """The name of a field set to UNKNOWN (Kafka refuses such a filter), or None."""
        for name in ("resource_type", "pattern_type", "operation", "permission_type"):
            if getattr(self, name) == 0:
                return name
        return None

    def matches(self, acl: Acl) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (AclOperation.ANY, acl.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, acl.permission_type)

    def _matches_pattern(self, acl: Acl) -> bool:
        # ResourcePatternFilter.matches: MATCH finds the ACLs that apply to the literal name (itself, the
        # wildcard, prefixes of it); ANY any pattern type with this exact name; otherwise both must agree.
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD)
            return acl.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(acl.resource_name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


def parse_principal(principal: str) -> tuple[str, str] | None:
    """("User", "alice") for "User:alice"; None unless it is "type:name" (KafkaPrincipal's form)."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return None
    return kind, name


def check_new_acl(acl: Acl) -> str | None:
    """Why CreateAcls refuses `acl` (Kafka's AclControlManager.validateNewAcl), or None if it is valid."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {acl.permission_type}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if parse_principal(acl.principal) is None:
        return f"Could not parse principal from `{acl.principal}` (no colon is present separating the " \
               "principal type from the principal name)"
    if not acl.host:
        return "Invalid empty host"
    return None
