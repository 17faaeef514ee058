"""The controller's ACL part (Kafka's AclControlManager): CreateAcls and DeleteAcls become
AccessControlEntryRecord / RemoveAccessControlEntryRecord, written as one entry per request.

An ACL that already exists is not written again (its creation still succeeds, as in Kafka); an
invalid one gets INVALID_REQUEST with Kafka's message and the rest of the request goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from samsa.broker.controller_types import ControllerCore, Pending, check_record_count
from samsa.broker.metadata.records import AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord
from samsa.broker.security.acl import Acl, AclFilter, check_new_acl
from samsa.kproto.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeletionResult:
    """One filter's answer: the ACLs it removed, or an error for the whole filter."""

    error: ErrorCode
    message: str | None
    deleted: tuple[Acl, ...] = ()


def acl_record(acl_id: str, acl: Acl) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, int(acl.resource_type), acl.resource_name, int(acl.pattern_type),
                                    acl.principal, acl.host, int(acl.operation), int(acl.permission_type))


class AclControl:
    def __init__(self, core: ControllerCore) -> None:
        self._core = core

    def create_acls(self, acls: Sequence[Acl | str]) -> Pending[list[AclCreationResult]]:
        """Each item is an ACL to add, or the reason the handler already refused it (INVALID_REQUEST)."""
        self._core.require_active()
        check_record_count(len(acls))
        existing = set(self._core.image.acls.values())
        results: list[AclCreationResult] = []
        records: list[MetadataRecord] = []
        for acl in acls:
            problem = acl if isinstance(acl, str) else check_new_acl(acl)
            if problem is not None:
                results.append(AclCreationResult(ErrorCode.invalid_request, problem))
                continue
            assert isinstance(acl, Acl)
            if acl not in existing:
                existing.add(acl)
                records.append(acl_record(str(uuid.uuid4()), acl))
            results.append(AclCreationResult(ErrorCode.none))
        return self._core.commit(results, records)

    def delete_acls(self, filters: Sequence[AclFilter | str]) -> Pending[list[AclDeletionResult]]:
        """Each filter's matching ACLs removed (an ACL matched by two filters is removed once, reported
        by both); a filter the handler refused is its reason (INVALID_REQUEST)."""
        self._core.require_active()
        current = self._core.image.acls
        results: list[AclDeletionResult] = []
        removed: set[str] = set()
        for f in filters:
            if isinstance(f, str):
                results.append(AclDeletionResult(ErrorCode.invalid_request, f))
                continue
            matched = [(acl_id, acl) for acl_id, acl in current.items() if f.matches(acl)]
            removed.update(acl_id for acl_id, _ in matched)
            results.append(AclDeletionResult(ErrorCode.none, None, tuple(acl for _, acl in matched)))
        check_record_count(len(removed))
        return self._core.commit(results, [RemoveAccessControlEntryRecord(acl_id) for acl_id in sorted(removed)])
