"""`samsa user create|delete|list` against the secured broker, and `samsa tls ca|issue`."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

from security_harness import REPO, SCRAM_PASSWORD, SCRAM_USER, RawClient, SecuredBroker, logged_principals


def samsa(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, cwd=REPO)


def _authenticates(broker: SecuredBroker, user: str, password: str, mechanism: str) -> bool:
    from scramp import ScramClient

    scram = ScramClient([mechanism], user, password)
    tls = ssl.create_default_context(cafile=str(broker.certs.ca))
    with RawClient(broker.ports["SASL_SSL"], tls=tls) as client:
        [first] = client.authenticate(mechanism, [scram.get_client_first().encode()])
        if first.error_code.value != 0:
            return False
        scram.set_server_first(first.auth_bytes.decode())
        final = client.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
        return bool(final.error_code.value == 0)


def test_user_create_list_delete(secured_broker: SecuredBroker) -> None:
    bootstrap = ["-b", secured_broker.bootstrap("PLAINTEXT")]
    created = samsa("user", "create", "carol", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096", *bootstrap,
                    stdin="carol-secret\n")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "Created or updated user carol."
    listed = samsa("user", "list", "carol", "--output", "json", *bootstrap)
    assert json.loads(listed.stdout) == [{"user": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    assert _authenticates(secured_broker, "carol", "carol-secret", "SCRAM-SHA-512")
    assert not _authenticates(secured_broker, "carol", "wrong", "SCRAM-SHA-512")
    deleted = samsa("user", "delete", "carol", *bootstrap)
    assert deleted.returncode == 0 and deleted.stdout.strip() == "Deleted user carol."
    missing = samsa("user", "list", "carol", *bootstrap)
    assert missing.returncode == 1 and "carol" in missing.stderr
    assert not _authenticates(secured_broker, "carol", "carol-secret", "SCRAM-SHA-512")


def test_user_create_refuses_too_few_iterations(secured_broker: SecuredBroker) -> None:
    result = samsa("user", "create", "dave", "--password", "x", "--iterations", "100", "-b",
                   secured_broker.bootstrap("PLAINTEXT"))
    assert result.returncode == 1 and "--iterations must be from 4096 to 16384" in result.stderr


def test_tls_ca_and_issue_make_stores_the_ssl_module_loads(tmp_path: Path) -> None:
    assert samsa("tls", "ca", str(tmp_path)).returncode == 0
    issued = samsa("tls", "issue", str(tmp_path), "node1", "--host", "node1.example", "-O", "Acme")
    assert issued.returncode == 0, issued.stderr
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    context.load_cert_chain(str(tmp_path / "node1.pem"))
    again = samsa("tls", "ca", str(tmp_path))
    assert again.returncode == 1 and "--force" in again.stderr


def _properties(path: Path, values: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


def test_cli_commands_over_sasl_ssl_with_a_command_config(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    config = _properties(tmp_path / "scram.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(secured_broker.certs.ca)})
    bootstrap = ["-b", secured_broker.bootstrap("SASL_SSL"), "--command-config", config]
    created = samsa("topics", "create", "cli-over-sasl-ssl", *bootstrap)
    assert created.returncode == 0, created.stderr
    listed = samsa("user", "list", SCRAM_USER, "--output", "json", *bootstrap)
    assert listed.returncode == 0, listed.stderr
    assert {u["mechanism"] for u in json.loads(listed.stdout)} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    produced = samsa("produce", "cli-over-sasl-ssl", *bootstrap, stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = samsa("consume", "cli-over-sasl-ssl", "--group", "cli-group", "--max-messages", "2", *bootstrap)
    assert consumed.stdout.split() == ["one", "two"], consumed.stderr
    assert logged_principals(secured_broker, "samsa-cli") >= {(f"User:{SCRAM_USER}", "SASL_SSL")}


def test_cli_over_ssl_with_librdkafka_style_keys(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    certs_ = secured_broker.certs
    config = _properties(tmp_path / "ssl.properties", {
        "security.protocol": "SSL", "ssl.ca.location": str(certs_.ca),
        "ssl.certificate.location": str(certs_.client.certificate), "ssl.key.location": str(certs_.client.key)})
    listed = samsa("topics", "list", "-b", secured_broker.bootstrap("SSL"), "--command-config", config)
    assert listed.returncode == 0, listed.stderr


def test_cli_with_a_wrong_password_says_so_in_one_line(secured_broker: SecuredBroker, tmp_path: Path) -> None:
    config = _properties(tmp_path / "wrong.properties", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="nope";'})
    result = samsa("topics", "list", "-b", secured_broker.bootstrap("SASL_PLAINTEXT"), "--command-config", config)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {secured_broker.bootstrap('SASL_PLAINTEXT')}: SASL authentication as alice failed: Authentication "
        "failed: Invalid username or password; check --command-config"]
