"""ApiVersions v5 (KIP-1242) through the server's dispatch on a broker in this process: the request may name the
cluster and node the client means to reach. Kafka 4.4's rules (KafkaApis, ControllerApis, SaslServerAuthenticator,
ApiVersionsRequest.isValid): both or neither of cluster_id and node_id, else INVALID_REQUEST; a broker listener
answers REBOOTSTRAP_REQUIRED when either is not its own; the controller listener and a SASL listener before
authentication do not check them. An error answer lists no APIs and no features."""

from __future__ import annotations

import asyncio
import inspect
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.server import dispatch_frame
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import decode_response, encode_request, request_class

TIMEOUT_S = 30  # a bound on one request, never reached when it works
SOFTWARE = {"client_software_name": "apache-kafka-java", "client_software_version": "4.4.0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(BrokerConfig(data_dir=tmp_path_factory.mktemp("api-versions") / "data"))
    yield b
    b.close()


def ask(broker: Broker, version: int, values: dict[str, Any], *, controller_plane: bool = False,
        sasl_authenticating: bool = False) -> Any:
    """The decoded ApiVersions answer to one request through dispatch_frame."""

    async def answer() -> Any:
        frame = encode_request(build(request_class(18, version), values), correlation_id=7, client_id="t")
        found = dispatch_frame(broker, frame[4:], "127.0.0.1", controller_plane=controller_plane,
                               sasl_authenticating=sasl_authenticating)
        if inspect.isawaitable(found):
            found = await asyncio.wait_for(found, TIMEOUT_S)
        assert found is not None
        data = found if isinstance(found, bytes) else b"".join(bytes(p) for p in found)
        correlation, response = decode_response(18, version, data[4:])
        assert correlation == 7
        return response

    return asyncio.run(answer())


def v5(cluster_id: str | None, node_id: int) -> dict[str, Any]:
    return {**SOFTWARE, "cluster_id": cluster_id, "node_id": node_id}


def ranges(r: Any) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def refused(r: Any) -> ErrorCode:
    """The answer's error, after checking it carries nothing else (Kafka's getErrorResponse)."""
    assert (tuple(r.api_keys), tuple(r.supported_features), r.finalized_features_epoch,
            tuple(r.finalized_features)) == ((), (), -1, ())
    return ErrorCode(r.error_code)


def test_v5_is_advertised_and_answers_a_client_that_names_nothing(broker: Broker) -> None:
    r = ask(broker, 5, v5(None, -1))
    assert r.error_code == ErrorCode.none
    assert ranges(r)[18] == (0, 5) and ranges(r)[42] == (0, 3)
    assert r.finalized_features_epoch >= 0 and {f.name for f in r.supported_features} >= {"metadata.version"}


def test_v5_naming_this_cluster_and_node_is_answered(broker: Broker) -> None:
    r = ask(broker, 5, v5(broker.cluster_id, broker.node_id))
    assert r.error_code == ErrorCode.none and ranges(r)[18] == (0, 5)


@pytest.mark.parametrize("which", ["cluster", "node", "both"])
def test_v5_naming_another_cluster_or_node_must_rebootstrap(broker: Broker, which: str) -> None:
    cluster_id = "AnotherClusterIdXXXXXX" if which != "node" else broker.cluster_id
    node_id = broker.node_id + 1 if which != "cluster" else broker.node_id
    assert refused(ask(broker, 5, v5(cluster_id, node_id))) == ErrorCode.rebootstrap_required


@pytest.mark.parametrize(("cluster_id", "node_id"), [("this", -1), (None, 1), ("", -1)])
def test_v5_with_only_one_of_cluster_and_node_is_invalid(broker: Broker, cluster_id: str | None,
                                                         node_id: int) -> None:
    cluster_id = broker.cluster_id if cluster_id == "this" else cluster_id
    assert refused(ask(broker, 5, v5(cluster_id, node_id))) == ErrorCode.invalid_request


@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize(("name", "software_version"), [("", "1"), ("bad name", "1"), ("-lead", "1"),
                                                        ("trail.", "1"), ("ok", ""), ("ok", "1.0 beta")])
def test_a_software_name_or_version_kip_511_refuses_is_invalid(broker: Broker, version: int, name: str,
                                                               software_version: str) -> None:
    values = {"client_software_name": name, "client_software_version": software_version}
    if version >= 5:
        values |= {"cluster_id": None, "node_id": -1}
    assert refused(ask(broker, version, values)) == ErrorCode.invalid_request


@pytest.mark.parametrize(("name", "software_version"), [("a", "1"), ("apache-kafka-java", "4.4.0"),
                                                        ("confluent-kafka-python", "2.6.1-rdkafka-2.6.1")])
def test_names_kip_511_accepts_are_answered(broker: Broker, name: str, software_version: str) -> None:
    r = ask(broker, 3, {"client_software_name": name, "client_software_version": software_version})
    assert r.error_code == ErrorCode.none


def test_the_controller_listener_does_not_check_the_cluster_but_checks_the_request(broker: Broker) -> None:
    """Kafka's ControllerApis: isValid only."""
    r = ask(broker, 5, v5("AnotherClusterIdXXXXXX", 7), controller_plane=True)
    assert r.error_code == ErrorCode.none and ranges(r)[18] == (0, 5)
    assert 62 in ranges(r) and 0 not in ranges(r)  # the controller's APIs: BrokerRegistration, no Produce
    assert refused(ask(broker, 5, v5(None, 7), controller_plane=True)) == ErrorCode.invalid_request


def test_before_sasl_authentication_the_cluster_is_not_checked(broker: Broker) -> None:
    """Kafka's SaslServerAuthenticator answers ApiVersions itself: isValid only."""
    r = ask(broker, 5, v5("AnotherClusterIdXXXXXX", 7), sasl_authenticating=True)
    assert r.error_code == ErrorCode.none and ranges(r)[18] == (0, 5)
    assert refused(ask(broker, 5, v5("x", -1), sasl_authenticating=True)) == ErrorCode.invalid_request


def test_an_unknown_version_lists_v0_to_v5(broker: Broker) -> None:
    payload = struct.pack(">hhi", 18, 6, 7) + struct.pack(">h", 1) + b"t" + b"\x00\x00\x00"
    found = dispatch_frame(broker, payload, "127.0.0.1")
    assert isinstance(found, bytes)
    correlation, r = decode_response(18, 0, found[4:])
    assert (correlation, r.error_code) == (7, ErrorCode.unsupported_version)
    assert ranges(r) == {18: (0, 5)}
