"""ACLs on a live `samsa serve` process, as User:ANONYMOUS on PLAINTEXT: `samsa acl add|list|remove`, the ACLs
surviving a restart (replayed from the metadata log), and a real client refused where no ACL allows it.

The broker starts with super.users=User:ANONYMOUS (the only way to write the first ACLs, as in Kafka), then
restarts without it, so the ACLs written before decide."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from samsa.broker.security.acl import STANDARD_AUTHORIZER
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

REPO = Path(__file__).resolve().parents[2]
SAMSA = [sys.executable, "-m", "samsa.broker.cli"]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
CLI_TIMEOUT_S = 60.0


class Served:
    def __init__(self, data_dir: Path, port: int, *overrides: str) -> None:
        args: list[str] = ["--override", f"authorizer.class.name={STANDARD_AUTHORIZER}"]
        for o in overrides:
            args += ["--override", o]
        self.port = port
        self._process = launcher.start_serve(
            launcher.ServeOptions(data_dir=data_dir, port=port, extra_args=tuple(args)),
            data_dir.parent / f"samsa-{port}-{len(overrides)}.log", cwd=REPO)
        try:
            self._process.wait_listening(START_TIMEOUT_S)
        except launcher.LaunchError:
            self.stop()
            raise

    def stop(self) -> None:
        self._process.stop(STOP_TIMEOUT_S, kill=False)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*SAMSA, *args, "--bootstrap-server", f"127.0.0.1:{self.port}"], capture_output=True,
                              text=True, timeout=CLI_TIMEOUT_S, cwd=REPO)
        if check:
            assert done.returncode == 0, done.stderr
        return done


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def admin(data_dir: Path) -> Iterator[Served]:
    served = Served(data_dir, launcher.free_port(), "super.users=User:ANONYMOUS")
    yield served
    served.stop()


def produce(port: int, topic: str) -> ErrorCode:
    with Connection("127.0.0.1", port) as c:
        r = c.request(0, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([(None, b"v", ())],
                                                                                    timestamp_ms=1_700_000_000_000)}]}]})
        return ErrorCode(r.responses[0].partition_responses[0].error_code)


def test_acl_add_list_remove_with_the_cli(admin: Served) -> None:
    out = admin.cli("acl", "add", "--principal", "User:alice", "--operation", "read", "--operation", "Describe",
                    "--topic", "orders").stdout
    assert "Added ACL ALLOW READ for User:alice on TOPIC:LITERAL:orders." in out
    admin.cli("acl", "add", "--principal", "User:*", "--operation", "write", "--topic", "pay-", "--prefixed",
              "--deny", "--host", "10.0.0.9")
    listed = json.loads(admin.cli("acl", "list", "--output", "json").stdout)
    assert {(a["name"], a["pattern"], a["principal"], a["host"], a["operation"], a["permission"]) for a in listed} == {
        ("orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("pay-", "PREFIXED", "User:*", "10.0.0.9", "WRITE", "DENY")}
    only = json.loads(admin.cli("acl", "list", "--topic", "orders", "--output", "json").stdout)
    assert {a["operation"] for a in only} == {"READ", "DESCRIBE"}
    removed = admin.cli("acl", "remove", "--topic", "orders", "--operation", "read").stdout
    assert "Removed ACL ALLOW READ for User:alice from * on TOPIC:LITERAL:orders." in removed
    left = json.loads(admin.cli("acl", "list", "--output", "json").stdout)
    assert {a["operation"] for a in left} == {"DESCRIBE", "WRITE"}
    bad = admin.cli("acl", "add", "--principal", "alice", "--operation", "read", "--topic", "t", check=False)
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr.upper().replace(" ", "_")


def test_acls_decide_after_a_restart_without_the_super_user(admin: Served, data_dir: Path) -> None:
    admin.cli("topics", "create", "open", "closed", "-p", "1")
    admin.cli("acl", "add", "--principal", "User:ANONYMOUS", "--operation", "write", "--topic", "open")
    assert produce(admin.port, "closed") == ErrorCode.none  # still the super user
    admin.stop()
    served = Served(data_dir, launcher.free_port())
    try:
        assert produce(served.port, "open") == ErrorCode.none
        assert produce(served.port, "closed") == ErrorCode.topic_authorization_failed
        assert produce(served.port, "never-created") == ErrorCode.topic_authorization_failed
        denied = served.cli("acl", "list", check=False)
        assert denied.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr.upper().replace(" ", "_")
        listed = served.cli("topics", "list", "--output", "json").stdout
        assert {t["name"] for t in json.loads(listed)} == {"open"}  # WRITE implies DESCRIBE; "closed" is hidden
    finally:
        served.stop()
