"""Describe/AlterUserScramCredentials (KIP-554) against a real broker, and what the metadata log keeps."""

from __future__ import annotations

from typing import Any

from security_harness import SCRAM_USER, RawClient, SecuredBroker, upsert_scram

from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import RemoveUserScramCredentialRecord, decode_records, encode_records
from samsa.broker.security.scram import ScramMechanism, credential_from_password, salted_password, to_record


def _upsertion(user: str, mechanism: int, iterations: int = 4096, password: str = "pw") -> dict[str, Any]:
    salt = b"0123456789abcdef"
    chosen = ScramMechanism.from_id(mechanism) or ScramMechanism.SCRAM_SHA_256
    return {"name": user, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": salted_password(chosen, password, salt, max(iterations, 1))}


def _results(response: Any) -> dict[str, tuple[int, str | None]]:
    return {r.user: (r.error_code.value, r.error_message) for r in response.results}


def test_describe_lists_mechanisms_and_iterations_never_secrets(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["PLAINTEXT"]) as client:
        response = client.request(50, 0, {"users": [{"name": SCRAM_USER}]})
    [result] = response.results
    assert result.user == SCRAM_USER and result.error_code.value == 0
    assert sorted((c.mechanism, c.iterations) for c in result.credential_infos) == [(1, 4096), (2, 4096)]


def test_alter_checks_each_change_with_kafkas_errors(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["PLAINTEXT"]) as client:
        response = client.request(51, 0, {
            "deletions": [{"name": "ghost", "mechanism": 1}, {"name": "twice", "mechanism": 1}],
            "upsertions": [_upsertion("few", 1, iterations=1000), _upsertion("many", 2, iterations=20000),
                           _upsertion("odd", 3), _upsertion("twice", 2), _upsertion("", 1)]})
        results = _results(response)
        assert results["ghost"] == (91, "Attempt to delete a user credential that does not exist")
        assert results["twice"] == (92, "A user credential cannot be altered twice in the same request")
        assert results["few"] == (93, "Too few iterations")
        assert results["many"] == (93, "Too many iterations")
        assert results["odd"] == (33, "Unknown SCRAM mechanism")
        assert results[""] == (93, "Username must not be empty")
        described = client.request(50, 0, {"users": [{"name": "few"}, {"name": "dup"}, {"name": "dup"}]})
        assert _results(described) == {
            "few": (91, "Attempt to describe a user credential that does not exist: few"),
            "dup": (92, "Cannot describe SCRAM credentials for the same user twice in a single request: dup")}


def test_a_created_user_authenticates_and_a_deleted_one_no_longer_does(secured_broker: SecuredBroker) -> None:
    from scramp import ScramClient

    plaintext = secured_broker.ports["PLAINTEXT"]
    assert _results(upsert_scram(plaintext, "bob", "bob-secret", ScramMechanism.SCRAM_SHA_256)) == {"bob": (0, None)}

    def authenticates() -> bool:
        scram = ScramClient(["SCRAM-SHA-256"], "bob", "bob-secret")
        with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
            [first] = client.authenticate("SCRAM-SHA-256", [scram.get_client_first().encode()])
            scram.set_server_first(first.auth_bytes.decode())
            final = client.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
            return bool(final.error_code.value == 0)

    assert authenticates()
    with RawClient(plaintext) as client:
        deleted = client.request(51, 0, {"deletions": [{"name": "bob", "mechanism": 1}], "upsertions": ()})
        assert _results(deleted) == {"bob": (0, None)}
        assert _results(client.request(50, 0, {"users": [{"name": "bob"}]}))["bob"][0] == 91
    assert not authenticates()


def test_records_replay_into_the_image_and_its_snapshot() -> None:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_512, "secret", 4096)
    record = to_record("alice", ScramMechanism.SCRAM_SHA_512, credential)
    data = encode_records([record])
    assert b"secret" not in data
    image = MetadataImage().apply(decode_records(data), 0)
    assert image.scram_credentials[("alice", 2)] == record
    assert MetadataImage().apply(image.to_records(), 0).scram_credentials == image.scram_credentials
    gone = image.apply([RemoveUserScramCredentialRecord("alice", 2)], 1)
    assert gone.scram_credentials == {}


def test_describe_configs_hides_the_security_secrets(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["PLAINTEXT"]) as client:
        response = client.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                         "configuration_keys": None}],
                                          "include_synonyms": False, "include_documentation": False})
    configs = {c.name: c for c in response.results[0].configs}
    assert configs["ssl.keystore.type"].value == "PEM"
    assert configs["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    jaas = [c for name, c in configs.items() if name.endswith("sasl.jaas.config")]
    assert jaas and all(c.is_sensitive and c.value is None for c in jaas)
