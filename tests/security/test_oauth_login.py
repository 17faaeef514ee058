"""The client side of OAUTHBEARER (broker/security/oauth_login.py): where a broker's or the CLI's own token
comes from, checked against Samsa's own server-side validators and a local token endpoint."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.security.client import client_security, client_security_from_properties
from samsa.broker.security.listeners import Listener, ListenerConfigError, SecurityProtocol
from samsa.broker.security.oauth_login import OAuthBearerLogin, oauth_login
from samsa.broker.security.oauthbearer import OAuthBearerServer, UnsecuredValidator, parse_initial_response

PACKAGE = "org.apache.kafka.common.security.oauthbearer"


def _empty(key: str) -> str:
    return ""


def _claims(token: str) -> dict[str, Any]:
    body = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


def test_the_unsecured_login_makes_a_token_the_unsecured_validator_accepts() -> None:
    options = {"unsecuredLoginStringClaim_sub": "broker", "unsecuredLoginListClaim_scope": ",read,write",
               "unsecuredLoginNumberClaim_level": "3", "unsecuredLoginLifetimeSeconds": "600",
               "unsecuredLoginExtension_traceId": "n1"}
    login = oauth_login(options, _empty, "test")
    token = login.token()
    claims = _claims(token)
    assert claims["sub"] == "broker" and claims["scope"] == ["read", "write"] and claims["level"] == 3
    assert claims["exp"] - claims["iat"] == 600
    validated = UnsecuredValidator({"unsecuredValidatorRequiredScope": "read"}).validate(
        token, round(claims["iat"] * 1000))
    assert validated.principal_name == "broker" and validated.scope == {"read", "write"}
    response = parse_initial_response(login.initial_response(token))
    assert response.token == token and dict(response.extensions) == {"traceId": "n1"}
    server = OAuthBearerServer(UnsecuredValidator({}))
    assert server.evaluate(login.initial_response(token)) == b"" and server.principal == "User:broker"


def test_a_file_token_endpoint_is_read_at_each_login(tmp_path: Path) -> None:
    path = tmp_path / "token.jwt"
    read = {"sasl.login.callback.handler.class": f"{PACKAGE}.OAuthBearerLoginCallbackHandler",
            "sasl.oauthbearer.token.endpoint.url": path.as_uri()}
    login = oauth_login({}, lambda key: read.get(key, ""), "test")
    path.write_text("first.token.sig\n")
    assert login.token() == "first.token.sig"
    path.write_text("second.token.sig")
    assert login.token() == "second.token.sig"


@pytest.fixture
def token_endpoint() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen.append({"authorization": self.headers["Authorization"], "form": urllib.parse.parse_qs(body)})
            answer = json.dumps({"access_token": "issued.token.sig", "token_type": "Bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token", seen
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def test_the_client_credentials_grant_asks_the_token_endpoint(token_endpoint: tuple[str, list[Any]]) -> None:
    url, seen = token_endpoint
    read = {"sasl.login.callback.handler.class": f"{PACKAGE}.OAuthBearerLoginCallbackHandler",
            "sasl.oauthbearer.token.endpoint.url": url}
    login = oauth_login({"clientId": "samsa-broker", "clientSecret": "s3cr:et", "scope": "kafka"},
                        lambda key: read.get(key, ""), "test")
    assert login.token() == "issued.token.sig"
    assert seen[0]["form"] == {"grant_type": ["client_credentials"], "scope": ["kafka"]}
    scheme, _, encoded = seen[0]["authorization"].partition(" ")
    assert scheme == "Basic" and base64.b64decode(encoded).decode() == "samsa-broker:s3cr%3Aet"


@pytest.mark.parametrize(("options", "read", "message"), [
    ({}, {}, 'needs unsecuredLoginStringClaim_sub="<principal>"'),
    ({"unsecuredLoginStringClaim_sub": "b", "unsecuredLoginLifetimeSeconds": "soon"}, {},
     "unsecuredLoginLifetimeSeconds is not a whole number"),
    ({}, {"sasl.login.callback.handler.class": "com.example.MyHandler"}, "MyHandler is not supported"),
    ({}, {"sasl.login.callback.handler.class": f"{PACKAGE}.OAuthBearerLoginCallbackHandler"},
     "needs sasl.oauthbearer.token.endpoint.url"),
    ({}, {"sasl.login.callback.handler.class": f"{PACKAGE}.OAuthBearerLoginCallbackHandler",
          "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}, "needs clientId and clientSecret"),
])
def test_a_login_kafka_would_refuse_stops_the_broker_with_a_reason(
        options: dict[str, str], read: dict[str, str], message: str) -> None:
    with pytest.raises(ListenerConfigError, match=message):
        oauth_login(options, lambda key: read.get(key, ""), "listener INTERNAL")


def test_the_inter_broker_login_reads_the_listeners_mechanism_keys() -> None:
    config = {
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "listener.name.internal.oauthbearer.sasl.jaas.config":
            f'{PACKAGE}.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker-1";',
    }

    def get(key: str) -> str:
        return config[key]

    security = client_security(get, Listener("INTERNAL", "127.0.0.1", 0, SecurityProtocol.SASL_PLAINTEXT,
                                        "127.0.0.1", 0),
                               "sasl.mechanism.inter.broker.protocol")
    assert security is not None and security.mechanism == "OAUTHBEARER" and security.oauth is not None
    assert _claims(security.oauth.token())["sub"] == "broker-1"
    first = security.client_steps()(None)
    assert first is not None and parse_initial_response(first).token.count(".") == 2


def test_client_properties_with_oauthbearer() -> None:
    security = client_security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{PACKAGE}.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";',
    }, "admin.properties")
    assert security is not None and isinstance(security.oauth, OAuthBearerLogin)
    assert security.username == "admin"
    step = security.client_steps()
    assert step(None) is not None
    assert step(b'{"status":"invalid_token"}') == b"\x01"  # RFC 7628: the client ends a failed exchange
    assert step(b"") is None
