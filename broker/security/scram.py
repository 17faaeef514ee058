"""SCRAM credentials (RFC 5802, Kafka's ScramFormatter): what is stored for a user, never the password.

A credential is the salt, the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"), where SaltedPassword = PBKDF2(password, salt, iterations).
AlterUserScramCredentials carries SaltedPassword (the client derives it); `samsa user create` derives it
here. Kafka's bounds: 4096 <= iterations <= 16384.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from enum import IntEnum

from samsa.broker.metadata.records import UserScramCredentialRecord

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192


class ScramMechanism(IntEnum):
    """Kafka's org.apache.kafka.clients.admin.ScramMechanism type ids."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self == ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        try:
            return cls[name.upper().replace("-", "_")]
        except KeyError:
            return None

    @classmethod
    def from_id(cls, value: int) -> ScramMechanism | None:
        try:
            return cls(value)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", mechanism.hash_name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def to_record(user: str, mechanism: ScramMechanism, credential: ScramCredential) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(user, int(mechanism), _b64(credential.salt), _b64(credential.stored_key),
                                     _b64(credential.server_key), credential.iterations)


def from_record(record: UserScramCredentialRecord) -> ScramCredential:
    return ScramCredential(base64.b64decode(record.salt), base64.b64decode(record.stored_key),
                           base64.b64decode(record.server_key), record.iterations)
