"""The broker's listeners: names, addresses, what each advertises and its security protocol.

Kafka's rules (SocketServerConfigs, KafkaConfig.listeners): `listeners` is NAME://host:port items; each
name's protocol comes from `listener.security.protocol.map` (a name that is itself a protocol needs no
entry in a custom map); `advertised.listeners` names what clients are told per listener, defaulting to
the listener's own address; `controller.listener.names` are the quorum's listeners (not client
listeners); the inter-broker listener is `inter.broker.listener.name`, else the first listener whose
protocol is `security.inter.broker.protocol`. Names compare upper-cased (ListenerName.normalised).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

_ENDPOINT = re.compile(r"([A-Za-z0-9_]+)://(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):([0-9]+)")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


class SecurityProtocol(IntEnum):
    """Kafka's SecurityProtocol ids (BrokerRegistration's listeners carry them)."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class ListenerConfigError(ValueError):
    """Listener configuration the broker cannot start with; str() says which key and why."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper-cased
    host: str  # where it binds ("0.0.0.0" for all addresses)
    port: int
    security_protocol: SecurityProtocol
    advertised_host: str
    advertised_port: int


class ConfigSource(Protocol):
    """What listener parsing reads of the broker config (BrokerConfig is one)."""

    @property
    def listen_host(self) -> str: ...
    @property
    def listen_port(self) -> int: ...
    @property
    def advertised_host(self) -> str: ...
    @property
    def advertised_port(self) -> int: ...

    def get(self, key: str) -> str: ...


def parse_endpoints(text: str, key: str = "listeners") -> list[tuple[str, str, int]]:
    """NAME://host:port items as (upper-cased name, host, port); host "" stays "" (all addresses)."""
    found: list[tuple[str, str, int]] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.fullmatch(item)
        if match is None:
            raise ListenerConfigError(f"{key}: unable to parse {item} to a broker endpoint")
        name = match.group(1).upper()
        if any(name == other for other, _h, _p in found):
            raise ListenerConfigError(f"{key}: each listener must have a different name, {name} is repeated")
        found.append((name, match.group(2).strip("[]"), int(match.group(3))))
    return found


def protocol_map(config: ConfigSource) -> dict[str, SecurityProtocol]:
    mapping: dict[str, SecurityProtocol] = {}
    for item in (i.strip() for i in (config.get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP).split(",")):
        if item:
            name, _, protocol = item.partition(":")
            mapping[name.strip().upper()] = SecurityProtocol[protocol.strip().upper()]
    return mapping


def security_protocol_of(config: ConfigSource, name: str) -> SecurityProtocol:
    mapping = protocol_map(config)
    if name in mapping:
        return mapping[name]
    if name in SecurityProtocol.__members__:
        return SecurityProtocol[name]
    raise ListenerConfigError(f"listener.security.protocol.map: no security protocol defined for listener {name}")


def controller_listener_names(config: ConfigSource) -> frozenset[str]:
    return frozenset(n.strip().upper() for n in config.get("controller.listener.names").split(",") if n.strip())


def broker_listeners(config: ConfigSource) -> tuple[Listener, ...]:
    """The client and inter-broker listeners, in `listeners` order. The first one binds where `samsa serve
    --listen` said and advertises what `--advertise` said (config.listen_host / advertised_host)."""
    controllers = controller_listener_names(config)
    items = [e for e in parse_endpoints(config.get("listeners")) if e[0] not in controllers]
    if not items:
        items = [("PLAINTEXT", config.listen_host, config.listen_port)]
    advertised = {name: (host, port) for name, host, port in
                  parse_endpoints(config.get("advertised.listeners"), "advertised.listeners")}
    listeners: list[Listener] = []
    for index, (name, host, port) in enumerate(items):
        if index == 0:
            host, port = config.listen_host, config.listen_port
            adv_host, adv_port = config.advertised_host, config.advertised_port
        elif name in advertised:
            adv_host, adv_port = advertised[name]
        else:
            adv_host, adv_port = (host if host not in ("", "0.0.0.0", "::") else config.advertised_host), port
        listeners.append(Listener(name, host or "0.0.0.0", port, security_protocol_of(config, name), adv_host,
                                  adv_port))
    return tuple(listeners)


def controller_listener(config: ConfigSource, address: tuple[str, int]) -> Listener | None:
    """The controller listener at `address` (samsa.controller.listen / this voter's quorum address): the
    first of controller.listener.names with its protocol from the map; None when no name is configured
    (Samsa's controller listener is then PLAINTEXT)."""
    names = [n.strip().upper() for n in config.get("controller.listener.names").split(",") if n.strip()]
    if not names:
        return None
    host, port = address
    return Listener(names[0], host, port, security_protocol_of(config, names[0]), host, port)


def inter_broker_listener(config: ConfigSource, listeners: tuple[Listener, ...]) -> Listener:
    """inter.broker.listener.name, else the first listener of security.inter.broker.protocol (Kafka's
    rule), else the first listener."""
    name = config.get("inter.broker.listener.name").strip().upper()
    if name:
        for listener in listeners:
            if listener.name == name:
                return listener
        raise ListenerConfigError(f"inter.broker.listener.name must be a listener name defined in listeners: {name}")
    protocol = SecurityProtocol[(config.get("security.inter.broker.protocol") or "PLAINTEXT").upper()]
    for listener in listeners:
        if listener.security_protocol == protocol:
            return listener
    return listeners[0]


_last: tuple[object, tuple[Listener, ...]] | None = None  # the last config parsed, and its listeners


def advertised_endpoint(config: ConfigSource, listener_name: str) -> tuple[str, int] | None:
    """What this broker advertises on listener `listener_name` (None if it has no such listener)."""
    global _last
    if _last is None or _last[0] is not config:
        _last = (config, broker_listeners(config))
    for listener in _last[1]:
        if listener.name == listener_name:
            return listener.advertised_host, listener.advertised_port
    return None


class RegisteredEndpoints(Protocol):
    """What endpoint_on reads of the metadata image (MetadataImage is one)."""

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None: ...


def endpoint_on(config: ConfigSource, image: RegisteredEndpoints, own_node_id: int, listener_name: str,
                node_id: int, host: str, port: int) -> tuple[str, int]:
    """Where a client on listener `listener_name` reaches node `node_id`, registered at host:port (its
    inter-broker listener): Kafka's rule, Metadata answers with the endpoints of the listener the request
    came in on. This node's come from its config, the others' from their registration; a broker that did
    not register that listener is given as registered."""
    if node_id == own_node_id:
        found = advertised_endpoint(config, listener_name)
    else:
        found = image.endpoint(node_id, listener_name)
    return found if found is not None else (host, port)
