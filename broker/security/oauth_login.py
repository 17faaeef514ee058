"""The client side of SASL/OAUTHBEARER: where a broker (or the CLI) gets its own token, as Kafka's login
callback handlers do, and the client's initial response (RFC 7628) that carries it.

- Kafka's default, OAuthBearerUnsecuredLoginCallbackHandler: an unsigned JWS (alg "none") made from the
  OAuthBearerLoginModule JAAS options, for tests and development: unsecuredLoginStringClaim_<name>,
  unsecuredLoginNumberClaim_<name> and unsecuredLoginListClaim_<name> (the first character is the
  separator: ",a,b"), unsecuredLoginPrincipalClaimName (sub), unsecuredLoginLifetimeSeconds (3600) and
  unsecuredLoginExtension_<key> (SASL extensions). iat and exp are set at each login.
- OAuthBearerLoginCallbackHandler (KIP-768) with sasl.oauthbearer.token.endpoint.url: a file: URL names a
  file holding the token, read again at each login; an http(s) URL is the identity provider's token
  endpoint, asked with the client-credentials grant (clientId / clientSecret JAAS options, or Kafka 4.1's
  sasl.oauthbearer.client.credentials.client.id / .client.secret; scope from the JAAS option or
  sasl.oauthbearer.scope) and HTTP Basic authentication, as Kafka's ClientCredentialsJwtRetriever does.

A broker's connections to other nodes log in once per connection; a new connection logs in again, so a
token that expired is replaced at the next reconnect (the other side closes a session past its token's
lifetime, KIP-368).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.broker.security.listeners import ListenerConfigError

UNSECURED_LOGIN_HANDLER = "OAuthBearerUnsecuredLoginCallbackHandler"
LOGIN_HANDLER = "OAuthBearerLoginCallbackHandler"
_SEP = "\x01"
_HTTP_TIMEOUT_S = 10.0


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class OAuthBearerLogin:
    """How to get this client's token, and the SASL extensions to send with it."""

    unsecured_claims: Mapping[str, Any] | None = None  # the unsecured handler's fixed claims
    principal_claim: str = "sub"
    lifetime_s: int = 3600
    token_endpoint: str = ""  # OAuthBearerLoginCallbackHandler's file: or http(s): URL
    client_id: str = ""
    client_secret: str = ""
    scope: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    def token(self) -> str:
        """A token for one login (it may read a file or ask the identity provider: call it off the event loop)."""
        if self.unsecured_claims is not None:
            now_ms = int(self.clock() * 1000)  # Kafka's handler: seconds with millisecond precision
            claims = {**self.unsecured_claims, "iat": now_ms / 1000, "exp": (now_ms + self.lifetime_s * 1000) / 1000}
            return f"{_b64({'alg': 'none'})}.{_b64(claims)}."
        if self.token_endpoint.startswith("file:"):
            path = urllib.parse.urlparse(self.token_endpoint).path
            return Path(urllib.parse.unquote(path)).read_text().strip()
        return self._client_credentials()

    def _client_credentials(self) -> str:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(f"{urllib.parse.quote(self.client_id)}:{urllib.parse.quote(self.client_secret)}"
                                 .encode()).decode()
        request = urllib.request.Request(
            self.token_endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_S) as answer:
            document = json.loads(answer.read())
        token = document.get("access_token") if isinstance(document, dict) else None
        if not isinstance(token, str) or not token:
            raise ConnectionError(f"{self.token_endpoint} answered without an access_token")
        return token

    def initial_response(self, token: str) -> bytes:
        """RFC 7628's client initial response: GS2 header, auth=Bearer <token>, the extensions."""
        pairs = "".join(f"{key}={value}{_SEP}" for key, value in sorted(self.extensions.items()))
        return f"n,,{_SEP}auth=Bearer {token}{_SEP}{pairs}{_SEP}".encode()


def _claims(options: Mapping[str, str]) -> dict[str, Any]:
    claims: dict[str, Any] = {}
    for key, value in options.items():
        kind, _, name = key.partition("Claim_")
        if not name:
            continue
        if kind == "unsecuredLoginString":
            claims[name] = value
        elif kind == "unsecuredLoginNumber":
            try:
                claims[name] = float(value) if "." in value else int(value)
            except ValueError as e:
                raise ListenerConfigError(f"{key}={value!r} is not a number") from e
        elif kind == "unsecuredLoginList":
            claims[name] = [item for item in value[1:].split(value[:1])] if value else []
    return claims


def oauth_login(options: Mapping[str, str], read: Callable[[str], str], where: str) -> OAuthBearerLogin:
    """The login for JAAS `options` (OAuthBearerLoginModule's) and the client configs `read` finds
    (sasl.login.callback.handler.class, sasl.oauthbearer.*: a missing key reads as ""); ListenerConfigError,
    naming `where`, for a login Kafka would refuse to start with."""
    extensions = {key.removeprefix("unsecuredLoginExtension_"): value for key, value in options.items()
                  if key.startswith("unsecuredLoginExtension_")}
    handler = read("sasl.login.callback.handler.class").rsplit(".", 1)[-1]
    if handler in ("", UNSECURED_LOGIN_HANDLER):
        claims = _claims(options)
        principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
        if not claims.get(principal_claim):
            raise ListenerConfigError(f"{where}: OAUTHBEARER's unsecured login needs "
                                      f'unsecuredLoginStringClaim_{principal_claim}="<principal>" in its JAAS config '
                                      "(or sasl.login.callback.handler.class=...OAuthBearerLoginCallbackHandler "
                                      "with sasl.oauthbearer.token.endpoint.url)")
        try:
            lifetime_s = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
        except ValueError as e:
            raise ListenerConfigError(f"{where}: unsecuredLoginLifetimeSeconds is not a whole number") from e
        return OAuthBearerLogin(unsecured_claims=claims, principal_claim=principal_claim, lifetime_s=lifetime_s,
                                extensions=extensions)
    if handler != LOGIN_HANDLER:
        raise ListenerConfigError(f"{where}: sasl.login.callback.handler.class {handler} is not supported: use "
                                  f"{LOGIN_HANDLER} or the unsecured default")
    endpoint = read("sasl.oauthbearer.token.endpoint.url")
    if not endpoint.startswith(("file:", "http://", "https://")):
        raise ListenerConfigError(f"{where}: {LOGIN_HANDLER} needs sasl.oauthbearer.token.endpoint.url "
                                  f"(file:, http:// or https://), not {endpoint!r}")
    client_id = options.get("clientId") or read("sasl.oauthbearer.client.credentials.client.id")
    client_secret = options.get("clientSecret") or read("sasl.oauthbearer.client.credentials.client.secret")
    if not endpoint.startswith("file:") and not (client_id and client_secret):
        raise ListenerConfigError(f"{where}: the client-credentials grant at {endpoint} needs clientId and "
                                  "clientSecret (JAAS options or sasl.oauthbearer.client.credentials.client.*)")
    return OAuthBearerLogin(token_endpoint=endpoint, client_id=client_id, client_secret=client_secret,
                            scope=options.get("scope") or read("sasl.oauthbearer.scope"), extensions=extensions)
