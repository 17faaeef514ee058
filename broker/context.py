"""What a request handler sees (the request header, the broker's state, the time) and what it declares (ApiSpec)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.kproto.messages import RequestHeader

if TYPE_CHECKING:
    from samsa.broker.broker import Broker


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One Kafka API a handler module implements: its api_key and the version range it answers.

    Declared beside the module's version notes; broker.handlers builds the dispatch table (and so
    what ApiVersions advertises) from these declarations only.
    """

    key: int
    min_version: int
    max_version: int

    def __post_init__(self) -> None:
        if not 0 <= self.min_version <= self.max_version:
            raise ValueError(f"api_key {self.key}: bad version range v{self.min_version}-v{self.max_version}")


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str
    now_ms: int
    controller_plane: bool = False  # arrived on the controller listener
    # Who sent it (Kafka's KafkaPrincipal as "type:name"): set by the connection once the listener's
    # security (TLS client certificate, SASL) has authenticated the client; anonymous on PLAINTEXT.
    principal: str = "User:ANONYMOUS"
    listener_name: str = "PLAINTEXT"
    # An ApiVersions a SASL listener answers before the client authenticated (Kafka's SaslServerAuthenticator
    # answers it itself, without KafkaApis' checks).
    sasl_authenticating: bool = False

    @property
    def version(self) -> int:
        return self.header.api_version
