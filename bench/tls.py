"""TLS's cost on the produce path: confluent-kafka produces 1 KiB records to one broker over its PLAINTEXT,
SSL and SASL_SSL (SCRAM-SHA-512) listeners in turn, in one run on the same machine; prints records/s, MB/s
and the broker's CPU seconds per GiB for each, and each secured listener's ratio to PLAINTEXT.

    .venv/bin/python -m bench.tls [--records N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.broker import create_topic
from bench.machine import cpu_seconds, describe
from samsa.broker.client import Connection
from samsa.broker.launcher import ServeOptions, free_ports, start_serve
from samsa.broker.security.dev_ca import issue, make_ca
from samsa.broker.security.scram import ScramMechanism, credential_from_password, salted_password

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "bench-secret"


def produce(bootstrap: str, topic: str, records: int, size: int, security: dict[str, str]) -> float:
    """Seconds to produce `records` (acks=1, as bench.broker's produce, over the given security)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "enable.idempotence": False, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576, "compression.type": "none",
                  **security})
    payload = os.urandom(size)
    errors: list[Any] = []
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, on_delivery=lambda err, _m: err is not None and errors.append(err))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-tls-") as tmp:
        directory = Path(tmp)
        make_ca(directory / "tls")
        files = issue(directory / "tls", "broker", "localhost")
        plain, ssl_port, sasl_ssl = free_ports(3)
        overrides = (f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},"
                     f"SASL_SSL://127.0.0.1:{sasl_ssl}", "ssl.keystore.type=PEM",
                     f"ssl.keystore.location={files.key_and_chain}", "sasl.enabled.mechanisms=SCRAM-SHA-512")
        served = start_serve(ServeOptions(data_dir=directory / "data", port=plain, log_level="WARNING",
                                          overrides=overrides), directory / "samsa.log", cwd=REPO)
        try:
            served.wait_listening(60)
            mechanism = ScramMechanism.SCRAM_SHA_512
            salt = credential_from_password(mechanism, PASSWORD, 4096).salt
            with Connection("127.0.0.1", plain) as admin:
                admin.request(51, {"deletions": (), "upsertions": [{
                    "name": "bench", "mechanism": int(mechanism), "iterations": 4096, "salt": salt,
                    "salted_password": salted_password(mechanism, PASSWORD, salt, 4096)}]})
            ca = str(directory / "tls" / "ca.pem")
            runs = {
                "PLAINTEXT": (plain, {}),
                "SSL": (ssl_port, {"security.protocol": "SSL", "ssl.ca.location": ca}),
                "SASL_SSL": (sasl_ssl, {"security.protocol": "SASL_SSL", "ssl.ca.location": ca,
                                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                                        "sasl.password": PASSWORD}),
            }
            results: dict[str, dict[str, float]] = {}
            for name, (port, security) in runs.items():
                bootstrap = f"{'localhost' if security else '127.0.0.1'}:{port}"
                topic = f"bench-{name.lower()}"
                create_topic(f"127.0.0.1:{plain}", topic, 4)
                cpu_before = cpu_seconds(served.pid)
                elapsed = produce(bootstrap, topic, args.records, args.size, security)
                cpu = cpu_seconds(served.pid) - cpu_before
                gib = args.records * args.size / 2**30
                results[name] = {"records_per_s": args.records / elapsed,
                                 "mb_per_s": args.records * args.size / elapsed / 1e6,
                                 "broker_cpu_s_per_gib": cpu / gib}
        finally:
            served.stop(20)
    base = results["PLAINTEXT"]["records_per_s"]
    print(json.dumps({"machine": describe(), "records": args.records, "record_bytes": args.size,
                      "results": results}, indent=1))
    for name, r in results.items():
        print(f"{name:10s} {r['records_per_s']:>10,.0f} rec/s {r['mb_per_s']:7.1f} MB/s  broker "
              f"{r['broker_cpu_s_per_gib']:.1f} CPU s/GiB  ratio to PLAINTEXT {r['records_per_s'] / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
