"""`samsa user create|delete|list` against the secured broker, and `samsa tls ca|issue`."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

from security_harness import REPO, RawClient, SecuredBroker


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
