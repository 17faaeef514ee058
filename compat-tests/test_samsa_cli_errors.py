"""Every wrong `samsa` invocation is one line on stderr saying what was wrong and what to do, a non-zero exit
and no traceback, against Apache Kafka and Samsa alike; and where the CLI finds its brokers (flag, environment,
profiles)."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_targets import Target
from oracle_fixture import free_port

REPO = Path(__file__).resolve().parents[1]
UNKNOWN_TOPIC = (r"UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition\. "
                 r"Hint: check the name with `samsa topics list`")


def samsa(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], cwd=REPO, input=stdin.decode(),
                          capture_output=True, text=True, timeout=90, check=False, env=full_env)


def _listener(reply: bytes | None) -> Iterator[str]:
    """A loopback listener that sends `reply` to each connection and closes it (None: a reset at once)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                if reply is None:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(reply)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    server.close()


@pytest.fixture(scope="module")
def not_kafka() -> Iterator[str]:
    """A wrong port that is open: it answers like a web server."""
    yield from _listener(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture(scope="module")
def hangs_up() -> Iterator[str]:
    """A wrong port that is open: it resets every connection."""
    yield from _listener(None)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wrong_invocations(bootstrap: str, topic: str, not_kafka: str, hangs_up: str,
                      down: str) -> list[tuple[tuple[str, ...], int, str]]:
    b = ("-b", bootstrap)
    return [
        (("topics", "list", "-b", hangs_up), 1,
         rf"error: {hangs_up} did not answer ApiVersions like a Kafka broker \(.*\); is it a Kafka listener\? "
         r"check --bootstrap-server and the port"),
        # (argv, exit code, the one line on stderr as a regex)
        (("topics", "list", "-b", down), 1,
         rf"error: cannot connect to {down}: connection refused; is a broker running there\? "
         r"\(check --bootstrap-server and the port\)"),
        (("consume", topic, "-b", not_kafka), 1,
         rf"error: {not_kafka} did not answer ApiVersions like a Kafka broker \(.*\); is it a Kafka listener\? "
         r"check --bootstrap-server and the port"),
        (("topics", "list", "-b", "nosuch-host.invalid:9092"), 1,
         r"error: cannot resolve host 'nosuch-host\.invalid' \(nosuch-host\.invalid:9092\): unknown host; "
         r"check --bootstrap-server"),
        (("topics", "list", "-b", "127.0.0.1:abc"), 1,
         r"error: --bootstrap-server: port 'abc' in '127\.0\.0\.1:abc' is not a number \(HOST:PORT\)"),
        (("topics", "list", "-b", "127.0.0.1:70000"), 1,
         r"error: --bootstrap-server: port 70000 in '127\.0\.0\.1:70000' is out of range 1-65535"),
        (("topics", "list", "-b", "PLAINTEXT://127.0.0.1:9092"), 1,
         r"error: --bootstrap-server: 'PLAINTEXT://127\.0\.0\.1:9092' is not HOST:PORT \(e\.g\. 127\.0\.0\.1:9092\)"),
        (("consume", topic, "--offset", "beginning", *b), 1,
         r"error: --offset 'beginning' is not an offset: use start\|end\|N\|\+N\|-N\|@TIMESTAMP .*"),
        (("consume", topic, "-o", "@yesterday", *b), 1, r"error: --offset '@yesterday' is not an offset: .*"),
        (("consume", f"{topic}-nosuch", *b), 1, rf"error: topic '{topic}-nosuch': {UNKNOWN_TOPIC}.*"),
        (("produce", f"{topic}-nosuch", *b), 1, rf"error: topic '{topic}-nosuch': {UNKNOWN_TOPIC}.*"),
        (("consume", topic, "-p", "9", *b), 1, rf"error: --partition 9: topic '{topic}' has partitions 0-1"),
        (("produce", topic, "-p", "9", *b), 1, rf"error: --partition 9: topic '{topic}' has partitions 0-1"),
        (("topics", "create", topic, *b), 1,
         rf"error: topic '{topic}': TOPIC_ALREADY_EXISTS: Topic with this name already exists\..*"),
        (("topics", "create", f"{topic}-x", "-r", "99", *b), 1,
         rf"error: topic '{topic}-x': INVALID_REPLICATION_FACTOR: .*"),
        (("topics", "delete", f"{topic}-nosuch", *b), 1, rf"error: topic '{topic}-nosuch': {UNKNOWN_TOPIC}.*"),
        (("topics", "alter-config", topic, "--set", "retention.ms", *b), 1,
         r"error: --set 'retention\.ms': expected KEY=VALUE \(e\.g\. --set retention\.ms=60000\)"),
        (("topics", "alter-config", topic, "--set", "no.such.config=1", *b), 1,
         rf"error: topic '{topic}': INVALID_(CONFIG|REQUEST): .*"),
        (("produce", topic, "--acks", "2", *b), 1, r"error: --acks '2': use all \(or -1\), 1 or 0"),
        (("produce", topic, "-H", "novalue", *b), 1, r"error: -H 'novalue': a header is KEY=VALUE .*"),
        (("produce", topic, "--format", "json", *b), 1,
         r"error: stdin line 1: not JSON \(.*\); --format json takes one object per line like .* "
         r"\(0 record\(s\) were written before this\)"),
        (("produce", topic, "--format", "%k", *b), 1, r"error: --format '%k' has no %v: .*"),
        (("groups", "describe", "-g", f"{topic}-nosuch", *b), 1,
         rf"error: group '{topic}-nosuch': GROUP_ID_NOT_FOUND: The group id does not exist\..*"),
        (("groups", "delete", "-g", f"{topic}-nosuch", *b), 1,  # DeleteGroups v3 (Kafka 4.4), a null message
         rf"error: group '{topic}-nosuch': GROUP_ID_NOT_FOUND: The group id does not exist\. "
         r"Hint: check the name with `samsa groups list`\."),
        (("produce",), 2,
         r"error: samsa produce: the following arguments are required: topic \(see `samsa produce --help`\)"),
        (("consume", topic, "--no-such-flag", *b), 2,
         r"error: samsa: unrecognized arguments: --no-such-flag \(see `samsa --help`\)"),
        (("topics", "frobnicate"), 2, r"error: samsa topics: argument ACTION: invalid choice: 'frobnicate' .*"),
        (("--profile", "x"), 2, r"error: samsa: .*"),
    ]


def test_wrong_invocations_say_one_line_and_exit_non_zero(broker: Target, not_kafka: str, hangs_up: str) -> None:
    topic = f"cli-err-{uuid.uuid4().hex[:8]}"
    r = samsa("topics", "create", topic, "-p", "2", "-r", "1", "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    down = f"127.0.0.1:{free_port()}"  # nothing listens there: a broker that is down, or a wrong port
    failures = []
    for argv, code, pattern in wrong_invocations(broker.bootstrap, topic, not_kafka, hangs_up, down):
        r = samsa(*argv, stdin=b"not json\n")
        lines = r.stderr.strip().splitlines()
        if r.returncode != code or len(lines) != 1 or not re.fullmatch(pattern, lines[0]) or \
                "Traceback" in r.stderr:
            failures.append(f"samsa {' '.join(argv)}: exit {r.returncode} (expected {code}), stderr:\n{r.stderr}")
    assert not failures, "\n".join(failures)


def test_localhost_without_a_port_means_9092() -> None:
    if port_open(9092):
        pytest.skip("something listens on 127.0.0.1:9092 here, so `-b localhost` would reach it")
    r = samsa("topics", "list", "-b", "localhost")
    assert r.returncode == 1 and r.stderr.startswith("error: cannot connect to localhost:9092: connection refused")
    assert len(r.stderr.strip().splitlines()) == 1


def test_bootstrap_from_flag_environment_and_profiles(broker: Target, tmp_path: Path) -> None:
    topic = f"cli-prof-{uuid.uuid4().hex[:8]}"
    assert samsa("topics", "create", topic, "-p", "1", "-r", "1", "-b", broker.bootstrap).returncode == 0
    down = f"127.0.0.1:{free_port()}"
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(f'default = "good"\n[profiles.good]\nbootstrap_servers = "{broker.bootstrap}"\n'
                        f'[profiles.down]\nbootstrap_servers = ["{down}"]\n')
    env = {"SAMSA_PROFILES_FILE": str(profiles)}

    def listed(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return samsa("topics", "list", *args, env={**env, **(extra or {})})

    assert topic in listed().stdout.split()  # the profiles file's default
    assert topic in listed("--profile", "good").stdout.split()
    r = listed("--profile", "down")
    assert r.returncode == 1 and r.stderr.startswith(f"error: cannot connect to {down}")
    # the environment variable beats the file's default; --profile and --bootstrap-server beat the variable
    assert listed(extra={"SAMSA_BOOTSTRAP_SERVERS": down}).returncode == 1
    assert topic in listed("--profile", "good", extra={"SAMSA_BOOTSTRAP_SERVERS": down}).stdout.split()
    assert topic in listed("-b", broker.bootstrap, extra={"SAMSA_BOOTSTRAP_SERVERS": down}).stdout.split()
    assert topic in samsa("topics", "list", env={"SAMSA_BOOTSTRAP_SERVERS": f"{down},{broker.bootstrap}",
                                                 "SAMSA_PROFILES_FILE": str(tmp_path / "none.toml")}).stdout.split()
    r = listed("--profile", "nosuch")
    assert r.returncode == 1 and r.stderr.strip() == (
        f"error: no profile 'nosuch' in {profiles} (profiles there: down, good); add [profiles.nosuch] "
        'with bootstrap_servers = "HOST:PORT"')
    profiles.write_text("this is = not toml [")
    r = listed()
    assert r.returncode == 1 and r.stderr.startswith(f"error: cannot read profiles file {profiles}: ")
