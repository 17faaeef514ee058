"""The pure parts of broker/security: listeners, JAAS, principal mapping rules, TLS contexts from stores."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from samsa.broker.config import BrokerConfig, check_static_config
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.security.channel import ListenerSecurity
from samsa.broker.security.dev_ca import issue, make_ca
from samsa.broker.security.listeners import (
    ListenerConfigError,
    SecurityProtocol,
    broker_listeners,
    endpoint_on,
    inter_broker_listener,
)
from samsa.broker.security.sasl import JaasConfigError, PlainServer, SaslAuthenticationFailed, parse_jaas, plain_users
from samsa.broker.security.tls import distinguished_name, listener_key_reader, parse_mapping_rules, server_context


def _config(**overrides: str) -> BrokerConfig:
    return BrokerConfig(overrides={k.replace("_", "."): v for k, v in overrides.items()}, listen_host="127.0.0.1",
                        listen_port=9092, advertised_host="kafka.example", advertised_port=9092)


def test_listeners_take_protocols_from_the_map_and_advertise_per_name() -> None:
    config = BrokerConfig(overrides={
        "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093,CONTROLLER://127.0.0.1:9094",
        "advertised.listeners": "INTERNAL://10.0.0.1:9092,EXTERNAL://public.example:19093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "INTERNAL",
    }, listen_host="127.0.0.1", listen_port=9092, advertised_host="10.0.0.1", advertised_port=9092)
    listeners = broker_listeners(config)
    assert [(item.name, item.security_protocol, item.advertised_host, item.advertised_port) for item in listeners] == [
        ("INTERNAL", SecurityProtocol.PLAINTEXT, "10.0.0.1", 9092),
        ("EXTERNAL", SecurityProtocol.SASL_SSL, "public.example", 19093)]
    assert inter_broker_listener(config, listeners).name == "INTERNAL"
    image = MetadataImage(broker_endpoints={2: "INTERNAL://h2:9092,EXTERNAL://public2.example:19093"})
    assert endpoint_on(config, image, 1, "EXTERNAL", 1, "10.0.0.1", 9092) == ("public.example", 19093)
    assert endpoint_on(config, image, 1, "EXTERNAL", 2, "h2", 9092) == ("public2.example", 19093)
    assert endpoint_on(config, image, 1, "EXTERNAL", 3, "h3", 9092) == ("h3", 9092)  # no listeners registered


def test_a_listener_without_a_protocol_is_refused() -> None:
    config = BrokerConfig(overrides={"listeners": "PLAINTEXT://:9092,CLIENTS://:9093",
                                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})
    with pytest.raises(ListenerConfigError, match="no security protocol defined for listener CLIENTS"):
        broker_listeners(config)


def test_security_keys_are_checked_at_start_including_per_listener_ones() -> None:
    report = check_static_config({"ssl.client.auth": "maybe", "listener.name.sasl_ssl.ssl.client.auth": "required",
                                  "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "x",
                                  "ssl.enabled.protocols": "TLSv1.2,SSLv3"})
    assert len(report.errors) == 2 and not report.warnings
    assert "ssl.client.auth" in report.errors[0] and "SSLv3" in report.errors[1]


def test_jaas_options_quoted_and_escaped() -> None:
    module, options = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 'username="admin" password="a\\"b;c" user_admin="a\\"b;c" user_bob=bob-pw;')
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options == {"username": "admin", "password": 'a"b;c', "user_admin": 'a"b;c', "user_bob": "bob-pw"}
    assert plain_users('x.PlainLoginModule required user_a="1";') == {"a": "1"}
    with pytest.raises(JaasConfigError):
        parse_jaas("PlainLoginModule user_a=1")


def test_plain_refuses_a_different_authorization_id() -> None:
    server = PlainServer({"alice": "pw"})
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        server.evaluate(b"admin\0alice\0pw")
    server.evaluate(b"alice\0alice\0pw")
    assert server.complete and server.principal == "User:alice"


def test_mapping_rules_rewrite_the_distinguished_name() -> None:
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),O=Acme$/acme-$1/,DEFAULT")

    def apply(dn: str) -> str | None:
        return next((n for n in (r.apply(dn) for r in rules) if n is not None), None)
    assert apply("CN=Kafka-Broker,OU=ServiceUsers,O=Org") == "kafka-broker"
    assert apply("CN=app,O=Acme") == "acme-app"
    assert apply("CN=other,O=Else") == "CN=other,O=Else"
    only = parse_mapping_rules("RULE:^CN=(.*)$/$1/U")
    assert only[0].apply("CN=x,O=y") == "X,O=Y" and parse_mapping_rules("")[0].apply("CN=a") == "CN=a"
    with pytest.raises(ListenerConfigError):
        parse_mapping_rules("RULE:nothing-closed")


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ca")
    make_ca(directory)
    issue(directory, "server", "localhost", organization="Samsa")
    return directory


def test_server_contexts_from_pem_text_and_pkcs12(ca: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    pem_text = _config(ssl_keystore_type="PEM", ssl_keystore_certificate_chain=(ca / "server.crt").read_text(),
                       ssl_keystore_key=(ca / "server.key").read_text(),
                       ssl_truststore_type="PEM", ssl_truststore_location=str(ca / "ca.pem"),
                       ssl_client_auth="requested", ssl_enabled_protocols="TLSv1.3")
    context = server_context(listener_key_reader(pem_text.get, "SSL"))
    assert context.verify_mode == ssl.CERT_OPTIONAL and context.minimum_version == ssl.TLSVersion.TLSv1_3
    pkcs12 = _config(ssl_keystore_type="PKCS12", ssl_keystore_location=str(ca / "server.p12"),
                     ssl_keystore_password="changeit", ssl_truststore_type="PKCS12",
                     ssl_truststore_location=str(ca / "server.p12"), ssl_truststore_password="changeit")
    assert server_context(listener_key_reader(pkcs12.get, "SSL")).verify_mode == ssl.CERT_NONE
    der = x509.load_pem_x509_certificate((ca / "server.crt").read_bytes()).public_bytes(Encoding.DER)
    assert distinguished_name(der) == "CN=localhost,O=Samsa"


def test_unusable_stores_stop_the_listener_with_a_reason(ca: Path) -> None:
    jks = _config(listeners="SSL://:9093", ssl_keystore_location=str(ca / "server.pem"))  # type JKS by default
    with pytest.raises(ListenerConfigError, match=r"ssl\.keystore\.type JKS is not supported"):
        ListenerSecurity.from_config(jks, broker_listeners(jks)[0])
    missing = _config(listeners="SSL://:9093")
    with pytest.raises(ListenerConfigError, match=r"needs ssl\.keystore\.location"):
        ListenerSecurity.from_config(missing, broker_listeners(missing)[0])
    no_trust = _config(listeners="SSL://:9093", ssl_keystore_type="PEM", ssl_keystore_location=str(ca / "server.pem"),
                       ssl_client_auth="required")
    with pytest.raises(ListenerConfigError, match="needs a trust store"):
        ListenerSecurity.from_config(no_trust, broker_listeners(no_trust)[0])
    no_mechanism = _config(listeners="SASL_PLAINTEXT://:9093")  # sasl.enabled.mechanisms: GSSAPI by default
    with pytest.raises(ListenerConfigError, match="no supported SASL mechanism"):
        ListenerSecurity.from_config(no_mechanism, broker_listeners(no_mechanism)[0])
