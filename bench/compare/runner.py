"""Run the side-by-side scenarios: one reference Apache Kafka and one Samsa, same machine, same run.

    .venv/bin/python -m bench.compare                       # full run: 1M records, 1,000 and 10,000 partitions
    .venv/bin/python -m bench.compare --records 200000      # smaller
    .venv/bin/python -m bench.compare --smoke --out /tmp/x  # tiny counts: checks the harness only
    .venv/bin/python -m bench.compare --scenarios producer_perf,e2e

Each broker is started once and shared by the scenarios (the scale scenario starts fresh ones for the
full run; the start-up scenario starts extra ones with --startup-repeats). Kafka runs first in every
measurement, then Samsa. Every figure is printed with its ratio Samsa / Kafka; results go to
``--out`` (default ``bench/results/``) as ``compare-<time>.json`` (with the machine description and the
load average) and one ``compare-<scenario>.png`` chart per scenario.
"""

from __future__ import annotations

import argparse
import compileall
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.compare import footprint, load, perf_tools, targets
from bench.compare.common import ScenarioResult, fmt, load_average, short_error
from bench.compare.context import Context
from bench.compare.png import write_chart
from bench.machine import describe, prefault_memory

RESULTS = targets.REPO / "bench" / "results"

SCENARIOS: dict[str, Callable[[Context], ScenarioResult]] = {
    "startup": footprint.run_startup,
    "producer_perf": perf_tools.run_producer,
    "consumer_perf": perf_tools.run_consumer,
    "rdkafka": load.run_rdkafka,
    "e2e": load.run_e2e,
    "scale": footprint.run_scale,
}

SMOKE = {"records": 2000, "repeats": 1, "warmup_records": 0, "prefault_gib": 0.0, "rate_seconds": 1.0,
         "e2e_rate": 500, "e2e_seconds": 2.0, "scale": "10",
         "startup_repeats": 1, "producers": 2, "partitions": 4}
FULL = {"records": 1_000_000, "repeats": 3, "warmup_records": 200_000, "prefault_gib": 16.0, "rate_seconds": 60.0,
        "e2e_rate": 1000, "e2e_seconds": 20.0, "scale": "1000,10000",
        "startup_repeats": 3, "producers": 4, "partitions": 8}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny counts; only checks that the harness works")
    p.add_argument("--records", type=int, help="records per producer/consumer run (default 1,000,000; smoke 2,000)")
    p.add_argument("--repeats", type=int,
                   help="producer_perf: runs per figure and broker, order alternated; the median counts (default 3)")
    p.add_argument("--warmup-records", type=int,
                   help="producer_perf: an unmeasured run of this many records on each broker first (default 200,000)")
    p.add_argument("--prefault-gib", type=float,
                   help="touch this much free memory once before the brokers start (a fresh VM backs pages on "
                        "first touch); default 16, 0 in a smoke run")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, from {','.join(SCENARIOS)}")
    p.add_argument("--rate-seconds", type=float,
                   help="the fixed-rate producer runs send min(records, rate x this) records (default 60; smoke 1)")
    p.add_argument("--producers", type=int, help="librdkafka producer processes (default 4)")
    p.add_argument("--partitions", type=int, help="partitions of the librdkafka load topic (default 8)")
    p.add_argument("--e2e-rate", type=int, help="end-to-end records/s (default 1000)")
    p.add_argument("--e2e-seconds", type=float, help="end-to-end run length (default 20)")
    p.add_argument("--scale", help="partition counts for the scale scenario (default 1000,10000)")
    p.add_argument("--scale-shared", action="store_true", help="scale on the shared brokers, not fresh ones")
    p.add_argument("--startup-repeats", type=int, help="starts per broker for the start-up median (default 3)")
    p.add_argument("--record-size", type=int, default=perf_tools.RECORD_SIZE,
                   help=f"producer_perf/consumer_perf: bytes per record (default {perf_tools.RECORD_SIZE})")
    p.add_argument("--out", type=Path, help="where JSON and charts go (default bench/results/)")
    p.add_argument("--no-charts", action="store_true")
    args = p.parse_args(argv)
    for key, value in (SMOKE if args.smoke else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    unknown = [s for s in args.scenarios.split(",") if s and s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)}")
    return args


def print_result(r: ScenarioResult) -> None:
    print(f"--- {r.name}: {r.title} ({r.seconds:.0f} s)", flush=True)
    for note in r.notes:
        print(f"    note: {note}")
    if r.error:
        print(f"    ERROR: {r.error}")
    width = max((len(f"{m.label} [{m.unit}]") for m in r.metrics), default=20)
    print(f"    {'metric':<{width}}  {'Kafka':>12}  {'Samsa':>12}  {'Samsa/Kafka':>11}  better")
    for m in r.metrics:
        k = fmt(m.kafka) if m.kafka is not None else m.kafka_status.split(":")[0]
        s = fmt(m.samsa) if m.samsa is not None else m.samsa_status.split(":")[0]
        ratio = f"{m.ratio:.3f}" if m.ratio is not None else "-"
        print(f"    {m.label + ' [' + m.unit + ']':<{width}}  {k:>12}  {s:>12}  {ratio:>11}  {m.better}")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    perf_tools.RECORD_SIZE = args.record_size
    names = [s for s in args.scenarios.split(",") if s]
    out_dir: Path = args.out or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    machine = describe()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    run: dict[str, Any] = {
        "kind": "samsa-vs-kafka", "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine, "load_average_start": load_average(), "kafka_version": targets.oracle_fixture.KAFKA_VERSION,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "scenarios": {}, "events": [],
        "samsa_build": {"python": str(targets.SAMSA_PYTHON), "cwd": str(targets.SAMSA_CWD),
                        "module": targets.SAMSA_SERVE_MODULE, "commit": _commit(targets.SAMSA_CWD)},
    }
    print(f"machine: {machine}; load average {run['load_average_start']}", flush=True)
    # Samsa as a regular install runs it: with bytecode (`make compile`; the editable install writes none).
    for package in ("kproto", "broker", "storage", "raft"):
        compileall.compile_dir(str(targets.SAMSA_CWD / package), quiet=1)
    if args.prefault_gib > 0:
        run["prefault"] = prefault_memory(int(args.prefault_gib * (1 << 30)))
        print(f"touched {run['prefault']['gib']} GiB of free memory once, {run['prefault']['us_per_page']} us per "
              "page (about 2-3 where it had been touched before)", flush=True)
    path = out_dir / f"compare-{stamp}.json"
    ctx = Context(args)
    failed = 0
    try:
        for name in names:
            ctx.log(f"== {name}")
            t0 = time.monotonic()
            try:
                r = SCENARIOS[name](ctx)
            except Exception as e:
                r = ScenarioResult(name, name, error=short_error(e, 1000))
                failed += 1
                ctx.log(f"{name}: ERROR {short_error(e, 1000)}")
            r.seconds = round(time.monotonic() - t0, 1)
            r.details["load_average_after"] = load_average()
            run["scenarios"][name] = r.as_dict()
            path.write_text(json.dumps(run, indent=2, default=str) + "\n")  # so far (a killed run keeps its figures)
            print_result(r)
            if not args.no_charts:
                subtitle = (f"Apache Kafka {run['kafka_version']} vs Samsa, same machine, same run "
                            f"({run['started_utc']}); {machine['cpu']}, {machine['cores']} cores; load average "
                            f"{load_average()}\n" + "\n".join(r.notes))
                ctx.log(f"chart: {write_chart(r, out_dir / f'compare-{name}.png', subtitle)}")
            for tname in list(ctx.targets):  # a broker that died is reported and replaced, so later scenarios run
                t = ctx.targets[tname]
                if not t.alive():
                    msg = f"{t.title} (PID {t.pid}) died during {name}; restarted for the next scenario"
                    run["events"].append(msg)
                    ctx.log(msg)
                    failed += tname == "kafka"
                    t.stop()
                    ctx.targets[tname] = targets.start(tname)
    except Exception as e:
        run["error"] = short_error(e, 2000)
        print(f"ERROR: {run['error']}", flush=True)
        failed += 1
    finally:
        for t in ctx.targets.values():
            if t.sampler is not None:
                run.setdefault("peak_rss_mib_whole_run", {})[t.name] = round(
                    t.sampler.peak_rss_since(0.0) / 2**20, 1)
            t.stop()
    run["load_average_end"] = load_average()
    run["seconds"] = round(time.monotonic() - ctx.t_start, 1)
    run["complete"] = True
    path.write_text(json.dumps(run, indent=2, default=str) + "\n")
    print(f"results: {path} ({run['seconds']:.0f} s, load average at the end {run['load_average_end']})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def _commit(checkout: Path) -> str | None:
    """The commit of the Samsa checkout being measured, so a result names the build it measured."""
    try:
        out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
