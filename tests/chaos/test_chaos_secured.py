"""The chaos suite's secured variant: the same runs as test_chaos.py (faults, heal, drain, the same checks)
on a cluster whose clients connect over SASL_SSL with SCRAM-SHA-512, whose replicas fetch over SASL_SSL (PLAIN)
and whose controllers talk over SSL with client certificates (secured.py).

    .venv/bin/pytest -s tests/chaos/test_chaos_secured.py            # the short run (CI: one)
    make chaos                                                        # the long runs (--chaos-long)

Knobs: SAMSA_CHAOS_SECURED_RUNS (how many runs), and test_chaos.py's SAMSA_CHAOS_SECONDS, SAMSA_CHAOS_SEED,
SAMSA_CHAOS_RF. Without SAMSA_CHAOS_SEED the seeds are the unsecured runs' plus SEED_OFFSET, so the nemesis
does not replay an unsecured run's choices.

Cost: one short run is the unsecured run's 22-32 s and a few seconds more (certificates, the SCRAM user,
TLS in every replica fetch); `make test` runs SHORT_RUNS of them. The variant needs the run's own network
namespaces (root and `ip`): every node then has the same ports, and one listener config fits them all.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from chaos.harness import ChaosConfig, keep_evidence, run_chaos, seeds
from chaos.netns import NetworkLabUnavailable
from chaos.secured import CLIENT_USER
from chaos.test_chaos import (
    FIXED_BOUND_S,
    assert_harness_worked,
    assert_replication_held,
)

SHORT_RUNS = 1
LONG_RUNS = 10
SHORT_SECONDS = 5.0
LONG_SECONDS = 25.0
SEED_OFFSET = 500


def _long(config: pytest.Config) -> bool:
    return bool(config.getoption("--chaos-long", default=False))


def _runs(config: pytest.Config) -> int:
    return int(os.environ.get("SAMSA_CHAOS_SECURED_RUNS", LONG_RUNS if _long(config) else SHORT_RUNS))


def _min_fault_s(config: pytest.Config) -> float:
    return float(os.environ.get("SAMSA_CHAOS_SECONDS", LONG_SECONDS if _long(config) else SHORT_SECONDS))


def _max_fault_s(min_s: float) -> float:
    return 3 * min_s + 15


def _seeds(count: int) -> list[int]:
    offset = 0 if os.environ.get("SAMSA_CHAOS_SEED") else SEED_OFFSET
    return [s + offset for s in seeds(count)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" in metafunc.fixturenames:
        bound = pytest.mark.timeout(_max_fault_s(_min_fault_s(metafunc.config)) + FIXED_BOUND_S)
        metafunc.parametrize("seed", [pytest.param(s, marks=bound) for s in _seeds(_runs(metafunc.config))],
                             ids=lambda s: f"seed{s}")


def test_secured_chaos_run(seed: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    min_s = _min_fault_s(request.config)
    config = ChaosConfig(seed=seed, min_fault_s=min_s, max_fault_s=_max_fault_s(min_s),
                         replication_factor=int(os.environ.get("SAMSA_CHAOS_RF", "3")))
    mode = "long" if _long(request.config) else "short"
    print(f"\n{mode} secured chaos run, seed {seed}: faults for {min_s:.0f}-{_max_fault_s(min_s):.0f} s, "
          f"data in {tmp_path}")
    started = time.monotonic()
    try:
        result = run_chaos(config, tmp_path, secured=True)
        print(result.report())
        print(f"seed {seed}: {time.monotonic() - started:.1f} s in all")
        assert result.security_note.startswith("clients SASL_SSL SCRAM-SHA-512"), result.security_note
        assert_clients_logged_in(result.client_log_dir)
        assert_harness_worked(result)
        if result.replication_factor >= 3:
            assert_replication_held(result)
    except NetworkLabUnavailable as e:
        pytest.skip(str(e))
    except Exception:  # a failed check, or the run itself (a node that would not restart, the SCRAM user)
        print(f"seed {seed}: the run's data and logs are kept in {keep_evidence(tmp_path, seed)}")
        raise
    if result.replication_factor < 3:
        pytest.skip(f"seed {seed}: the topic has replication factor {result.replication_factor} "
                    f"({result.rf_note}); no leader can move, nothing here tests replication")


def assert_clients_logged_in(log_dir: Path | None) -> None:
    """The clients' own logs: kafka-python says it authenticated with SCRAM-SHA-512 as the run's user, and no
    client was refused for its credentials (a restarted node must know the user before it listens)."""
    assert log_dir is not None
    texts = {path.name: path.read_text(errors="replace") for path in log_dir.glob("*.log*")}
    kafka_python = texts.get("kafka-python.log", "") + texts.get("kafka-python.log.1", "")  # (rotated)
    assert f"Authenticated as {CLIENT_USER} via SASL / SCRAM-SHA-512" in kafka_python, \
        "kafka-python's log has no SCRAM-SHA-512 login"
    refused = {name: text.count("invalid credentials") for name, text in texts.items() if "invalid credentials" in text}
    assert not refused, f"clients were refused for their credentials: {refused}"
