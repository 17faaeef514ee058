"""Kafka's own tools and Java client (the reference version's jars) against a secured Samsa: SCRAM users made with
kafka-configs, then the console producer and consumer over SASL_SSL (SCRAM-SHA-512, PEM trust store) and
over SSL with a client certificate, configured exactly as for Apache Kafka."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "security"))

import security_harness
from oracle_fixture import LIB_DIR, QUICK_JVM_OPTS, run_kafka_tool
from security_harness import PLAIN_USERS, RawClient, SecuredBroker, logged_principals

# The security tests' fixtures: test certificates and a broker with secured listeners.
certs = security_harness.certs
secured_broker = security_harness.secured_broker

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOPICS = "org.apache.kafka.tools.TopicCommand"

pytestmark = pytest.mark.skipif(not any(LIB_DIR.glob("kafka-clients-*.jar")),
                                reason=f"no Kafka jars in {LIB_DIR}: run `make compat-deps`")


def tool(main_class: str, *args: str, input: str | None = None) -> str:
    return run_kafka_tool(main_class, *args, input=input, jvm_opts=QUICK_JVM_OPTS, timeout=120).stdout


def _properties(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def test_kafka_configs_scram_user_then_console_clients_over_sasl_ssl(secured_broker: SecuredBroker,
                                                                      tmp_path: Path) -> None:
    plaintext = secured_broker.bootstrap("PLAINTEXT")
    tool(CONFIGS, "--bootstrap-server", plaintext, "--alter", "--add-config", "SCRAM-SHA-512=[password=erin-secret]",
         "--entity-type", "users", "--entity-name", "erin")
    # (kafka-configs --describe --entity-type users also asks DescribeClientQuotas, which Samsa does not
    # implement: the credential is read back with DescribeUserScramCredentials instead.)
    with RawClient(secured_broker.ports["PLAINTEXT"]) as admin:
        [described] = admin.request(50, 0, {"users": [{"name": "erin"}]}).results
    assert [(c.mechanism, c.iterations) for c in described.credential_infos] == [(2, 4096)]
    client = _properties(tmp_path / "client.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="erin" '
                            'password="erin-secret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(secured_broker.certs.ca)})
    sasl_ssl = secured_broker.bootstrap("SASL_SSL")
    topic = f"java-scram-{uuid.uuid4().hex[:6]}"
    tool(TOPICS, "--bootstrap-server", sasl_ssl, "--command-config", str(client), "--create", "--topic", topic,
         "--partitions", "1", "--replication-factor", "1")
    tool(PRODUCER, "--bootstrap-server", sasl_ssl, "--topic", topic, "--command-config", str(client),
         "--command-property", f"client.id={topic}", input="one\ntwo\nthree\n")
    consumed = tool(CONSUMER, "--bootstrap-server", sasl_ssl, "--topic", topic, "--command-config", str(client),
                    "--group", f"g-{topic}", "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000")
    assert consumed.split() == ["one", "two", "three"]
    assert logged_principals(secured_broker, topic) == {("User:erin", "SASL_SSL")}


def test_console_clients_over_ssl_with_a_pem_client_certificate(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    certs_ = secured_broker.certs
    client = _properties(tmp_path / "ssl.properties", {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs_.ca),
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs_.client.pkcs12),
        "ssl.keystore.password": "changeit"})
    ssl_bootstrap = secured_broker.bootstrap("SSL")
    topic = f"java-ssl-{uuid.uuid4().hex[:6]}"
    tool(PRODUCER, "--bootstrap-server", ssl_bootstrap, "--topic", topic, "--command-config", str(client),
         "--command-property", f"client.id={topic}", input="a\nb\n")
    consumed = tool(CONSUMER, "--bootstrap-server", ssl_bootstrap, "--topic", topic, "--command-config", str(client),
                    "--group", f"g-{topic}", "--command-property", f"client.id={topic}", "--from-beginning",
                    "--max-messages", "2", "--timeout-ms", "30000")
    assert consumed.split() == ["a", "b"]
    assert logged_principals(secured_broker, topic) == {("User:CN=client-app,O=Acme", "SSL")}
    assert logged_principals(secured_broker, topic, "JoinGroup") == {("User:CN=client-app,O=Acme", "SSL")}


def test_console_clients_with_a_consumer_group_over_sasl_plaintext_with_plain(secured_broker: SecuredBroker,
                                                                               tmp_path: Path) -> None:
    client = _properties(tmp_path / "plain.properties", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
                            f'password="{PLAIN_USERS["alice"]}";'})
    bootstrap = secured_broker.bootstrap("SASL_PLAINTEXT")
    topic = f"java-plain-{uuid.uuid4().hex[:6]}"
    tool(PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, "--command-config", str(client),
         "--command-property", f"client.id={topic}", input="x\ny\nz\n")
    consumed = tool(CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--command-config", str(client),
                    "--group", f"g-{topic}", "--command-property", f"client.id={topic}", "--from-beginning",
                    "--max-messages", "3", "--timeout-ms", "30000")
    assert consumed.split() == ["x", "y", "z"]
    assert logged_principals(secured_broker, topic) == {("User:alice", "SASL_PLAINTEXT")}
    assert logged_principals(secured_broker, topic, "OffsetCommit") == {("User:alice", "SASL_PLAINTEXT")}
    # The group committed where it stopped (the console consumer commits on close), read on the setup listener.
    with RawClient(secured_broker.ports["PLAINTEXT"]) as admin:
        fetched = admin.request(9, 7, {"group_id": f"g-{topic}", "topics": [{"name": topic,
                                                                            "partition_indexes": [0]}]})
    assert [p.committed_offset for p in fetched.topics[0].partitions] == [3]
