"""Test tokens for OAUTHBEARER: unsecured JWS (alg none) and RS256 / ES256 JWTs with their JWKS, made here."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.samsa.test"
AUDIENCE = "samsa-brokers"


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsecured_token(sub: str = "alice", *, lifetime_s: float = 3600, scope: str | None = None,
                    **claims: Any) -> str:
    """Kafka's unsecured JWS: header {"alg":"none"}, the claims, an empty signature."""
    now = time.time()
    body: dict[str, Any] = {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s)} | claims
    if scope is not None:
        body["scope"] = scope
    return f"{_b64({'alg': 'none'})}.{_b64(body)}."


def initial_response(token: str, authzid: str = "", **extensions: str) -> bytes:
    """RFC 7628's client message: GS2 header, auth=Bearer <token>, key/value pairs, ^A separators."""
    pairs = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{pairs}\x01".encode()


@dataclass
class Issuer:
    """An identity provider: an RSA and an EC key, each with a kid, and its JWKS file."""

    rsa_key: rsa.RSAPrivateKey
    ec_key: ec.EllipticCurvePrivateKey
    jwks_path: Path

    @property
    def jwks_url(self) -> str:
        return self.jwks_path.as_uri()

    def token(self, sub: str = "alice", *, alg: str = "RS256", kid: str | None = None, lifetime_s: float = 3600,
              iat_offset_s: float = 0, key: Any = None, **claims: Any) -> str:
        now = time.time()
        body: dict[str, Any] = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now + iat_offset_s),
                                "exp": int(now + lifetime_s)} | claims
        body = {k: v for k, v in body.items() if v is not None}
        signing = key if key is not None else (self.rsa_key if alg.startswith("RS") else self.ec_key)
        return jwt.encode(body, signing, algorithm=alg,
                          headers={"kid": kid if kid is not None else ("rsa-1" if alg.startswith("RS") else "ec-1")})


def make_issuer(directory: Path) -> Issuer:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_jwk = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key())) | {"kid": "rsa-1", "use": "sig", "alg": "RS256"}
    ec_jwk = json.loads(ECAlgorithm.to_jwk(ec_key.public_key())) | {"kid": "ec-1", "use": "sig", "alg": "ES256"}
    path = directory / "jwks.json"
    path.write_text(json.dumps({"keys": [rsa_jwk, ec_jwk]}))
    return Issuer(rsa_key, ec_key, path)


def add_key(issuer: Issuer, kid: str) -> rsa.RSAPrivateKey:
    """A new RSA key published in the issuer's JWKS under `kid` (key rotation)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    document = json.loads(issuer.jwks_path.read_text())
    document["keys"].append(json.loads(RSAAlgorithm.to_jwk(key.public_key())) | {"kid": kid, "use": "sig"})
    issuer.jwks_path.write_text(json.dumps(document))
    return key
