"""SASL/OAUTHBEARER (RFC 7628; Kafka's KIP-255, and KIP-768 for signed tokens), sans-IO.

The client's one message is the GS2 header and key/value pairs: "n,[a=<authzid>],^Aauth=Bearer <token>^A
[key=value^A...]^A" (^A is 0x01). The token is checked by a validator:

- `UnsecuredValidator`, Kafka's default (OAuthBearerUnsecuredValidatorCallbackHandler): an unsigned JWS
  (alg "none", empty signature), for tests only. Its options are those of the listener's
  OAuthBearerLoginModule JAAS entry: unsecuredValidatorPrincipalClaimName (sub),
  unsecuredValidatorScopeClaimName (scope), unsecuredValidatorRequiredScope (space separated) and
  unsecuredValidatorAllowableClockSkewMs (0).
- `JwtValidator` (OAuthBearerValidatorCallbackHandler's BrokerJwtValidator): a JWS signed with RS256 /
  ES256 / ... by a key of the JWKS at sasl.oauthbearer.jwks.endpoint.url (file://, http://, https://),
  with exp, iat and the subject claim required, alg "none" refused, sasl.oauthbearer.expected.audience /
  .expected.issuer checked when set and sasl.oauthbearer.clock.skew.seconds of leeway. The JWKS is
  read again every sasl.oauthbearer.jwks.endpoint.refresh.ms, and sooner (at most once per
  ...retry.backoff.ms) when a token names a key id it does not hold; an HTTP(S) refresh runs on a
  thread so that the event loop never waits on the identity provider, and the token that asked for it
  fails (Kafka's RefreshingHttpsJwksVerificationKeyResolver does the same).

Signature checks use PyJWT (with `cryptography`, already a dependency) rather than our own code: JOSE
has well-known traps (alg confusion, "none", key-type mismatches, ECDSA signature encoding) that a
maintained library handles and tests; we only add Kafka's rules around it.

A token that fails validation is answered, as RFC 7628 and Kafka do, with a JSON error challenge
({"status":"invalid_token"}, or "insufficient_scope" with the required "scope"); the client answers
with a lone ^A and the exchange then fails with SASL_AUTHENTICATION_FAILED carrying that JSON. Why the
token failed is kept for the broker's log (`SaslAuthenticationFailed.reason`), not told to the client.
The principal is User:<subject claim>; the session lifetime is bounded by the token's exp (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.broker.security.sasl import SaslAuthenticationFailed

logger = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = "OAuthBearerUnsecuredValidatorCallbackHandler"
SIGNED_HANDLER = "OAuthBearerValidatorCallbackHandler"

# RFC 7628 section 3.1 / Kafka's OAuthBearerClientInitialResponse.
_SEP = "\x01"
_KVPAIRS = rf"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+{_SEP})*"
_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>(?:[\x02-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,{_SEP}"
                               rf"(?P<kvpairs>{_KVPAIRS}){_SEP}")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
_SIGNED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int  # the token's exp, in ms since the epoch
    start_ms: int | None  # its iat


class InvalidToken(Exception):
    """The token is not accepted; str() is why (for the broker's log), `status`/`scope` the client's JSON."""

    def __init__(self, reason: str, *, status: str = "invalid_token", scope: str | None = None,
                 subject: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope
        self.subject = subject  # the token's principal when it could be read (for the audit log)

    def challenge(self) -> str:
        """Kafka's jsonErrorResponse: {"status":"..."} with "scope" when the scope was insufficient."""
        fields = {"status": self.status} | ({"scope": self.scope} if self.scope is not None else {})
        return json.dumps(fields, separators=(",", ":"))


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> OAuthBearerToken:
        """The token's principal, scope and lifetime; InvalidToken if it is not accepted."""


# --- the client's initial response -----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    authorization_id: str
    token: str
    extensions: Mapping[str, str]


def parse_initial_response(data: bytes) -> ClientInitialResponse:
    """RFC 7628's client response; SaslAuthenticationFailed with Kafka's message if it is malformed."""
    text = data.decode("utf-8", "replace")
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message")
    pairs = dict(item.split("=", 1) for item in match.group("kvpairs").split(_SEP) if item)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match.group("scheme").lower() != "bearer":
        raise SaslAuthenticationFailed(f"Invalid scheme in OAUTHBEARER client first message: "
                                       f"{auth_match.group('scheme')}")
    authzid = (match.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return ClientInitialResponse(authzid, auth_match.group("token"), pairs)


# --- the mechanism server ------------------------------------------------------------------------

class OAuthBearerServer:
    """One exchange: initial response -> b"" (done) or the JSON error challenge; after a challenge the
    client's ^A ends it with SaslAuthenticationFailed(JSON)."""

    def __init__(self, validator: TokenValidator, clock: Callable[[], int] | None = None) -> None:
        self._validator = validator
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._complete = False
        self._principal = ""
        self._error: InvalidToken | None = None
        self.credential_expires_ms: int | None = None
        self.attempted_principal = ""

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def principal(self) -> str:
        return self._principal

    def evaluate(self, token: bytes) -> bytes:
        if self._complete:
            raise SaslAuthenticationFailed("Authentication failed: unexpected OAUTHBEARER message after completion")
        if token == _SEP.encode() and self._error is not None:
            error = self._error
            raise SaslAuthenticationFailed(error.challenge(), reason=str(error))
        self._error = None
        response = parse_initial_response(token)
        try:
            accepted = self._validator.validate(response.token, self._clock())
        except InvalidToken as e:
            self._error = e
            self.attempted_principal = e.subject
            return e.challenge().encode()
        self.attempted_principal = accepted.principal_name
        if response.authorization_id and response.authorization_id != accepted.principal_name:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({response.authorization_id}) that is "
                f"different from the token's principal name ({accepted.principal_name})")
        self._principal = f"User:{accepted.principal_name}"
        self.credential_expires_ms = accepted.lifetime_ms
        self._complete = True
        return b""


# --- claims ----------------------------------------------------------------------------------------

def _b64_json(part: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError) as e:
        raise InvalidToken(f"the token's {what} is not base64url-encoded JSON") from e
    if not isinstance(value, dict):
        raise InvalidToken(f"the token's {what} is not a JSON object")
    return value


def _scope_of(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    raw = claims.get(name)
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return frozenset(raw)
    if raw is None:
        return frozenset()
    raise InvalidToken(f"the '{name}' claim is neither a string nor a list of strings")


def _text(claims: Mapping[str, Any], name: str) -> str:
    """A string claim, "" if absent or not a string (an unverified subject, for the log only)."""
    raw = claims.get(name)
    return raw if isinstance(raw, str) else ""


def _subject_of(claims: Mapping[str, Any], name: str) -> str:
    raw = claims.get(name)
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidToken(f"the token has no '{name}' claim (the principal) or it is not a non-empty string")
    return raw


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    raw = claims.get(name)
    if raw is None:
        if required:
            raise InvalidToken(f"the token has no '{name}' claim")
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise InvalidToken(f"the '{name}' claim is not a number")
    return float(raw)


# --- unsecured mode --------------------------------------------------------------------------------

class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: alg "none", no signature."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = tuple(options.get("unsecuredValidatorRequiredScope", "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip() or "0"
        if not skew.isdigit():
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs must be a non-negative integer: {skew}")
        self.clock_skew_ms = int(skew)

    def validate(self, token: str, now_ms: int) -> OAuthBearerToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("an unsecured JWS has three parts separated by '.'")
        header = _b64_json(parts[0], "header")
        claims = _b64_json(parts[1], "claims")
        subject = _text(claims, self.principal_claim)
        try:
            if header.get("alg") != "none" or parts[2]:
                raise InvalidToken("an unsecured JWS must have alg \"none\" and an empty signature")
            subject = _subject_of(claims, self.principal_claim)
            expires = _number(claims, "exp", True)
            issued = _number(claims, "iat", False)
            assert expires is not None
            if issued is not None and issued * 1000 > now_ms + self.clock_skew_ms:
                raise InvalidToken(f"The Issued At value ({issued} seconds) was after the indicated time ({now_ms} ms)"
                                   f" plus allowable clock skew ({self.clock_skew_ms} ms)")
            if now_ms - self.clock_skew_ms >= expires * 1000:
                raise InvalidToken(f"The indicated time ({now_ms} ms) minus allowable clock skew "
                                   f"({self.clock_skew_ms} ms) was on or after the Expiration Time value "
                                   f"({expires} seconds)")
            if issued is not None and issued > expires:
                raise InvalidToken(f"The Issued At value ({issued} seconds) was after the Expiration Time value "
                                   f"({expires} seconds)")
            scope = _scope_of(claims, self.scope_claim)
            missing = [s for s in self.required_scope if s not in scope]
            if missing:
                raise InvalidToken(f"The provided scope ({' '.join(sorted(scope))}) was missing a required scope "
                                   f"({' '.join(missing)})", status="insufficient_scope",
                                   scope=" ".join(self.required_scope))
        except InvalidToken as e:
            e.subject = subject
            raise
        return OAuthBearerToken(subject, scope, int(expires * 1000), None if issued is None else int(issued * 1000))


# --- signed mode -----------------------------------------------------------------------------------

class JwksError(ValueError):
    """The JWKS could not be read or parsed."""


def read_jwks(url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """The JWKS document at `url` (file://, http:// or https://)."""
    if not url.startswith(("file:", "http://", "https://")):
        raise JwksError(f"sasl.oauthbearer.jwks.endpoint.url must be a file:, http:// or https:// URL: {url}")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # (schemes checked above)
            document = json.loads(response.read())
    except (OSError, ValueError) as e:
        raise JwksError(f"cannot read the JWKS at {url}: {e}") from e
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError(f"the JWKS at {url} is not a JSON object with a 'keys' list")
    return document


class JwksKeys:
    """The verification keys of one JWKS URL, refreshed in the background."""

    def __init__(self, url: str, refresh_ms: int, retry_backoff_ms: int,
                 fetch: Callable[[str], dict[str, Any]] = read_jwks,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self._refresh_ms = refresh_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._refreshing = False
        self._keys: dict[str, tuple[Any, str | None]] = {}  # kid -> (PyJWK, the JWK's "alg" if it pins one)
        self._anonymous: list[tuple[Any, str | None]] = []  # keys without a kid (used only for tokens without one)
        self._install(fetch(url))  # the first read is synchronous: a broker without keys does not start
        self._next_refresh = clock() + refresh_ms / 1000
        self._last_attempt = clock()

    def _install(self, document: dict[str, Any]) -> None:
        import jwt

        keys: dict[str, tuple[Any, str | None]] = {}
        anonymous: list[tuple[Any, str | None]] = []
        for entry in document["keys"]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key type or algorithm PyJWT cannot use: not one of ours to verify with
            pinned = (key, entry["alg"] if isinstance(entry.get("alg"), str) else None)
            if isinstance(entry.get("kid"), str):
                keys[entry["kid"]] = pinned
            else:
                anonymous.append(pinned)
        with self._lock:
            self._keys, self._anonymous = keys, anonymous

    def refresh(self) -> None:
        """Read the JWKS again now (on this thread); a failure keeps the keys held."""
        try:
            self._install(self._fetch(self.url))
        except Exception as e:  # (any: a bad document must not stop the broker; the keys held stay in use)
            logger.warning("keeping the JWKS keys held: reading %s again failed: %s", self.url, e)
        finally:
            with self._lock:
                self._refreshing = False

    def _maybe_refresh(self, expedite: bool) -> None:
        now = self._clock()
        with self._lock:
            due = now >= self._next_refresh or (expedite and now - self._last_attempt >= self._retry_backoff_ms / 1000)
            if not due or self._refreshing:
                return
            self._refreshing = True
            self._last_attempt = now
            self._next_refresh = now + self._refresh_ms / 1000
        if self.url.startswith("file:"):
            self.refresh()
        else:
            threading.Thread(target=self.refresh, name="samsa-jwks-refresh", daemon=True).start()

    def candidates(self, kid: str | None) -> list[tuple[Any, str | None]]:
        """The keys that may have signed a token with key id `kid` (none: a refresh is started)."""
        self._maybe_refresh(expedite=False)
        found = self._lookup(kid)
        if not found:
            self._maybe_refresh(expedite=True)  # (a file: URL is re-read now; an HTTP one in the background)
            found = self._lookup(kid)
        return found

    def _lookup(self, kid: str | None) -> list[tuple[Any, str | None]]:
        with self._lock:
            if kid is not None:
                return [self._keys[kid]] if kid in self._keys else []
            return list(self._anonymous) + list(self._keys.values())


class JwtValidator:
    """Kafka's BrokerJwtValidator (KIP-768) over PyJWT."""

    def __init__(self, keys: JwksKeys, *, audience: tuple[str, ...] = (), issuer: str = "",
                 scope_claim: str = "scope", sub_claim: str = "sub", clock_skew_s: int = 30) -> None:
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.scope_claim = scope_claim or "scope"
        self.sub_claim = sub_claim or "sub"
        self.clock_skew_s = clock_skew_s

    def validate(self, token: str, now_ms: int) -> OAuthBearerToken:
        import jwt

        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("Malformed JWT provided; expected three sections (header, payload, and signature)")
        unverified = _b64_json(parts[1], "claims")
        subject = _text(unverified, self.sub_claim)
        try:
            header = _b64_json(parts[0], "header")
            algorithm = header.get("alg")
            if algorithm not in _SIGNED_ALGORITHMS:
                raise InvalidToken(f"Could not validate the access token: the JWS algorithm {algorithm!r} is not "
                                   f"accepted (signed tokens only)")
            kid = header.get("kid") if isinstance(header.get("kid"), str) else None
            candidates = self.keys.candidates(kid)
            if not candidates:
                raise InvalidToken(f"Could not validate the access token: no verification key for kid {kid!r} in the "
                                   f"JWKS from {self.keys.url}")
            claims = self._decode(jwt, token, algorithm, candidates)
            subject = _subject_of(claims, self.sub_claim)
            scope = _scope_of(claims, self.scope_claim)
        except InvalidToken as e:
            e.subject = subject
            raise
        return OAuthBearerToken(subject, scope, int(float(claims["exp"]) * 1000), int(float(claims["iat"]) * 1000))

    def _decode(self, jwt: Any, token: str, algorithm: str, candidates: list[tuple[Any, str | None]]
                ) -> dict[str, Any]:
        """The verified claims (PyJWT checks exp and iat against the wall clock, with the leeway)."""
        options = {"require": ["exp", "iat"], "verify_aud": bool(self.audience), "verify_iss": bool(self.issuer)}
        failure: Exception | None = None
        for key, pinned in candidates:
            if pinned is not None and pinned != algorithm:
                continue  # the JWK is for another algorithm (no algorithm confusion)
            try:
                claims: dict[str, Any] = jwt.decode(
                    token, key.key, algorithms=[algorithm], audience=list(self.audience) or None,
                    issuer=self.issuer or None, leeway=self.clock_skew_s, options=options)
            except (jwt.InvalidSignatureError, jwt.InvalidKeyError) as e:
                failure = e  # another of the candidate keys may verify it
                continue
            except jwt.PyJWTError as e:
                raise InvalidToken(f"Could not validate the access token: {e}") from e
            return claims
        why = failure or f"no key of the JWKS is for {algorithm}"
        raise InvalidToken(f"Could not validate the access token: {why}")


# --- from the broker config ------------------------------------------------------------------------

def validator_from_config(read: Callable[[str], str], jaas_options: Mapping[str, str]) -> TokenValidator:
    """The listener's validator: signed mode when sasl.server.callback.handler.class is Kafka's
    OAuthBearerValidatorCallbackHandler or a JWKS URL is configured, else Kafka's unsecured default.
    ValueError (JwksError) if the configuration cannot be used."""
    handler = read("sasl.server.callback.handler.class").strip()
    url = read("sasl.oauthbearer.jwks.endpoint.url").strip()
    short = handler.rpartition(".")[2]
    if handler and short not in (SIGNED_HANDLER, UNSECURED_HANDLER):
        raise ValueError(f"sasl.server.callback.handler.class={handler} is not supported for OAUTHBEARER: use "
                         f"{SIGNED_HANDLER} (or leave it unset for the unsecured validator)")
    if short == SIGNED_HANDLER or (url and short != UNSECURED_HANDLER):
        if not url:
            raise ValueError(f"{SIGNED_HANDLER} needs sasl.oauthbearer.jwks.endpoint.url")
        keys = JwksKeys(url, int(read("sasl.oauthbearer.jwks.endpoint.refresh.ms")),
                        int(read("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")))
        audience = tuple(a.strip() for a in read("sasl.oauthbearer.expected.audience").split(",") if a.strip())
        return JwtValidator(keys, audience=audience, issuer=read("sasl.oauthbearer.expected.issuer").strip(),
                            scope_claim=read("sasl.oauthbearer.scope.claim.name").strip(),
                            sub_claim=read("sasl.oauthbearer.sub.claim.name").strip(),
                            clock_skew_s=int(read("sasl.oauthbearer.clock.skew.seconds")))
    return UnsecuredValidator(jaas_options)
