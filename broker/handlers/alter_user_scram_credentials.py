"""AlterUserScramCredentials (key 51), v0 (KIP-554): add, replace or delete users' SCRAM credentials.

The client sends the salt and SaltedPassword (never the password); the controller stores the salt,
StoredKey, ServerKey and iteration count as UserScramCredentialRecord in the metadata log. Checks and
messages are Kafka's (ScramControlManager): a user named more than once in a request is DUPLICATE_RESOURCE
for all its changes; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; an empty user, salt or salted
password, or iterations outside 4096..16384, UNACCEPTABLE_CREDENTIAL; deleting a credential that does not
exist RESOURCE_NOT_FOUND. Forwarded to the active controller (KIP-590) like the other metadata writes.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.metadata.records import MetadataRecord, RemoveUserScramCredentialRecord
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted,
    to_record,
)
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0 import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )

API = ApiSpec(key=51, min_version=0, max_version=0)

Outcome = tuple[ErrorCode, str | None]


async def handle_alter_user_scram_credentials(request: AlterUserScramCredentialsRequest, ctx: RequestContext
                                              ) -> AlterUserScramCredentialsResponse:
    cls: type[AlterUserScramCredentialsResponse] = response_class(51, ctx.version)
    denied = cluster_error(ctx, AclOperation.ALTER)  # ControllerApis: ALTER on the cluster
    if denied:  # Kafka's error response: each user named, sorted, with the error
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return build(cls, {"throttle_time": 0, "results": [
            {"user": user, "error_code": denied, "error_message": "Cluster authorization failed."} for user in users]})
    controller = ctx.broker.controller
    controller.require_active()
    existing = controller.image.scram_credentials
    counts = Counter([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    outcomes: dict[str, Outcome] = {}
    records: list[MetadataRecord] = []
    for deletion in request.deletions:
        error = _check_user(deletion.name, int(deletion.mechanism), counts)
        if error is None and (deletion.name, int(deletion.mechanism)) not in existing:
            error = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        if error is None:
            records.append(RemoveUserScramCredentialRecord(deletion.name, int(deletion.mechanism)))
        _note(outcomes, deletion.name, error)
    for upsertion in request.upsertions:
        error = _check_user(upsertion.name, int(upsertion.mechanism), counts)
        if error is None:
            error = _check_credential(int(upsertion.iterations), bytes(upsertion.salt),
                                      bytes(upsertion.salted_password))
        if error is None:
            mechanism = ScramMechanism(int(upsertion.mechanism))
            credential = credential_from_salted(mechanism, bytes(upsertion.salted_password), bytes(upsertion.salt),
                                                int(upsertion.iterations))
            records.append(to_record(upsertion.name, mechanism, credential))
        _note(outcomes, upsertion.name, error)
    # A user's changes are applied together or not at all: drop every record of a user with a refusal.
    refused = {user for user, (code, _m) in outcomes.items() if code != ErrorCode.none}
    records = [r for r in records if _user_of(r) not in refused]
    if records:
        await controller.commit(None, records)
    return build(cls, {"throttle_time": 0, "results": [
        {"user": user, "error_code": code, "error_message": message} for user, (code, message) in outcomes.items()]})


def _user_of(record: MetadataRecord) -> str:
    return str(getattr(record, "name", ""))


def _note(outcomes: dict[str, Outcome], user: str, error: Outcome | None) -> None:
    if error is not None:
        if outcomes.get(user, (ErrorCode.none, None))[0] == ErrorCode.none:
            outcomes[user] = error
    else:
        outcomes.setdefault(user, (ErrorCode.none, None))


def _check_user(user: str, mechanism: int, counts: Counter[str]) -> Outcome | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if counts[user] > 1:
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
    if ScramMechanism.from_id(mechanism) is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _check_credential(iterations: int, salt: bytes, salted_password: bytes) -> Outcome | None:
    if iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    if not salt:
        return ErrorCode.unacceptable_credential, "Credential salt must not be empty"
    if not salted_password:
        return ErrorCode.unacceptable_credential, "Credential saltedPassword must not be empty"
    return None

