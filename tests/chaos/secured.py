"""The chaos suite's secured variant: every listener but the harness's observer is TLS, and SASL where Kafka
would use it. Each node (in its netns lab namespace, so every node has the same ports) listens on:

    PLAINTEXT  9092  the harness's observer only: the leader watch's Metadata, CreateTopics, the SCRAM user
    CONTROLLER 9093  SSL, a client certificate required: Raft, broker registration and heartbeats, forwarding
    CLIENT     9094  SASL_SSL with SCRAM-SHA-512: every producer and consumer of the run, and the drain
    INTERNAL   9095  SASL_SSL with PLAIN as user "broker": replica fetch

The inter-broker login is PLAIN from the JAAS config, not SCRAM, because SCRAM credentials live in the
metadata log: a broker checks them only once it has caught up, and a follower must be able to log in
before that. The client user is made with AlterUserScramCredentials once the cluster is up, and the run
starts when every node accepts it. One certificate (from dev_ca) names every node's address.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.cluster_harness import Cluster

from samsa.broker.client import Connection, KafkaClientError
from samsa.broker.security.client import ClientSecurity
from samsa.broker.security.dev_ca import issue, make_ca
from samsa.broker.security.scram import ScramMechanism, credential_from_password, salted_password

CLIENT_PORT = 9094
INTERNAL_PORT = 9095
CLIENT_USER, CLIENT_PASSWORD = "chaos-client", "chaos-client-secret"
BROKER_LOGIN = 'username="broker" password="broker-secret" user_broker="broker-secret"'
SCRAM_ITERATIONS = 4096
USER_VISIBLE_BOUND_S = 30.0  # every node accepts the new SCRAM user within this
PROBE_TIMEOUT_S = 5.0


class SecuredSetupError(AssertionError):
    """The secured cluster could not be made ready (the message says which node and why)."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What every client of a run adds to its own config: librdkafka's keys and kafka-python's arguments.
    Empty: PLAINTEXT, as the unsecured runs."""

    librdkafka: Mapping[str, str] = field(default_factory=dict)
    kafka_python: Mapping[str, Any] = field(default_factory=dict)
    note: str = "PLAINTEXT everywhere"


PLAINTEXT = ClientSettings()


@dataclass(frozen=True, slots=True)
class SecuredSetup:
    ca: Path
    overrides: tuple[str, ...]
    settings: ClientSettings

    @classmethod
    def create(cls, directory: Path, hosts: Sequence[str]) -> SecuredSetup:
        """Certificates in `directory` (a CA, one node certificate valid for every host) and the nodes' config."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = make_ca(directory)
        node = issue(directory, "node", "chaos-node", organization="Samsa", hosts=tuple(hosts))
        overrides = (
            f"listeners=PLAINTEXT://0.0.0.0:9092,CLIENT://0.0.0.0:{CLIENT_PORT},INTERNAL://0.0.0.0:{INTERNAL_PORT}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SSL",
            "inter.broker.listener.name=INTERNAL", "controller.listener.names=CONTROLLER",
            "sasl.enabled.mechanisms=SCRAM-SHA-512", "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "listener.name.internal.plain.sasl.jaas.config="
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {BROKER_LOGIN};",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={node.key_and_chain}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={ca}",
            "listener.name.controller.ssl.client.auth=required",
        )
        settings = ClientSettings(
            librdkafka={"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
                        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": CLIENT_USER,
                        "sasl.password": CLIENT_PASSWORD},
            kafka_python={"security_protocol": "SASL_SSL", "ssl_cafile": str(ca), "sasl_mechanism": "SCRAM-SHA-512",
                          "sasl_plain_username": CLIENT_USER, "sasl_plain_password": CLIENT_PASSWORD},
            note=f"clients SASL_SSL SCRAM-SHA-512 as {CLIENT_USER} (:{CLIENT_PORT}); inter-broker SASL_SSL PLAIN "
                 f"(:{INTERNAL_PORT}); controller SSL with client certificates; PLAINTEXT :9092 for the observer")
        return cls(ca, overrides, settings)

    def bootstrap(self, cluster: Cluster) -> str:
        return ",".join(f"{cluster.host(n)}:{CLIENT_PORT}" for n in cluster.node_ids)

    def client_security(self) -> ClientSecurity:
        return ClientSecurity("CLIENT", ssl.create_default_context(cafile=str(self.ca)), "SCRAM-SHA-512",
                              CLIENT_USER, CLIENT_PASSWORD)

    def prepare(self, cluster: Cluster) -> float:
        """Make the clients' SCRAM user (AlterUserScramCredentials, as kafka-configs sends it), then wait until
        every node lets it in on CLIENT; the seconds that took."""
        started = time.monotonic()
        mechanism = ScramMechanism.SCRAM_SHA_512
        salt = credential_from_password(mechanism, CLIENT_PASSWORD, SCRAM_ITERATIONS).salt
        with cluster.connect(cluster.node_ids[0], 30.0) as admin:
            r = admin.request(51, {"deletions": (), "upsertions": [{
                "name": CLIENT_USER, "mechanism": int(mechanism), "iterations": SCRAM_ITERATIONS, "salt": salt,
                "salted_password": salted_password(mechanism, CLIENT_PASSWORD, salt, SCRAM_ITERATIONS)}]})
        [result] = r.results
        if result.error_code.value != 0:
            raise SecuredSetupError(f"AlterUserScramCredentials {CLIENT_USER}: {result.error_code.name} "
                                    f"{result.error_message}")
        for node_id in cluster.node_ids:
            why = ""
            while not (why := self._login(cluster, node_id)) == "":
                if time.monotonic() - started > USER_VISIBLE_BOUND_S:
                    raise SecuredSetupError(f"node {node_id} did not let {CLIENT_USER} in on CLIENT within "
                                            f"{USER_VISIBLE_BOUND_S:.0f} s: {why}")
                time.sleep(0.2)
        return time.monotonic() - started

    def _login(self, cluster: Cluster, node_id: int) -> str:
        """'' when the client user logs in on node_id's CLIENT listener and Metadata answers, else why not."""
        try:
            with Connection(cluster.host(node_id), CLIENT_PORT, client_id="chaos-secured-probe",
                            timeout_s=PROBE_TIMEOUT_S, security=self.client_security()) as conn:
                conn.request(3, {"topics": [], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        except (OSError, KafkaClientError) as e:
            return str(e) or type(e).__name__
        return ""
