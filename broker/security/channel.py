"""A listener's security (its TLS context, SASL mechanisms and users) and each connection's part of it.

`ListenerSecurity` is built once per listener from the broker config (ListenerConfigError if it cannot
be used, so the broker refuses to start rather than serve a half-secured listener). `ChannelSecurity`
is one connection's: its principal (the client certificate's on SSL, the SASL user's on SASL_*,
User:ANONYMOUS otherwise) and, on a SASL listener, the authenticator that answers frames until the
client has authenticated (Kafka's KafkaChannel with its Authenticator).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.security.authenticator import SaslAuthenticator, State
from samsa.broker.security.listeners import Listener, ListenerConfigError
from samsa.broker.security.oauthbearer import MECHANISM as OAUTHBEARER
from samsa.broker.security.oauthbearer import (
    OAuthBearerServer,
    TokenValidator,
    UnsecuredValidator,
    validator_from_config,
)
from samsa.broker.security.sasl import (
    SUPPORTED_MECHANISMS,
    JaasConfigError,
    MechanismServer,
    mechanism_server,
    parse_jaas,
    plain_users,
)
from samsa.broker.security.scram import ScramCredential, ScramMechanism, from_record
from samsa.broker.security.tls import (
    MappingRule,
    listener_key_reader,
    parse_mapping_rules,
    server_context,
    ssl_principal,
)
from samsa.kproto.errors import ProtocolError

logger = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
# Credentials for SCRAM come from the current metadata image: (mechanism, user) -> credential or None.
ScramLookup = Callable[[ScramMechanism, str], ScramCredential | None]
# What a SASL listener can offer: the inter-broker client's mechanisms, and OAUTHBEARER (server side only).
SERVER_MECHANISMS = (*SUPPORTED_MECHANISMS, OAUTHBEARER)


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    listener: Listener
    ssl_context: ssl.SSLContext | None
    mapping_rules: tuple[MappingRule, ...]
    mechanisms: tuple[str, ...]  # enabled and supported; empty unless SASL
    plain_users: Mapping[str, str]
    reauth_ms: int
    max_receive_bytes: int  # sasl.server.max.receive.size: the frame limit before authentication
    oauthbearer: TokenValidator | None = None  # when OAUTHBEARER is offered

    @staticmethod
    def from_config(config: BrokerConfig, listener: Listener) -> ListenerSecurity:
        read = listener_key_reader(config.get, listener.name)
        protocol = listener.security_protocol
        context = server_context(read) if protocol.uses_tls else None
        rules = parse_mapping_rules(read("ssl.principal.mapping.rules"))
        mechanisms: tuple[str, ...] = ()
        users: dict[str, str] = {}
        if protocol.uses_sasl:
            enabled = [m.strip() for m in read("sasl.enabled.mechanisms").split(",") if m.strip()]
            unsupported = [m for m in enabled if m not in SERVER_MECHANISMS]
            if unsupported:
                logger.warning("listener %s: SASL mechanisms %s are not supported by Samsa and are not offered",
                               listener.name, ", ".join(unsupported))
            mechanisms = tuple(m for m in enabled if m in SERVER_MECHANISMS)
            if not mechanisms:
                raise ListenerConfigError(f"listener {listener.name} ({protocol.name}) has no supported SASL mechanism:"
                                          f" set sasl.enabled.mechanisms to some of {', '.join(SERVER_MECHANISMS)}")
            if "PLAIN" in mechanisms:
                jaas = read("plain.sasl.jaas.config") if _has(config, listener, "plain.sasl.jaas.config") \
                    else read("sasl.jaas.config")
                try:
                    users = plain_users(jaas)
                except JaasConfigError as e:
                    raise ListenerConfigError(f"listener {listener.name}: {e}") from e
                if not users:
                    logger.warning("listener %s offers PLAIN but its JAAS config names no user_<name> entries",
                                   listener.name)
        validator = _oauthbearer_validator(config, listener, read) if OAUTHBEARER in mechanisms else None
        return ListenerSecurity(listener, context, rules, mechanisms, users, int(read("connections.max.reauth.ms")),
                                int(read("sasl.server.max.receive.size")), validator)


def _oauthbearer_validator(config: BrokerConfig, listener: Listener, read: Callable[[str], str]) -> TokenValidator:
    """The listener's OAUTHBEARER validator; keys are read as listener.name.<l>.oauthbearer.<key>, then
    listener.name.<l>.<key>, then <key> (Kafka's mechanism and listener prefixes)."""

    def read_mechanism(key: str) -> str:
        prefixed = f"oauthbearer.{key}"
        return read(prefixed) if _has(config, listener, prefixed) else read(key)

    try:
        jaas = read_mechanism("sasl.jaas.config")
        options = parse_jaas(jaas)[1] if jaas else {}
        validator = validator_from_config(read_mechanism, options)
    except ValueError as e:  # (JaasConfigError, and a JWKS that cannot be read, are ValueErrors)
        raise ListenerConfigError(f"listener {listener.name}: OAUTHBEARER: {e}") from e
    if isinstance(validator, UnsecuredValidator):
        logger.warning("listener %s accepts unsecured OAUTHBEARER tokens (alg none, not signed: anyone can claim any "
                       "principal), for tests only; set sasl.oauthbearer.jwks.endpoint.url for signed tokens",
                       listener.name)
    return validator


def _has(config: BrokerConfig, listener: Listener, key: str) -> bool:
    try:
        return bool(config.get(f"listener.name.{listener.name.lower()}.{key}"))
    except KeyError:
        return False


class ChannelSecurity:
    """One connection's principal and authentication state."""

    def __init__(self, security: ListenerSecurity, scram_lookup: ScramLookup) -> None:
        self.security = security
        self._scram_lookup = scram_lookup
        self._ssl_principal: str | None = None
        self.authenticator: SaslAuthenticator | None = None
        if security.mechanisms:
            self.authenticator = SaslAuthenticator(security.mechanisms, self._mechanism, reauth_ms=security.reauth_ms)

    def _mechanism(self, name: str) -> MechanismServer:
        if name == OAUTHBEARER and self.security.oauthbearer is not None:
            return OAuthBearerServer(self.security.oauthbearer)
        return mechanism_server(name, lambda: self.security.plain_users, self._scram_lookup)

    def connected(self, peer_certificate: bytes | None) -> None:
        """The TLS handshake is done (or there is none): take the client certificate's principal."""
        if self.security.ssl_context is None:
            return
        principal = ssl_principal(peer_certificate, self.security.mapping_rules)
        if principal is None:
            raise ProtocolError("no ssl.principal.mapping.rules rule matches the client certificate's name")
        self._ssl_principal = principal

    @property
    def authenticated(self) -> bool:
        return self.authenticator is None or self.authenticator.authenticated

    @property
    def principal(self) -> str:
        if self.authenticator is not None:
            return self.authenticator.principal
        return self._ssl_principal or ANONYMOUS

    @property
    def failed(self) -> bool:
        return self.authenticator is not None and self.authenticator.state == State.FAILED


def scram_lookup_from(image_of: Callable[[], MetadataImage]) -> ScramLookup:
    """A ScramLookup reading the broker's current metadata image (its scram_credentials)."""

    def lookup(mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        record = image_of().scram_credentials.get((user, int(mechanism)))
        return None if record is None else from_record(record)

    return lookup
