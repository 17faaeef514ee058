"""OAUTHBEARER without a broker: the client message, both validators, the mechanism's error challenge, the
session lifetime (KIP-368) and the rate-limited authentication-failure log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from oauth_tokens import AUDIENCE, ISSUER, Issuer, add_key, initial_response, make_issuer, unsecured_token

from samsa.broker.config import BrokerConfig, check_static_config
from samsa.broker.security import authenticator as auth
from samsa.broker.security.channel import ListenerSecurity
from samsa.broker.security.listeners import ListenerConfigError, broker_listeners
from samsa.broker.security.oauthbearer import (
    LOGIN_MODULE,
    InvalidToken,
    JwksKeys,
    JwtValidator,
    OAuthBearerServer,
    UnsecuredValidator,
    parse_initial_response,
    read_jwks,
    validator_from_config,
)
from samsa.broker.security.sasl import PlainServer, SaslAuthenticationFailed, ScramServer
from samsa.broker.security.scram import ScramMechanism
from samsa.broker.wire import build
from samsa.kproto.messages import encode_request, request_class

SIGNED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def issuer(tmp_path: Path) -> Issuer:
    return make_issuer(tmp_path)


def signed(issuer: Issuer, **kwargs: Any) -> JwtValidator:
    options: dict[str, Any] = {"audience": (AUDIENCE,), "issuer": ISSUER, "clock_skew_s": 30} | kwargs
    return JwtValidator(JwksKeys(issuer.jwks_url, 3_600_000, 100), **options)


# --- the client's message --------------------------------------------------------------------------

def test_the_initial_response_gives_authzid_token_and_extensions() -> None:
    parsed = parse_initial_response(initial_response("a.b.c", authzid="alice", traceId="42"))
    assert (parsed.authorization_id, parsed.token, dict(parsed.extensions)) == ("alice", "a.b.c", {"traceId": "42"})


@pytest.mark.parametrize(("message", "error"), [
    (b"n,,\x01auth=Bearer a.b.c\x01", "Invalid OAUTHBEARER client first message"),  # no final ^A
    (b"n,,\x01host=x\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
])
def test_a_malformed_initial_response_fails_with_kafkas_message(message: bytes, error: str) -> None:
    with pytest.raises(SaslAuthenticationFailed, match=f"^{error}$"):
        OAuthBearerServer(UnsecuredValidator({})).evaluate(message)


# --- unsecured mode --------------------------------------------------------------------------------

def test_unsecured_good_token_gives_the_subject_and_exp() -> None:
    token = unsecured_token("alice", lifetime_s=60, scope="produce consume")
    accepted = UnsecuredValidator({}).validate(token, now_ms())
    assert accepted.principal_name == "alice"
    assert accepted.scope == {"produce", "consume"}
    assert 55_000 < accepted.lifetime_ms - now_ms() <= 60_000


def test_unsecured_expired_token_is_refused_unless_within_the_clock_skew() -> None:
    token = unsecured_token(lifetime_s=-5, iat=int(time.time()) - 60)
    with pytest.raises(InvalidToken, match="was on or after the Expiration Time"):
        UnsecuredValidator({}).validate(token, now_ms())
    assert UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "60000"}).validate(token, now_ms())


def test_unsecured_required_scope_gives_insufficient_scope() -> None:
    validator = UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka write"})
    with pytest.raises(InvalidToken) as failure:
        validator.validate(unsecured_token(scope="kafka"), now_ms())
    assert json.loads(failure.value.challenge()) == {"status": "insufficient_scope", "scope": "kafka write"}
    assert validator.validate(unsecured_token(scope="write kafka read"), now_ms()).principal_name == "alice"


def test_unsecured_custom_principal_claim_and_missing_subject() -> None:
    validator = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "client_id"})
    assert validator.validate(unsecured_token(client_id="svc-1"), now_ms()).principal_name == "svc-1"
    with pytest.raises(InvalidToken, match="no 'client_id' claim"):
        validator.validate(unsecured_token(), now_ms())


def test_unsecured_mode_refuses_a_signed_token(issuer: Issuer) -> None:
    with pytest.raises(InvalidToken, match='alg "none"'):
        UnsecuredValidator({}).validate(issuer.token(), now_ms())


# --- signed mode -----------------------------------------------------------------------------------

@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_signed_good_token(issuer: Issuer, alg: str) -> None:
    accepted = signed(issuer).validate(issuer.token("bob", alg=alg, scope="a b"), now_ms())
    assert (accepted.principal_name, accepted.scope) == ("bob", {"a", "b"})


def test_signed_scope_as_a_list_and_custom_claim_names(issuer: Issuer) -> None:
    validator = signed(issuer, scope_claim="scp", sub_claim="client_id")
    accepted = validator.validate(issuer.token(client_id="svc", scp=["x", "y"]), now_ms())
    assert (accepted.principal_name, accepted.scope) == ("svc", {"x", "y"})


@pytest.mark.parametrize(("case", "error"), [
    ("expired", "Signature has expired"),
    ("wrong audience", "Audience doesn't match"),
    ("no audience", 'Token is missing the "aud" claim'),
    ("wrong issuer", "Invalid issuer"),
    ("bad signature", "Signature verification failed"),
    ("unknown kid", "no verification key for kid 'rotated-away'"),
    ("no exp", 'Token is missing the "exp" claim'),
    ("issued in the future", "The token is not yet valid"),
    ("no subject", "no 'sub' claim"),
])
def test_signed_bad_tokens_are_refused(issuer: Issuer, case: str, error: str) -> None:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = {
        "expired": lambda: issuer.token(lifetime_s=-120),
        "wrong audience": lambda: issuer.token(aud="someone-else"),
        "no audience": lambda: issuer.token(aud=None),
        "wrong issuer": lambda: issuer.token(iss="https://evil.test"),
        "bad signature": lambda: issuer.token(key=other_key),
        "unknown kid": lambda: issuer.token(kid="rotated-away"),
        "no exp": lambda: issuer.token(exp=None),
        "issued in the future": lambda: issuer.token(iat_offset_s=600),
        "no subject": lambda: issuer.token(sub=None),
    }[case]()
    with pytest.raises(InvalidToken, match=error) as failure:
        signed(issuer).validate(token, now_ms())
    assert failure.value.challenge() == '{"status":"invalid_token"}'


def test_signed_expiry_within_the_clock_skew_is_accepted(issuer: Issuer) -> None:
    token = issuer.token(lifetime_s=-10)
    assert signed(issuer, clock_skew_s=60).validate(token, now_ms()).principal_name == "alice"


def test_signed_mode_refuses_alg_none_and_hmac(issuer: Issuer) -> None:
    with pytest.raises(InvalidToken, match="'none' is not accepted"):
        signed(issuer).validate(unsecured_token(aud=AUDIENCE, iss=ISSUER), now_ms())
    # HS256 keyed with the RSA public key's PEM: the classic algorithm-confusion forgery.
    public_pem = issuer.rsa_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    signing_input = issuer.token(kid="rsa-1").rsplit(".", 1)[0]
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","kid":"rsa-1"}').rstrip(b"=").decode()
    signing_input = header + "." + signing_input.split(".")[1]
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    forged = signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    with pytest.raises(InvalidToken, match="'HS256' is not accepted"):
        signed(issuer).validate(forged, now_ms())


def test_a_jwk_pinned_to_rs256_does_not_verify_another_algorithm(issuer: Issuer) -> None:
    token = issuer.token(alg="ES256", kid="rsa-1")  # signed by the EC key, naming the RSA key's kid
    with pytest.raises(InvalidToken, match="no key of the JWKS is for ES256"):
        signed(issuer).validate(token, now_ms())


def test_an_unknown_kid_refreshes_the_jwks_and_a_later_token_passes(issuer: Issuer) -> None:
    clock = [0.0]
    validator = JwtValidator(JwksKeys(issuer.jwks_url, 3_600_000, 100, clock=lambda: clock[0]), issuer=ISSUER,
                             audience=(AUDIENCE,))
    new_key = add_key(issuer, "rsa-2")  # rotated in after the broker read the JWKS
    token = issuer.token(kid="rsa-2", key=new_key)
    clock[0] = 1.0  # past retry.backoff.ms since the last read: the unknown kid asks for a re-read
    assert validator.validate(token, now_ms()).principal_name == "alice"  # (a file: URL is re-read in place)


def test_the_jwks_is_re_read_after_refresh_ms(issuer: Issuer) -> None:
    reads: list[str] = []
    clock = [0.0]

    def fetch(url: str) -> dict[str, Any]:
        reads.append(url)
        return read_jwks(url)

    keys = JwksKeys(issuer.jwks_url, 60_000, 100, fetch=fetch, clock=lambda: clock[0])
    keys.candidates("rsa-1")
    clock[0] = 59.0
    keys.candidates("rsa-1")
    assert len(reads) == 1
    clock[0] = 61.0
    keys.candidates("rsa-1")
    assert len(reads) == 2


def test_validator_from_config_picks_the_mode(issuer: Issuer) -> None:
    config = {"sasl.server.callback.handler.class": "", "sasl.oauthbearer.jwks.endpoint.url": "",
              "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
              "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100", "sasl.oauthbearer.expected.audience": "a,b",
              "sasl.oauthbearer.expected.issuer": ISSUER, "sasl.oauthbearer.scope.claim.name": "scope",
              "sasl.oauthbearer.sub.claim.name": "sub", "sasl.oauthbearer.clock.skew.seconds": "30"}
    assert isinstance(validator_from_config(config.__getitem__, {}), UnsecuredValidator)
    config["sasl.server.callback.handler.class"] = \
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    with pytest.raises(ValueError, match=r"needs sasl\.oauthbearer\.jwks\.endpoint\.url"):
        validator_from_config(config.__getitem__, {})
    config["sasl.oauthbearer.jwks.endpoint.url"] = issuer.jwks_url
    validator = validator_from_config(config.__getitem__, {})
    assert isinstance(validator, JwtValidator) and validator.audience == ("a", "b")
    config["sasl.oauthbearer.jwks.endpoint.url"] = (issuer.jwks_path.parent / "missing.json").as_uri()
    with pytest.raises(ValueError, match="cannot read the JWKS"):
        validator_from_config(config.__getitem__, {})


# --- the mechanism ---------------------------------------------------------------------------------

def test_a_bad_token_gets_the_json_challenge_then_fails_on_the_clients_ctrl_a() -> None:
    server = OAuthBearerServer(UnsecuredValidator({}))
    challenge = server.evaluate(initial_response(unsecured_token("mallory", lifetime_s=-60)))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert not server.complete and server.attempted_principal == "mallory"
    with pytest.raises(SaslAuthenticationFailed) as failure:
        server.evaluate(b"\x01")
    assert str(failure.value) == '{"status":"invalid_token"}'
    assert "Expiration Time" in failure.value.reason


def test_a_good_token_completes_with_the_principal_and_its_expiry() -> None:
    server = OAuthBearerServer(UnsecuredValidator({}))
    assert server.evaluate(initial_response(unsecured_token("alice", lifetime_s=30), authzid="alice")) == b""
    assert server.complete and server.principal == "User:alice"
    assert server.credential_expires_ms is not None and server.credential_expires_ms > now_ms()


def test_an_authzid_other_than_the_subject_fails() -> None:
    with pytest.raises(SaslAuthenticationFailed, match=r"authorization id \(bob\) that is different"):
        OAuthBearerServer(UnsecuredValidator({})).evaluate(initial_response(unsecured_token("alice"), authzid="bob"))


def test_the_session_lifetime_is_bounded_by_the_tokens_exp() -> None:
    """KIP-368: min(exp - now, connections.max.reauth.ms), and exp alone when that is 0."""
    for reauth_ms, expected_max in ((0, 30_000), (10_000, 10_000), (3_600_000, 30_000)):
        sasl = auth.SaslAuthenticator(("OAUTHBEARER",), lambda _n: OAuthBearerServer(UnsecuredValidator({})),
                                      reauth_ms=reauth_ms)
        sasl._mechanism = OAuthBearerServer(UnsecuredValidator({}))
        sasl._mechanism.evaluate(initial_response(unsecured_token(lifetime_s=30)))
        now = now_ms()
        lifetime = sasl._maybe_complete(now)
        assert expected_max - 2_000 < lifetime <= expected_max
        assert sasl.session_expires_ms == now + lifetime


# --- the authentication-failure log ----------------------------------------------------------------

def test_failures_are_logged_with_who_where_how_and_why_at_most_n_a_second(
        caplog: pytest.LogCaptureFixture) -> None:
    sasl = auth.SaslAuthenticator(("OAUTHBEARER",), lambda _n: OAuthBearerServer(UnsecuredValidator({})))
    sasl._mechanism = OAuthBearerServer(UnsecuredValidator({}))
    sasl._mechanism_name = "OAUTHBEARER"
    sasl._mechanism.evaluate(initial_response(unsecured_token("mallory", lifetime_s=-60)))
    try:
        sasl._mechanism.evaluate(b"\x01")
    except SaslAuthenticationFailed as e:
        sasl._failed(e)
    log = auth.FailureLog()
    caplog.set_level(logging.INFO, logger="samsa.authentication")
    second = 1_000_000
    for _ in range(auth.AUDIT_LINES_PER_SECOND + 5):
        log.failed(sasl, "10.0.0.7:5555", "OAUTH", second * 1000)
    log.failed(sasl, "10.0.0.7:5555", "OAUTH", (second + 1) * 1000)
    lines = [r.getMessage() for r in caplog.records if r.name == "samsa.authentication"]
    assert len(lines) == auth.AUDIT_LINES_PER_SECOND + 1
    assert lines[0].startswith("Failed authentication of User:mallory from 10.0.0.7:5555 on listener OAUTH with "
                               "SASL mechanism OAUTHBEARER: The indicated time")
    assert lines[-1].endswith("(5 more failed authentications not logged)")


# --- the broker config -----------------------------------------------------------------------------

def _listener_config(**overrides: str) -> BrokerConfig:
    return BrokerConfig(overrides={"listeners": "OAUTH://127.0.0.1:9094",
                                   "listener.security.protocol.map": "OAUTH:SASL_PLAINTEXT",
                                   "sasl.enabled.mechanisms": "OAUTHBEARER"} | overrides,
                        listen_host="127.0.0.1", listen_port=9094, advertised_host="127.0.0.1", advertised_port=9094)


def test_the_oauthbearer_keys_are_kafkas_and_may_be_given_per_listener_and_mechanism() -> None:
    report = check_static_config({
        "sasl.oauthbearer.jwks.endpoint.url": "file:///jwks.json", "sasl.oauthbearer.expected.audience": "a,b",
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.issuer": "https://idp",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SIGNED_HANDLER,
        "listener.name.oauth.sasl.oauthbearer.clock.skew.seconds": "5",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "-1"})
    assert not report.warnings
    assert len(report.errors) == 1 and "sasl.oauthbearer.jwks.endpoint.refresh.ms" in report.errors[0]


def test_a_listener_offers_oauthbearer_in_either_mode(issuer: Issuer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="samsa.broker.security.channel")
    [listener] = broker_listeners(_listener_config())
    unsecured = ListenerSecurity.from_config(_listener_config(**{
        "listener.name.oauth.oauthbearer.sasl.jaas.config":
            f'{LOGIN_MODULE} required unsecuredValidatorRequiredScope="kafka";'}), listener)
    assert unsecured.mechanisms == ("OAUTHBEARER",)
    assert isinstance(unsecured.oauthbearer, UnsecuredValidator) and unsecured.oauthbearer.required_scope == ("kafka",)
    assert [r.getMessage() for r in caplog.records if "unsecured OAUTHBEARER tokens" in r.getMessage()]
    caplog.clear()
    signed_security = ListenerSecurity.from_config(_listener_config(**{
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SIGNED_HANDLER,
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
        "sasl.oauthbearer.expected.issuer": ISSUER}), listener)
    assert isinstance(signed_security.oauthbearer, JwtValidator) and signed_security.oauthbearer.issuer == ISSUER
    assert not caplog.records


def test_a_listener_whose_jwks_cannot_be_read_stops_the_start(tmp_path: Path) -> None:
    [listener] = broker_listeners(_listener_config())
    config = _listener_config(**{"sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "absent.json").as_uri()})
    with pytest.raises(ListenerConfigError, match="listener OAUTH: OAUTHBEARER: cannot read the JWKS"):
        ListenerSecurity.from_config(config, listener)
    config = _listener_config(**{"sasl.server.callback.handler.class": "com.example.MyHandler"})
    with pytest.raises(ListenerConfigError, match=r"com\.example\.MyHandler is not supported"):
        ListenerSecurity.from_config(config, listener)


# --- a JWKS over HTTP ------------------------------------------------------------------------------

@pytest.fixture
def jwks_server(issuer: Issuer) -> Iterator[tuple[str, list[int]]]:
    """The issuer's JWKS file served on 127.0.0.1; the list counts the GETs."""
    gets: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            gets.append(1)
            body = issuer.jwks_path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", gets
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_jwks_over_http_is_re_read_in_the_background_for_an_unknown_kid(
        issuer: Issuer, jwks_server: tuple[str, list[int]]) -> None:
    url, gets = jwks_server
    validator = JwtValidator(JwksKeys(url, 3_600_000, 0), issuer=ISSUER, audience=(AUDIENCE,))
    assert validator.validate(issuer.token(alg="ES256"), now_ms()).principal_name == "alice"
    assert len(gets) == 1
    new_key = add_key(issuer, "rsa-2")
    token = issuer.token(kid="rsa-2", key=new_key)
    with pytest.raises(InvalidToken, match="no verification key for kid 'rsa-2'"):
        validator.validate(token, now_ms())  # the event loop does not wait for the identity provider
    for _ in range(200):  # the background read lands (bounded: 200 tries)
        if validator.keys.candidates("rsa-2"):
            break
        threading.Event().wait(0.05)
    assert validator.validate(token, now_ms()).principal_name == "alice"


def test_plain_and_scram_failures_name_the_user_tried(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.authentication")
    plain = auth.SaslAuthenticator(("PLAIN",), lambda _n: PlainServer({"alice": "secret"}))
    plain.receive(_frame(17, 1, {"mechanism": "PLAIN"}), 0)
    plain.receive(_frame(36, 2, {"auth_bytes": b"\0alice\0wrong"}), 0)
    scram = auth.SaslAuthenticator(("SCRAM-SHA-256",), lambda _n: ScramServer(ScramMechanism.SCRAM_SHA_256,
                                                                             lambda _u: None))
    scram.receive(_frame(17, 1, {"mechanism": "SCRAM-SHA-256"}), 0)
    scram.receive(_frame(36, 2, {"auth_bytes": b"n,,n=nobody,r=abcdefgh"}), 0)
    scram.receive(_frame(36, 2, {"auth_bytes": b"c=biws,r=wrongnonce,p=AAAA"}), 0)
    log = auth.FailureLog()
    for sasl in (plain, scram):
        assert sasl.state == auth.State.FAILED
        log.failed(sasl, "127.0.0.1:1", "SASL_PLAINTEXT", 0)
    lines = [r.getMessage() for r in caplog.records if r.name == "samsa.authentication"]
    assert lines == [
        "Failed authentication of User:alice from 127.0.0.1:1 on listener SASL_PLAINTEXT with SASL mechanism PLAIN: "
        "Authentication failed: Invalid username or password",
        "Failed authentication of User:nobody from 127.0.0.1:1 on listener SASL_PLAINTEXT with SASL mechanism "
        "SCRAM-SHA-256: Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-256"]


def _frame(api_key: int, version: int, values: dict[str, Any]) -> bytes:
    request = build(request_class(api_key, version), values)
    return encode_request(request, correlation_id=1, client_id="unit")[4:]
