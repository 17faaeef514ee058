"""Samsa's broker CPU per GiB produced over one listener, optionally under `perf record` (how issue 17's TLS
profile was taken): a Samsa broker as bench.tls starts it, a warm-up, then `--records` 1 KiB records produced
(confluent-kafka, acks=1, bench.tls's settings) while perf samples the broker process.

    .venv/bin/python -m bench.tls_profile SASL_SSL --records 600000 [--perf out.perf]
    perf report -i out.perf --no-children --sort dso,symbol --stdio

Prints records/s and CPU seconds per GiB: the broker (all threads, and its event-loop thread), the producer (this
process), and elapsed; writes nothing else. Figures on a shared machine are
noisy: compare runs made back to back.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.broker import create_topic
from bench.machine import cpu_seconds, thread_cpu_seconds
from bench.tls import PARTITIONS, PASSWORD, USER, add_scram_user, produce, samsa, wait_for_scram
from samsa.broker.security.dev_ca import issue, make_ca


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("listener", choices=("PLAINTEXT", "SASL_SSL"))
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--perf", help="perf record's output file (perf must be installed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="samsa-tls-profile-") as tmp:
        directory = Path(tmp)
        ca = make_ca(directory / "tls")
        files = issue(directory / "tls", "broker", "localhost")
        with samsa(directory, files) as broker:
            add_scram_user(broker.plain_port)
            wait_for_scram(broker.sasl_ssl_port, ca)
            if args.listener == "PLAINTEXT":
                bootstrap, security = f"127.0.0.1:{broker.plain_port}", {}
            else:
                bootstrap, security = f"localhost:{broker.sasl_ssl_port}", {
                    "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca), "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": USER, "sasl.password": PASSWORD}
            admin = f"127.0.0.1:{broker.plain_port}"
            create_topic(admin, "warmup", PARTITIONS)
            produce(bootstrap, "warmup", args.records // 2, 1024, security)
            create_topic(admin, "measured", PARTITIONS)
            perf = None
            if args.perf:
                perf = subprocess.Popen(["perf", "record", "-F", "1999", "-g", "-p", str(broker.pid), "-o", args.perf],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)  # perf attaches
            cpu = cpu_seconds(broker.pid)
            loop_cpu = thread_cpu_seconds(broker.pid, broker.pid)  # the main thread runs the event loop
            usage = resource.getrusage(resource.RUSAGE_SELF)  # the producer (librdkafka's threads) is this process
            client_cpu = usage.ru_utime + usage.ru_stime
            elapsed = produce(bootstrap, "measured", args.records, 1024, security)
            cpu = cpu_seconds(broker.pid) - cpu
            loop_cpu = thread_cpu_seconds(broker.pid, broker.pid) - loop_cpu
            usage = resource.getrusage(resource.RUSAGE_SELF)
            client_cpu = usage.ru_utime + usage.ru_stime - client_cpu
            if perf is not None:
                perf.send_signal(2)
                perf.wait()
    gib = args.records * 1024 / 2**30
    print(f"{args.listener}: {args.records / elapsed:,.0f} records/s, broker CPU {cpu / gib:.2f} s/GiB,"
          f" event-loop thread {loop_cpu / gib:.2f} s/GiB; client CPU {client_cpu / gib:.2f} s/GiB;"
          f" elapsed {elapsed / gib:.2f} s/GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
