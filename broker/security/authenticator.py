"""A SASL listener's connection before (and between) authentications: Kafka's SaslServerAuthenticator.

Sans-IO: `receive(frame)` returns the response frame, or raises ProtocolError (the connection is then
closed). Until the client has authenticated only ApiVersions, SaslHandshake and SaslAuthenticate are
answered; any other request closes the connection, as Kafka does. Frames are capped at
sasl.server.max.receive.size meanwhile (the connection's reader enforces it).

  state                  frame                          -> answer, next state
  HANDSHAKE_OR_VERSIONS  ApiVersions                    -> the versions, HANDSHAKE (answered by the broker;
                                                           refused with an error, the state stays)
  HANDSHAKE_OR_VERSIONS  SaslHandshake                  -> as in HANDSHAKE
  HANDSHAKE              SaslHandshake v0 / v1          -> mechanisms, TOKEN_RAW (v0) / AUTHENTICATE (v1);
                                                           an unknown mechanism: UNSUPPORTED_SASL_MECHANISM, closed
  TOKEN_RAW              a raw token (no header, v0)    -> a raw token; COMPLETE when the mechanism is done
  AUTHENTICATE           SaslAuthenticate               -> auth_bytes; COMPLETE when done; a failure answers
                                                           SASL_AUTHENTICATION_FAILED (58), then closes
  COMPLETE               anything                       -> the broker answers it (`authenticated`)
  COMPLETE               SaslHandshake v1 (KIP-368)     -> re-authentication: HANDSHAKE's answer, REAUTHENTICATE
  REAUTHENTICATE         SaslAuthenticate               -> as AUTHENTICATE; the principal may not change
  any                    anything else                  -> ProtocolError: the connection closes

KIP-368: with connections.max.reauth.ms > 0, or a credential that expires (an OAUTHBEARER token),
SaslAuthenticate v1+ tells the client its session lifetime (the shorter of the two); a client that sends
anything but a re-authentication after the session expired is disconnected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum, auto
from typing import Any

from samsa.broker.security.audit import RateLimit
from samsa.broker.security.sasl import MechanismServer, SaslAuthenticationFailed
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode, ProtocolError
from samsa.kproto.messages import (
    API_VERSIONS_KEY,
    RequestHeader,
    decode_request,
    encode_response,
    parse_request_header,
    response_class,
)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class State(Enum):
    HANDSHAKE_OR_VERSIONS = auto()
    HANDSHAKE = auto()
    TOKEN_RAW = auto()
    AUTHENTICATE = auto()
    COMPLETE = auto()
    REAUTHENTICATE = auto()
    FAILED = auto()


# Which api keys each state answers (any other frame closes the connection).
ACCEPTS: dict[State, frozenset[int]] = {
    State.HANDSHAKE_OR_VERSIONS: frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY}),
    State.HANDSHAKE: frozenset({SASL_HANDSHAKE_KEY}),
    State.AUTHENTICATE: frozenset({SASL_AUTHENTICATE_KEY}),
    State.REAUTHENTICATE: frozenset({SASL_AUTHENTICATE_KEY}),
    State.FAILED: frozenset(),
}


class SaslAuthenticator:
    """One connection's SASL state. `make_mechanism(name)` starts a mechanism server for an enabled name."""

    def __init__(self, enabled_mechanisms: tuple[str, ...], make_mechanism: Callable[[str], MechanismServer],
                 *, reauth_ms: int = 0) -> None:
        self.enabled_mechanisms = enabled_mechanisms
        self._make_mechanism = make_mechanism
        self._reauth_ms = reauth_ms
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.principal = "User:ANONYMOUS"
        self._mechanism: MechanismServer | None = None
        self._mechanism_name = ""
        self.session_expires_ms: int | None = None  # KIP-368: when the client must have re-authenticated
        self.failed_message: str | None = None  # why authentication failed (the connection closes after it)
        self.failure_reason: str | None = None  # the same, for the broker's log (may say more than the client saw)

    @property
    def authenticated(self) -> bool:
        return self.state in (State.COMPLETE, State.REAUTHENTICATE)

    def handles(self, payload: bytes, now_ms: int) -> bool:
        """Whether this frame is the authenticator's, not the broker's (raises ProtocolError for a frame no
        one may answer now)."""
        if self.state == State.TOKEN_RAW:
            return True
        if self.state == State.COMPLETE:
            if len(payload) >= 4 and payload[0] << 8 | payload[1] == SASL_HANDSHAKE_KEY \
                    and payload[2] << 8 | payload[3] >= 1:
                return True
            if self.session_expires_ms is not None and now_ms >= self.session_expires_ms:
                raise ProtocolError("the SASL session expired and the client did not re-authenticate (KIP-368)")
            return False
        header = parse_request_header(payload)
        if header.api_key not in ACCEPTS[self.state]:
            raise ProtocolError(f"unexpected Kafka request of type api_key={header.api_key} during SASL "
                                f"{'authentication' if self.state != State.FAILED else 'failure'}")
        return header.api_key != API_VERSIONS_KEY  # ApiVersions: the broker's own answer

    def versions_answered(self) -> None:
        if self.state == State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE

    def receive(self, payload: bytes, now_ms: int) -> bytes:
        """The answer to a frame `handles` accepted."""
        if self.state == State.TOKEN_RAW:
            return self._raw_token(payload, now_ms)
        header = parse_request_header(payload)
        request = decode_request(header, payload)
        if header.api_key == SASL_HANDSHAKE_KEY:
            return self._handshake(header, request)
        return self._authenticate(header, request, now_ms)

    def _handshake(self, header: RequestHeader, request: Any) -> bytes:
        mechanism = str(request.mechanism)
        cls = response_class(SASL_HANDSHAKE_KEY, header.api_version)
        reauthenticating = self.state == State.COMPLETE
        if mechanism not in self.enabled_mechanisms or (reauthenticating and mechanism != self._mechanism_name):
            self.state = State.FAILED
            self.failed_message = self.failure_reason = f"unsupported SASL mechanism {mechanism}"
            return encode_response(header, build(cls, {"error_code": ErrorCode.unsupported_sasl_mechanism,
                                                       "mechanisms": self.enabled_mechanisms}))
        self._mechanism = self._make_mechanism(mechanism)
        self._mechanism_name = mechanism
        if reauthenticating:
            self.state = State.REAUTHENTICATE
        else:
            self.state = State.TOKEN_RAW if header.api_version == 0 else State.AUTHENTICATE
        return encode_response(header, build(cls, {"error_code": ErrorCode.none,
                                                   "mechanisms": self.enabled_mechanisms}))

    @property
    def mechanism_name(self) -> str:
        return self._mechanism_name

    @property
    def attempted_principal(self) -> str:
        """The user name the client tried ("" when not known), for the authentication-failure log."""
        return self._mechanism.attempted_principal if self._mechanism is not None else ""

    def _failed(self, error: SaslAuthenticationFailed) -> None:
        self.state = State.FAILED
        self.failed_message = str(error)
        self.failure_reason = error.reason

    def _evaluate(self, token: bytes) -> bytes:
        assert self._mechanism is not None
        return self._mechanism.evaluate(token)

    def _raw_token(self, token: bytes, now_ms: int) -> bytes:
        try:
            answer = self._evaluate(token)
        except SaslAuthenticationFailed as e:
            self._failed(e)
            raise ProtocolError(f"SASL authentication failed: {e}") from None
        self._maybe_complete(now_ms)
        return len(answer).to_bytes(4, "big") + answer

    def _authenticate(self, header: RequestHeader, request: Any, now_ms: int) -> bytes:
        cls = response_class(SASL_AUTHENTICATE_KEY, header.api_version)
        previous = self.principal if self.state == State.REAUTHENTICATE else None
        try:
            answer = self._evaluate(bytes(request.auth_bytes))
            if previous is not None and self._mechanism is not None and self._mechanism.complete \
                    and self._mechanism.principal != previous:
                raise SaslAuthenticationFailed(f"Cannot change principals during re-authentication from {previous}: "
                                               f"{self._mechanism.principal}")
        except SaslAuthenticationFailed as e:
            self._failed(e)
            return encode_response(header, build(cls, {"error_code": ErrorCode.sasl_authentication_failed,
                                                       "error_message": str(e), "auth_bytes": b""}))
        lifetime_ms = self._maybe_complete(now_ms)  # (v0 has no session_lifetime: build leaves it out)
        return encode_response(header, build(cls, {"error_code": ErrorCode.none, "error_message": None,
                                                   "auth_bytes": answer, "session_lifetime": lifetime_ms}))

    def _maybe_complete(self, now_ms: int) -> int:
        """Enter COMPLETE if the mechanism is done; the session lifetime to tell the client (0: none)."""
        mechanism = self._mechanism
        if mechanism is None or not mechanism.complete:
            return 0
        self.state = State.COMPLETE
        self.principal = mechanism.principal
        # Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the credential's expiry (an OAUTHBEARER
        # token's exp) bounds the session even when connections.max.reauth.ms is 0.
        expires = mechanism.credential_expires_ms
        if expires is None and self._reauth_ms <= 0:
            return 0
        if expires is None:
            lifetime_ms = self._reauth_ms
        elif self._reauth_ms <= 0:
            lifetime_ms = max(0, expires - now_ms)
        else:
            lifetime_ms = max(0, min(expires - now_ms, self._reauth_ms))
        self.session_expires_ms = now_ms + lifetime_ms
        return lifetime_ms


audit_logger = logging.getLogger("samsa.authentication")

AUDIT_LINES_PER_SECOND = 10


class FailureLog:
    """Failed authentications on logger samsa.authentication, at most AUDIT_LINES_PER_SECOND lines a second
    (a client retrying a bad password must not flood the log); the lines left out are counted in the
    next one. One line: the principal tried, the client's address, the listener, the mechanism, why."""

    def __init__(self) -> None:
        self._limit = RateLimit(AUDIT_LINES_PER_SECOND)

    def failed(self, authenticator: SaslAuthenticator, client: str, listener: str, now_ms: int) -> None:
        suppressed = self._limit.admit(now_ms)
        if suppressed is None:
            return
        tried = authenticator.attempted_principal
        audit_logger.info(
            "Failed authentication of %s from %s on listener %s with SASL mechanism %s: %s%s",
            f"User:{tried}" if tried else "an unknown principal", client, listener,
            authenticator.mechanism_name or "(none)",
            authenticator.failure_reason or authenticator.failed_message or "SASL authentication failed",
            f" ({suppressed} more failed authentications not logged)" if suppressed else "")


FAILURES = FailureLog()  # the process's (one broker per process in production; tests share it harmlessly)
