"""How this broker connects to another node's secured listener, as a Kafka client would: TLS, then SASL.

Inter-broker traffic (replica fetch, transaction markers, commit bounds) uses the inter-broker listener's
security (inter.broker.listener.name, sasl.mechanism.inter.broker.protocol); traffic to the controllers
(Raft, broker registration and heartbeats, forwarding) the controller listener's (controller.listener.names,
sasl.mechanism.controller.protocol). The client side of a listener reads the same keys as its server side
(listener.name.<listener>.*): its key store is this broker's certificate for mutual TLS, its trust store
checks the other broker's, and the JAAS config's username/password options are the SASL login (Kafka's
PlainLoginModule / ScramLoginModule `username="..." password="..."`); for OAUTHBEARER the
OAuthBearerLoginModule's options and the login callback handler say where the token comes from
(broker/security/oauth_login.py).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.broker.config import BrokerConfig
from samsa.broker.security.listeners import (
    Listener,
    ListenerConfigError,
    SecurityProtocol,
    broker_listeners,
    controller_listener,
    inter_broker_listener,
)
from samsa.broker.security.oauth_login import OAuthBearerLogin, oauth_login
from samsa.broker.security.sasl import SUPPORTED_MECHANISMS, JaasConfigError, parse_jaas
from samsa.broker.security.tls import client_context, listener_key_reader
from samsa.broker.wire import build
from samsa.kproto.messages import decode_response, encode_request, request_class

# The mechanisms this side can log in with: the server's, and OAUTHBEARER (broker/security/oauth_login.py).
CLIENT_MECHANISMS = (*SUPPORTED_MECHANISMS, "OAUTHBEARER")

# The largest frame read while authenticating (a SASL token is small).
MAX_AUTHENTICATION_FRAME_BYTES = 1024 * 1024


class AuthenticationError(ConnectionError):
    """The other node refused this broker's credentials (an OSError: callers treat it as unreachable)."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    listener: str
    ssl_context: ssl.SSLContext | None
    mechanism: str  # "" without SASL
    username: str
    password: str
    oauth: OAuthBearerLogin | None = None  # OAUTHBEARER's token source

    async def open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to host:port, TLS-wrapped and SASL-authenticated as this listener requires."""
        reader, writer = await asyncio.open_connection(
            host, port, ssl=self.ssl_context, server_hostname=host if self.ssl_context is not None else None)
        if self.mechanism:
            try:
                await self._authenticate(reader, writer)
            except BaseException:
                writer.close()
                raise
        return reader, writer

    def client_steps(self) -> Callable[[bytes | None], bytes | None]:
        """The SASL mechanism's client side: the server's token in (None first), the next token out, None
        when done (for a blocking client that sends SaslAuthenticate itself)."""
        token = self.oauth.token() if self.oauth is not None else ""
        return _mechanism_client(self.mechanism, self.username, self.password, self.oauth, token)

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        correlation = iter(range(1, 1 << 30))

        async def call(api_key: int, version: int, values: dict[str, Any]) -> Any:
            cid = next(correlation)
            request = build(request_class(api_key, version), values)
            writer.write(encode_request(request, correlation_id=cid, client_id="samsa-broker"))
            size = int.from_bytes(await reader.readexactly(4), "big")
            if not 0 <= size <= MAX_AUTHENTICATION_FRAME_BYTES:
                raise AuthenticationError(f"a {size}-byte frame while authenticating")
            return decode_response(api_key, version, await reader.readexactly(size))[1]

        handshake = await call(17, 1, {"mechanism": self.mechanism})
        if handshake.error_code.value != 0:
            raise AuthenticationError(f"{self.mechanism} is not enabled there (it offers "
                                      f"{', '.join(handshake.mechanisms)})")
        bearer = await asyncio.to_thread(self.oauth.token) if self.oauth is not None else ""
        step = _mechanism_client(self.mechanism, self.username, self.password, self.oauth, bearer)
        token: bytes | None = step(None)
        while token is not None:
            answer = await call(36, 2, {"auth_bytes": token})
            if answer.error_code.value != 0:
                raise AuthenticationError(f"SASL {self.mechanism} as {self.username}: {answer.error_message}")
            token = step(bytes(answer.auth_bytes))


def _mechanism_client(mechanism: str, username: str, password: str, oauth: OAuthBearerLogin | None = None,
                      bearer: str = "") -> Callable[[bytes | None], bytes | None]:
    """The client side of a mechanism: server token in (None first), the next client token out, None when
    done. A server whose final SCRAM message does not prove it knows the credential is refused."""
    if mechanism == "OAUTHBEARER":
        assert oauth is not None
        login, answered = oauth, False

        def oauthbearer(server: bytes | None) -> bytes | None:
            nonlocal answered
            if server is None:
                return login.initial_response(bearer)
            if server and not answered:  # an error challenge (RFC 7628 3.2.2): answer ^A, the server then fails
                answered = True
                return b"\x01"
            return None

        return oauthbearer
    if mechanism == "PLAIN":
        sent = False

        def plain(_server: bytes | None) -> bytes | None:
            nonlocal sent
            if sent:
                return None
            sent = True
            return b"\0" + username.encode() + b"\0" + password.encode()

        return plain
    from scramp import ScramClient
    from scramp.utils import ScramException

    scram = ScramClient([mechanism], username, password)
    stage = 0

    def scram_step(server: bytes | None) -> bytes | None:
        nonlocal stage
        stage += 1
        try:
            if stage == 1:
                return str(scram.get_client_first()).encode()
            if stage == 2:
                assert server is not None
                scram.set_server_first(server.decode())
                return str(scram.get_client_final()).encode()
            assert server is not None
            scram.set_server_final(server.decode())
        except ScramException as e:
            raise AuthenticationError(f"SCRAM exchange failed: {e}") from e
        return None

    return scram_step


def client_security(get: Callable[[str], str], listener: Listener, mechanism_key: str) -> ClientSecurity | None:
    """The client side of `listener` (None for PLAINTEXT); `mechanism_key` names the mechanism to use
    (sasl.mechanism.inter.broker.protocol or sasl.mechanism.controller.protocol)."""
    protocol = listener.security_protocol
    if protocol == SecurityProtocol.PLAINTEXT:
        return None
    read = listener_key_reader(get, listener.name)
    context = client_context(read) if protocol.uses_tls else None
    mechanism, username, password = "", "", ""
    if protocol.uses_sasl:
        mechanism = get(mechanism_key)
        if mechanism not in CLIENT_MECHANISMS:
            raise ListenerConfigError(f"{mechanism_key}={mechanism} is not supported: use one of "
                                      f"{', '.join(CLIENT_MECHANISMS)}")
        jaas = _first(read, f"{mechanism.lower()}.sasl.jaas.config", "sasl.jaas.config")
        try:
            options = parse_jaas(jaas)[1] if jaas else {}
        except JaasConfigError as e:
            raise ListenerConfigError(f"listener {listener.name}: {e}") from e
        if mechanism == "OAUTHBEARER":
            oauth = oauth_login(options, lambda key: _first(read, f"oauthbearer.{key}", key),
                                f"listener {listener.name}")
            principal = str((oauth.unsecured_claims or {}).get(oauth.principal_claim, ""))
            return ClientSecurity(listener.name, context, mechanism, principal, "", oauth)
        username, password = options.get("username", ""), options.get("password", "")
        if not username:
            raise ListenerConfigError(f"listener {listener.name}: the broker's own {mechanism} login needs "
                                      f"username and password in listener.name.{listener.name.lower()}."
                                      f"{mechanism.lower()}.sasl.jaas.config")
    return ClientSecurity(listener.name, context, mechanism, username, password)


def _first(read: Callable[[str], str], *keys: str) -> str:
    for key in keys:
        try:
            value = read(key)
        except KeyError:
            continue
        if value:
            return value
    return ""


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """How this broker reaches the others' inter-broker listener (replica fetch, markers, commit bounds)."""
    listener = inter_broker_listener(config, broker_listeners(config))
    return client_security(config.get, listener, "sasl.mechanism.inter.broker.protocol")


def controller_security(config: BrokerConfig) -> ClientSecurity | None:
    """How this node reaches the controllers' listener (Raft, registration, heartbeats, forwarding)."""
    listener = controller_listener(config, ("", 0))
    return None if listener is None else client_security(config.get, listener, "sasl.mechanism.controller.protocol")


# Kafka client defaults for the keys a client properties file may leave out.
_CLIENT_DEFAULTS = {"ssl.enabled.protocols": "TLSv1.2,TLSv1.3", "ssl.endpoint.identification.algorithm": "https",
                    "ssl.cipher.suites": "", "ssl.truststore.type": "PEM", "ssl.keystore.type": "PEM"}


def client_security_from_properties(properties: Mapping[str, str], source: str) -> ClientSecurity | None:
    """A client's security from Kafka client properties (kafka-*.sh --command-config): security.protocol,
    ssl.truststore.* / ssl.keystore.* (PEM or PKCS12), sasl.mechanism and sasl.jaas.config's username and
    password; librdkafka's ssl.ca.location, ssl.certificate.location + ssl.key.location and sasl.username /
    sasl.password are read too. None for PLAINTEXT; ListenerConfigError naming `source` for what cannot be used."""
    props = dict(properties)
    if "ssl.ca.location" in props and "ssl.truststore.location" not in props:
        props["ssl.truststore.location"] = props["ssl.ca.location"]
    if "ssl.certificate.location" in props and "ssl.keystore.location" not in props:
        props["ssl.keystore.certificate.chain"] = Path(props["ssl.certificate.location"]).read_text()
        props["ssl.keystore.key"] = Path(props.get("ssl.key.location", props["ssl.certificate.location"])).read_text()
    for kind in ("keystore", "truststore"):
        location = props.get(f"ssl.{kind}.location", "")
        if f"ssl.{kind}.type" not in props and location.endswith((".p12", ".pfx")):
            props[f"ssl.{kind}.type"] = "PKCS12"
    protocol_name = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol_name not in SecurityProtocol.__members__:
        raise ListenerConfigError(f"{source}: security.protocol {protocol_name} is not one of "
                                  f"{', '.join(SecurityProtocol.__members__)}")
    protocol = SecurityProtocol[protocol_name]
    if protocol == SecurityProtocol.PLAINTEXT:
        return None

    def read(key: str) -> str:
        return props.get(key, _CLIENT_DEFAULTS.get(key, ""))

    context = client_context(read) if protocol.uses_tls else None
    mechanism, username, password = "", "", ""
    if protocol.uses_sasl:
        mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in CLIENT_MECHANISMS:
            raise ListenerConfigError(f"{source}: sasl.mechanism {mechanism} is not supported: use one of "
                                      f"{', '.join(CLIENT_MECHANISMS)}")
        try:
            options = parse_jaas(props["sasl.jaas.config"])[1] if props.get("sasl.jaas.config") else {}
        except JaasConfigError as e:
            raise ListenerConfigError(f"{source}: {e}") from e
        if mechanism == "OAUTHBEARER":
            oauth = oauth_login(options, lambda key: props.get(key, ""), source)
            principal = str((oauth.unsecured_claims or {}).get(oauth.principal_claim, ""))
            return ClientSecurity(protocol.name, context, mechanism, principal, "", oauth)
        username = options.get("username", props.get("sasl.username", ""))
        password = options.get("password", props.get("sasl.password", ""))
        if not username:
            raise ListenerConfigError(f"{source}: {mechanism} needs a username: sasl.jaas.config's username=\"...\" "
                                      "password=\"...\" (or sasl.username / sasl.password)")
    return ClientSecurity(protocol.name, context, mechanism, username, password)
