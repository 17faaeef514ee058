"""`samsa serve --config server.properties` honours Kafka's broker keys, validated before it listens (a bad value
refuses the start, unknown and unimplemented keys warn); SIGTERM shuts down cleanly."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from samsa.broker import launcher

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    return launcher.free_port()  # outside the ephemeral range, a slice per xdist worker: no port race


def test_server_properties_keys_apply(samsa_factory: Any, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        "num.partitions=4\n"
        "auto.create.topics.enable=false\n"
        "log.retention.hours=2\n"
        "log.segment.bytes=1048576\n"
        "message.max.bytes=5000\n"
    )
    s = samsa_factory(extra_args=("--config", str(props)))
    s.start()
    with s.connect() as conn:
        r = conn.request(3, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": True,
                             "include_topic_authorized_operations": False})
        assert r.topics[0].error_code.value == 3  # auto-creation is off
        r = conn.request(19, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                          "assignments": (), "configs": ()}], "timeout": 1000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0 and r.topics[0].num_partitions == 4
        r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": False})
        configs = {c.name: c for c in r.results[0].configs}
        assert configs["retention.ms"].value == str(2 * 3600 * 1000)
        assert configs["retention.ms"].config_source == 4  # STATIC_BROKER_CONFIG
        assert configs["segment.bytes"].value == "1048576"
        assert configs["max.message.bytes"].value == "5000"
        assert configs["cleanup.policy"].config_source == 5  # DEFAULT_CONFIG


def test_sigterm_shuts_down_cleanly_and_checkpoints(samsa_factory: Any) -> None:
    from samsa.kproto.records import encode_batch

    s = samsa_factory()
    s.start()
    with s.connect() as conn:
        conn.request(19, {"topics": [{"name": "ck", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": False})
        batch = encode_batch([(None, b"x", ())], timestamp_ms=int(time.time() * 1000))
        conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 1000,
                         "topic_data": [{"name": "ck", "partition_data": [{"index": 0, "records": batch}]}]})
    started = time.monotonic()
    assert s.stop() == 0
    assert time.monotonic() - started < 15
    text = (s.data_dir / "replication-offset-checkpoint").read_text().split("\n")
    assert "ck 0 1" in text
    assert (s.data_dir / "recovery-point-offset-checkpoint").exists()
    assert "clean" in s.log_tail().lower() or "shut down" in s.log_tail().lower()


def _serve_refused(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Run `samsa serve` with arguments that must be refused; its exit code and output."""
    data_dir = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "samsa.broker.cli", "serve", "--data-dir", str(data_dir),
         "--listen", f"127.0.0.1:{free_port()}", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert not data_dir.exists(), "the broker was built (its data directory made) before the refusal"
    return proc.returncode, proc.stdout + proc.stderr


def test_bad_value_refuses_to_start_naming_key_value_and_expectation(tmp_path: Path) -> None:
    code, output = _serve_refused(tmp_path, "--override", "num.partitions=abc")
    assert code != 0
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 1, output
    assert "num.partitions" in errors[0] and "abc" in errors[0]
    assert "Not a number of type INT" in errors[0] and "expected an INT in [1,...]" in errors[0]
    assert "ready on" not in output and "Traceback" not in output


def test_bad_values_in_a_properties_file_and_ranges_are_refused(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=0\nauto.create.topics.enable=yes\nlisteners=PLAINTEXT://127.0.0.1:99999\n")
    code, output = _serve_refused(tmp_path, "--config", str(props))
    assert code != 0
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 3, output
    text = "\n".join(errors)
    assert "Invalid value 0 for configuration num.partitions: Value must be at least 1" in text
    assert "Invalid value yes for configuration auto.create.topics.enable" in text
    assert "listeners" in text and "99999" in text


def test_malformed_override_and_missing_config_file_are_one_line_refusals(tmp_path: Path) -> None:
    code, output = _serve_refused(tmp_path, "--override", "num.partitions")
    assert code != 0 and "expected KEY=VALUE" in output and "Traceback" not in output
    code, output = _serve_refused(tmp_path, "--config", str(tmp_path / "missing.properties"))
    assert code != 0 and "Cannot read --config" in output and "Traceback" not in output


def test_unknown_and_unimplemented_keys_warn_once_each_and_static_keys_are_described(
    samsa_factory: Any, tmp_path: Path
) -> None:
    s = samsa_factory(extra_args=("--override", "num.partitons=3", "--override", "replica.selector.class=x.Y",
                                  "--override", "remote.log.storage.system.enable=false",
                                  "--override", "num.partitions=3"))
    s.start()
    with s.connect() as conn:
        r = conn.request(32, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": True}, version=4)
        res = r.results[0]
        # Kafka answers a described resource with error_message "" (not null).
        assert res.error_code.value == 0 and res.error_message == ""
        configs = {c.name: c for c in res.configs}
        assert configs["listeners"].config_source == 4 and configs["listeners"].value == f"PLAINTEXT://{s.bootstrap}"
        assert configs["advertised.listeners"].config_source == 4
        assert configs["num.partitions"].value == "3" and configs["num.partitions"].config_source == 4
        assert [x.source for x in configs["num.partitions"].synonyms] == [4, 5]
        assert configs["num.partitions"].documentation
        # Keys Kafka has no type for are listed as given at start, sensitive (value withheld), as Kafka does.
        assert configs["num.partitons"].config_source == 4 and configs["num.partitons"].is_sensitive
        assert configs["num.partitons"].value is None
        r = conn.request(19, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                          "assignments": (), "configs": ()}], "timeout": 1000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0 and r.topics[0].num_partitions == 3
    warnings = [line for line in s.log_tail(200).splitlines() if "WARNING" in line]
    for key in ("num.partitons", "replica.selector.class", "remote.log.storage.system.enable"):
        assert sum(key in line for line in warnings) == 1, (key, warnings)
    assert any("did you mean num.partitions?" in line for line in warnings)
    assert not any("num.partitions " in line for line in warnings)


def test_typed_values_parse_as_kafka_reads_them(samsa_factory: Any, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    # Kafka trims values and reads booleans case-insensitively.
    props.write_text("num.partitions = 2 \nauto.create.topics.enable=FALSE\n")
    s = samsa_factory(extra_args=("--config", str(props)))
    s.start()
    with s.connect() as conn:
        r = conn.request(3, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": True,
                             "include_topic_authorized_operations": False})
        assert r.topics[0].error_code.value == 3
        r = conn.request(19, {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                          "assignments": (), "configs": ()}], "timeout": 1000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0 and r.topics[0].num_partitions == 2


def test_a_busy_port_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "serve", "--data-dir", str(tmp_path / "d"),
                               "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "samsa serve: cannot listen: " in done.stderr and str(port) in done.stderr.splitlines()[-1]


def test_a_port_taken_by_another_process_is_not_mistaken_for_ours(samsa_factory: Any) -> None:
    """free_port() can hand out a port someone else binds before samsa does: the port then answers, but not
    for our broker (it died: address already in use). The start waits for our own "ready" line, and the
    test fixture retries on a new port."""

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    try:
        process = samsa_factory(port=taken)
        process.auto_port = True  # as if free_port() had chosen it
        process.start()
        assert process.port != taken
        assert "address already in use" in (process.data_dir.parent / f"samsa-{taken}.log").read_text()
        with process.connect() as conn:
            answer = conn.request(18, {"client_software_name": "test", "client_software_version": "1"})
            assert answer.error_code.value == 0
    finally:
        squatter.close()
