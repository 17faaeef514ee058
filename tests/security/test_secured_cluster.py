"""A 3-node cluster whose inter-broker listener is SASL_SSL (PLAIN) and whose controller listener is SSL
with client certificates: replica fetch, Raft, broker registration and heartbeats all go over them, and
clients on the PLAINTEXT listener are told every broker's PLAINTEXT address (Kafka's per-listener rule).
A second cluster does the same with OAUTHBEARER on both: unsecured tokens between brokers, and tokens
signed by an identity provider (read from a file, checked against its JWKS) towards the controllers."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from oauth_tokens import AUDIENCE, ISSUER, Issuer, make_issuer
from security_harness import REPO

from samsa.broker import launcher
from samsa.broker.client import Connection
from samsa.broker.security.client import ClientSecurity
from samsa.broker.security.dev_ca import issue, make_ca

NODES = (1, 2, 3)
START_TIMEOUT_S = 90.0
BROKER_LOGIN = 'username="broker" password="broker-secret" user_broker="broker-secret"'
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OAUTH_PACKAGE = "org.apache.kafka.common.security.oauthbearer"


@dataclass
class Node:
    node_id: int
    plain: int
    internal: int
    controller: int
    ca: Path
    process: launcher.ServeProcess | None = None
    log_path: Path | None = None

    def log(self) -> str:
        assert self.log_path is not None
        return self.log_path.read_text(errors="replace")


def _wait(what: str, probe: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


Overrides = Callable[[Node, Path], tuple[str, ...]]


def _start_cluster(directory: Path, security: Overrides) -> Iterator[dict[int, Node]]:
    """Three nodes (broker and controller each) with `security`'s listener overrides; stopped by PID."""
    make_ca(directory / "tls")
    ports = launcher.free_ports(3 * len(NODES))
    ca = directory / "tls" / "ca.pem"
    nodes = {n: Node(n, ports[i], ports[len(NODES) + i], ports[2 * len(NODES) + i], ca) for i, n in enumerate(NODES)}
    quorum = ",".join(f"{n.node_id}@127.0.0.1:{n.controller}" for n in nodes.values())
    for node in nodes.values():
        files = issue(directory / "tls", f"node-{node.node_id}", f"node-{node.node_id}", organization="Samsa",
                      hosts=("127.0.0.1", "localhost"))
        overrides = (
            f"listeners=PLAINTEXT://127.0.0.1:{node.plain},INTERNAL://127.0.0.1:{node.internal}",
            "inter.broker.listener.name=INTERNAL", "controller.listener.names=CONTROLLER",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={files.key_and_chain}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={directory / 'tls' / 'ca.pem'}",
            "samsa.request.log.enable=true", "group.initial.rebalance.delay.ms=0",
            *security(node, directory),
        )
        node.log_path = directory / f"node-{node.node_id}.log"
        node.process = launcher.start_serve(launcher.ServeOptions(
            data_dir=directory / f"node-{node.node_id}", port=node.plain, node_id=node.node_id,
            controller_quorum=quorum, controller_listen=f"127.0.0.1:{node.controller}", overrides=overrides),
            node.log_path, cwd=REPO)
    try:
        for node in nodes.values():
            assert node.process is not None
            node.process.wait_listening(START_TIMEOUT_S)
        for node in nodes.values():
            _wait(f"node {node.node_id} to list every broker", lambda node=node: _brokers(node) == {
                n.node_id: n.plain for n in nodes.values()})
        yield nodes
    finally:
        launcher.stop_pids([launcher.owned(n.process.popen) for n in nodes.values() if n.process is not None])


def _plain_and_certificates(node: Node, directory: Path) -> tuple[str, ...]:
    return (
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL",
        "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
        "listener.name.internal.plain.sasl.jaas.config="
        f"org.apache.kafka.common.security.plain.PlainLoginModule required {BROKER_LOGIN};",
        "listener.name.controller.ssl.client.auth=required",
    )


def _oauthbearer(node: Node, directory: Path) -> tuple[str, ...]:
    """INTERNAL: SASL_SSL, unsecured tokens (Kafka's default login and validator handlers). CONTROLLER:
    SASL_PLAINTEXT, each node's RS256 token from a file (OAuthBearerLoginCallbackHandler with a file: token
    endpoint), checked against the identity provider's JWKS with audience and issuer."""
    issuer = _ISSUERS.get(directory)
    if issuer is None:  # one identity provider for the cluster: its JWKS is every controller's
        (directory / "idp").mkdir()
        issuer = _ISSUERS[directory] = make_issuer(directory / "idp")
    token_file = directory / f"node-{node.node_id}.jwt"
    token_file.write_text(issuer.token(f"controller-{node.node_id}") + "\n")
    return (
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol=OAUTHBEARER", "sasl.mechanism.controller.protocol=OAUTHBEARER",
        f'listener.name.internal.oauthbearer.sasl.jaas.config={OAUTH_MODULE} required '
        'unsecuredLoginStringClaim_sub="broker" unsecuredLoginExtension_traceId="node-' f'{node.node_id}";',
        f"listener.name.controller.oauthbearer.sasl.jaas.config={OAUTH_MODULE} required ;",
        "listener.name.controller.oauthbearer.sasl.server.callback.handler.class="
        f"{OAUTH_PACKAGE}.OAuthBearerValidatorCallbackHandler",
        f"listener.name.controller.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={issuer.jwks_url}",
        "listener.name.controller.oauthbearer.sasl.login.callback.handler.class="
        f"{OAUTH_PACKAGE}.OAuthBearerLoginCallbackHandler",
        f"listener.name.controller.oauthbearer.sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}",
        f"sasl.oauthbearer.expected.audience={AUDIENCE}", f"sasl.oauthbearer.expected.issuer={ISSUER}",
    )


_ISSUERS: dict[Path, Issuer] = {}


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Node]]:
    yield from _start_cluster(tmp_path_factory.mktemp("secured-cluster"), _plain_and_certificates)


@pytest.fixture(scope="module")
def oauth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Node]]:
    yield from _start_cluster(tmp_path_factory.mktemp("oauth-cluster"), _oauthbearer)


def _brokers(node: Node) -> dict[int, int] | None:
    try:
        with Connection("127.0.0.1", node.plain, timeout_s=3) as conn:
            r = conn.request(3, {"topics": [], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    except OSError:
        return None
    return {int(b.node_id): int(b.port) for b in r.brokers}


def _replicate_and_read_back(nodes: dict[int, Node], topic: str) -> None:
    """30 records to a 3-replica topic with min.insync.replicas 3 (acked only once both followers fetched
    them over INTERNAL), read back by a group consumer."""
    from kafka import KafkaConsumer, KafkaProducer

    bootstrap = ",".join(f"127.0.0.1:{n.plain}" for n in nodes.values())
    with Connection("127.0.0.1", nodes[1].plain) as admin:
        created = admin.request(19, {"topics": [{"name": topic, "num_partitions": 3, "replication_factor": 3,
                                                  "assignments": (), "configs": [{"name": "min.insync.replicas",
                                                                                  "value": "3"}]}],
                                     "timeout": 30_000, "validate_only": False})
    assert created.topics[0].error_code.value == 0, created.topics[0].error_message
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", client_id=f"{topic}-producer",
                             request_timeout_ms=30_000)
    for i in range(30):
        producer.send(topic, key=str(i).encode(), value=f"v{i}".encode()).get(timeout=60)  # min ISR 3: replicated
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    values = sorted(record.value for record in consumer)
    consumer.close()
    assert values == sorted(f"v{i}".encode() for i in range(30))


def test_replication_and_the_quorum_run_over_the_secured_listeners(secured_cluster: dict[int, Node]) -> None:
    nodes = secured_cluster
    _replicate_and_read_back(nodes, "replicated-securely")
    # Followers fetched over INTERNAL as the broker's SASL user; the quorum and heartbeats went over
    # CONTROLLER, each node known by its certificate.
    fetches = set().union(*(_replica_fetch_principals(n) for n in nodes.values()))
    assert fetches == {("User:broker", "INTERNAL")}
    controller_principals = set().union(*(_controller_principals(n) for n in nodes.values()))
    assert controller_principals and controller_principals <= {
        (f"User:CN=node-{n},O=Samsa", "CONTROLLER") for n in NODES}


def test_brokers_and_controllers_log_in_with_oauthbearer(oauth_cluster: dict[int, Node]) -> None:
    nodes = oauth_cluster
    _replicate_and_read_back(nodes, "replicated-with-tokens")
    fetches = set().union(*(_replica_fetch_principals(n) for n in nodes.values()))
    assert fetches == {("User:broker", "INTERNAL")}  # the unsecured token's sub
    controller_principals = set().union(*(_controller_principals(n) for n in nodes.values()))
    assert controller_principals and controller_principals <= {
        (f"User:controller-{n}", "CONTROLLER") for n in NODES}  # each node's signed token's sub


def _log_in(security: ClientSecurity, port: int) -> str:
    """What a node's client meets logging in to 127.0.0.1:`port` with `security`: the refusal, or "authenticated"."""
    async def attempt() -> str:
        try:
            _reader, writer = await security.open("127.0.0.1", port)
        except ConnectionError as e:
            return str(e)
        writer.close()
        return "authenticated"

    return asyncio.run(attempt())


def test_an_oauthbearer_login_with_a_token_the_controllers_do_not_trust_is_refused(
        oauth_cluster: dict[int, Node], tmp_path: Path) -> None:
    """A node whose token file holds a token of another identity provider cannot reach the controllers."""
    from samsa.broker.security.oauth_login import OAuthBearerLogin

    stranger = make_issuer(tmp_path)  # a key pair the controllers' JWKS does not hold
    token_file = tmp_path / "stranger.jwt"
    token_file.write_text(stranger.token("intruder", kid="rsa-1"))
    login = OAuthBearerLogin(token_endpoint=token_file.as_uri())
    intruder = ClientSecurity("CONTROLLER", None, "OAUTHBEARER", "", "", login)
    assert _log_in(intruder, oauth_cluster[1].controller) == 'SASL OAUTHBEARER as : {"status":"invalid_token"}'


def _replica_fetch_principals(node: Node) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for line in node.log().splitlines():
        if "api=Fetch " in line and 'client_id="replica-fetcher-' in line:
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part and not part.startswith('"'))
            found.add((fields["principal"], fields["listener"]))
    return found


def _controller_principals(node: Node) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for line in node.log().splitlines():
        if ("api=BrokerHeartbeat " in line or "api=Vote " in line or "api=Fetch " in line) \
                and "listener=CONTROLLER" in line:
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part and not part.startswith('"'))
            found.add((fields["principal"], fields["listener"]))
    return found


def test_a_broker_with_a_wrong_inter_broker_password_is_refused(secured_cluster: dict[int, Node]) -> None:
    """What a broker's NodeClient meets when its login is wrong: the connection is refused with Kafka's message."""
    context = ssl.create_default_context(cafile=str(secured_cluster[1].ca))
    wrong = ClientSecurity("INTERNAL", context, "PLAIN", "broker", "not-the-secret")
    assert _log_in(wrong, secured_cluster[1].internal) == \
        "SASL PLAIN as broker: Authentication failed: Invalid username or password"


def test_a_produce_to_a_follower_names_the_leader_on_the_clients_listener(secured_cluster: dict[int, Node]) -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER carries the leader's endpoint, on the listener the request came in on."""
    from samsa.kproto.records import encode_batch

    nodes = secured_cluster
    topic = "redirected"
    with Connection("127.0.0.1", nodes[1].plain) as admin:
        created = admin.request(19, {"topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                                                  "assignments": [{"partition_index": 0, "broker_ids": [2]}],
                                                  "configs": ()}], "timeout": 30_000, "validate_only": False})
    assert created.topics[0].error_code.value == 0, created.topics[0].error_message
    _wait("node 3 to know the topic's leader", lambda: _leader(nodes[3], topic) == 2)
    batch = encode_batch([(None, b"x", ())], timestamp_ms=int(time.time() * 1000))
    with Connection("127.0.0.1", nodes[3].plain) as client:
        r = client.request(0, {"transactional_id": None, "acks": 1, "timeout": 10_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=10)
    assert r.responses[0].partition_responses[0].error_code.value == 6  # NOT_LEADER_OR_FOLLOWER
    assert [(e.node_id, e.port) for e in r.node_endpoints] == [(2, nodes[2].plain)]


def _leader(node: Node, topic: str) -> int | None:
    with Connection("127.0.0.1", node.plain, timeout_s=3) as conn:
        r = conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                             "include_topic_authorized_operations": False})
    partitions = r.topics[0].partitions
    return int(partitions[0].leader_id) if partitions else None
