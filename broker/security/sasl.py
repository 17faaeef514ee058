"""SASL mechanism servers (PLAIN, SCRAM-SHA-256/512), sans-IO: a client token in, a server token out.

PLAIN (RFC 4616) checks the password against the listener's JAAS config (PlainLoginModule's
user_<name>="<password>" options, Kafka's PlainServerCallbackHandler), in constant time. SCRAM uses the
`scramp` library against the credentials in the metadata image; an unknown user gets a made-up
credential so that the failure comes at the same step, with the same message, as a wrong password (the
client cannot tell which users exist). A failure is SaslAuthenticationFailed with Kafka's message.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping
from typing import Protocol

from samsa.broker.security.scram import ScramCredential, ScramMechanism


class SaslAuthenticationFailed(Exception):
    """The client failed to authenticate; str() is the message SaslAuthenticate carries, `reason` why (for
    the broker's log only, when it says more than the client is told)."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class MechanismServer(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str: ...

    @property
    def attempted_principal(self) -> str:
        """The user name the client tried ("" until known), for the authentication-failure log."""

    @property
    def credential_expires_ms(self) -> int | None:
        """When the credential authenticated with expires (OAUTHBEARER's exp), bounding the session (KIP-368)."""

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to one client token; SaslAuthenticationFailed if authentication fails."""


# --- JAAS -----------------------------------------------------------------------------------------

_JAAS_ENTRY = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*((?:[^;"]|"(?:\\.|[^"\\])*")*);')
_JAAS_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s"]+))')


class JaasConfigError(ValueError):
    pass


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """(login module class, options) of a sasl.jaas.config value (Kafka's JaasConfig: one entry)."""
    match = _JAAS_ENTRY.match(text)
    if match is None or text[match.end():].strip():
        raise JaasConfigError("sasl.jaas.config: expected '<LoginModule class> required key=\"value\" ...;'")
    options: dict[str, str] = {}
    body = match.group(3)
    position = 0
    while body[position:].strip():
        option = _JAAS_OPTION.match(body, position)
        if option is None:
            raise JaasConfigError(f"sasl.jaas.config: cannot read option at {body[position:].strip()[:20]!r}")
        quoted, bare = option.group(2), option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        position = option.end()
    return match.group(1), options


def plain_users(jaas: str) -> dict[str, str]:
    """The user_<name>="<password>" options of a PlainLoginModule entry."""
    if not jaas:
        return {}
    _module, options = parse_jaas(jaas)
    return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}


# --- PLAIN ----------------------------------------------------------------------------------------

class PlainServer:
    """RFC 4616: one token "authzid NUL authcid NUL passwd", checked against the JAAS users."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._principal = ""
        self._complete = False
        self.attempted_principal = ""
        self.credential_expires_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def principal(self) -> str:
        return self._principal

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        authzid, username, password = (p.decode("utf-8", "replace") for p in parts)
        self.attempted_principal = username
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                           "different from username")
        expected = self._users.get(username)
        # Compared in constant time, and compared even for an unknown user, so timing tells nothing.
        matches = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(),
                                      password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        self._principal = f"User:{username}"
        self._complete = True
        return b""


# --- SCRAM ----------------------------------------------------------------------------------------

# Made-up credentials for unknown users are derived from this process's secret, so that two attempts
# for the same unknown user see the same salt (as for a real user).
_FAKE_SECRET = os.urandom(32)


def _sasl_name(name: str) -> str:
    """RFC 5802 saslname: "=2C" is a comma and "=3D" an equals sign (Kafka's ScramFormatter.username)."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """RFC 5802 server: client-first -> server-first -> client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None]) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._user = ""
        self._known = False
        from scramp import ScramMechanism as ScrampMechanism  # (imported on first use: ~20 ms of start-up)

        self._server = ScrampMechanism(mechanism.mechanism_name).make_server(self._auth_info)
        self._step = 0
        self._principal = ""
        self.credential_expires_ms: int | None = None

    @property
    def attempted_principal(self) -> str:
        return self._user

    @property
    def complete(self) -> bool:
        return self._step == 2

    @property
    def principal(self) -> str:
        return self._principal

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        self._user = _sasl_name(username)
        credential = self._lookup(self._user)
        self._known = credential is not None
        if credential is None:
            salt = hmac.new(_FAKE_SECRET, self._user.encode(), hashlib.sha256).digest()
            fake = os.urandom(64)
            return salt, fake, fake, 4096
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, token: bytes) -> bytes:
        from scramp.utils import ScramException

        failed = (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                  f"{self._mechanism.mechanism_name}")
        try:
            text = token.decode("utf-8")
            if self._step == 0:
                self._server.set_client_first(text)
                self._step = 1
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._server.set_client_final(text)
                if not self._known:
                    raise SaslAuthenticationFailed(failed)
                self._step = 2
                self._principal = f"User:{self._user}"
                return str(self._server.get_server_final()).encode()
        except (ScramException, UnicodeDecodeError) as e:
            raise SaslAuthenticationFailed(failed) from e
        raise SaslAuthenticationFailed("Authentication failed: unexpected SCRAM message after completion")


SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def mechanism_server(mechanism: str, plain_users: Callable[[], Mapping[str, str]],
                     scram_lookup: Callable[[ScramMechanism, str], ScramCredential | None]) -> MechanismServer:
    if mechanism == "PLAIN":
        return PlainServer(plain_users())
    scram = ScramMechanism.from_name(mechanism)
    assert scram is not None and mechanism in SUPPORTED_MECHANISMS, mechanism
    return ScramServer(scram, lambda user: scram_lookup(scram, user))
