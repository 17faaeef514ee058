"""The indexed Authorizer against the rules written out plainly (StandardAuthorizerData.authorize as a
reference model): random ACL sets, random requests, the same decision."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.broker.security.acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    Acl,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.broker.security.authorizer import Authorizer

NAMES = st.sampled_from(["", "a", "ab", "abc", "b", "*"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
TYPES = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])
OPERATIONS = st.sampled_from([op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)])
ACLS = st.builds(Acl, TYPES, NAMES.filter(bool), st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
                 PRINCIPALS, HOSTS, OPERATIONS, st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]))


def reference(acls: list[Acl], supers: set[str], allow_if_no_acl: bool, principal: str, host: str,
              op: AclOperation, rt: ResourceType, name: str) -> bool:
    if principal in supers:
        return True
    on_resource = [a for a in acls if a.resource_type == rt and (
        (a.pattern_type == PatternType.LITERAL and a.resource_name in (name, "*"))
        or (a.pattern_type == PatternType.PREFIXED and name.startswith(a.resource_name)))]
    if not on_resource:
        return allow_if_no_acl

    def applies(a: Acl) -> bool:
        if a.principal not in (principal, "User:*") or a.host not in ("*", host):
            return False
        if a.operation == AclOperation.ALL or a.operation == op:
            return True
        if a.permission_type == AclPermissionType.ALLOW:  # only an ALLOW implies
            return (op == AclOperation.DESCRIBE and a.operation in IMPLIES_DESCRIBE) or (
                op == AclOperation.DESCRIBE_CONFIGS and a.operation in IMPLIES_DESCRIBE_CONFIGS)
        return False

    matching = [a for a in on_resource if applies(a)]
    if any(a.permission_type == AclPermissionType.DENY for a in matching):
        return False
    return any(a.permission_type == AclPermissionType.ALLOW for a in matching)


@settings(max_examples=400, deadline=None)
@given(acls=st.lists(ACLS, max_size=12), allow_if_no_acl=st.booleans(),
       principal=st.sampled_from(["User:alice", "User:bob", "User:admin"]), host=HOSTS.filter(lambda h: h != "*"),
       op=OPERATIONS.filter(lambda o: o != AclOperation.ALL), rt=TYPES, name=NAMES.filter(lambda n: n != "*"))
def test_the_authorizer_decides_as_the_reference_model(acls: list[Acl], allow_if_no_acl: bool, principal: str,
                                                        host: str, op: AclOperation, rt: ResourceType,
                                                        name: str) -> None:
    authorizer = Authorizer(acls, ["User:admin"], allow_if_no_acl)
    expected = reference(acls, {"User:admin"}, allow_if_no_acl, principal, host, op, rt, name)
    assert authorizer.decide(principal, host, op, rt, name).allowed is expected
    assert authorizer.decide(principal, host, op, rt, name).allowed is expected  # the cached decision too
