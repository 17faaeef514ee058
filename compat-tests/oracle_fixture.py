"""Apache Kafka (the "oracle", at the version in ``compat-tests/KAFKA_VERSION``) started from Python, for tests
and benchmarks.

The jars come from Maven Central (``make compat-deps`` puts them in ``compat-tests/oracle/lib``).
Everything here launches ``java`` directly with the same flags as ``oracle/start-kafka.sh`` and
``oracle/kafka-run.sh`` (see ``oracle/NOTES.md``), but on free loopback ports and in a temporary
directory, and it keeps the PIDs so that it can stop exactly what it started.

    from oracle_fixture import kafka_cluster, run_kafka_tool

    with kafka_cluster(nodes=1) as cluster:       # or nodes=3
        print(cluster.bootstrap)                  # "127.0.0.1:PORT"
        run_kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                       cluster.bootstrap, "--list")

``kafka_cluster`` always stops the JVMs (SIGTERM, then SIGKILL after ``stop_timeout``) and deletes
the temporary directory (set ``SAMSA_KEEP_ORACLE=1`` to keep data and logs). The JVMs are also
started with ``PR_SET_PDEATHSIG`` (from the main thread) so that they die if the Python process that
started them dies.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from samsa.broker import launcher

COMPAT_DIR = Path(__file__).resolve().parent
# The reference Kafka's version: one line in compat-tests/KAFKA_VERSION, which compat.mk gives Maven too.
KAFKA_VERSION = (COMPAT_DIR / "KAFKA_VERSION").read_text().strip()
ORACLE_DIR = COMPAT_DIR / "oracle"
LIB_DIR = Path(os.environ.get("KAFKA_LIB_DIR", ORACLE_DIR / "lib"))
SERVER_PROPERTIES = ORACLE_DIR / "server.properties"
BROKER_LOG4J = ORACLE_DIR / "log4j2-broker.xml"
TOOLS_LOG4J = ORACLE_DIR / "log4j2-tools.xml"
HOST = "127.0.0.1"

# Same as KAFKA_JVM_PERFORMANCE_OPTS in Kafka's bin/kafka-run-class.sh.
JVM_PERFORMANCE_OPTS = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]


# For short-lived tool JVMs (storage format, kafka-topics, ...): C1 only starts faster. Not for perf
# tools or the broker. (Not a second GC flag: Kafka's options above already select G1.)
QUICK_JVM_OPTS = ["-XX:TieredStopAtLevel=1"]


class OracleError(RuntimeError):
    """The reference Kafka could not be installed, started or run."""


def java_binary() -> str:
    if os.environ.get("JAVA"):
        return os.environ["JAVA"]
    if os.environ.get("JAVA_HOME"):
        return str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    return "java"


def ensure_installed() -> None:
    """Fail with a clear message if the jars are not there (``make compat-deps`` fetches them)."""
    needed = [f"kafka_2.13-{KAFKA_VERSION}", f"kafka-clients-{KAFKA_VERSION}", f"kafka-server-{KAFKA_VERSION}",
              f"kafka-tools-{KAFKA_VERSION}", "log4j-slf4j-impl-"]
    names = os.listdir(LIB_DIR) if LIB_DIR.is_dir() else []
    missing = [n for n in needed if not any(f.startswith(n) and f.endswith(".jar") for f in names)]
    if missing:
        raise OracleError(
            f"Kafka {KAFKA_VERSION} jars missing in {LIB_DIR} ({', '.join(missing)}*.jar): "
            "run `make compat-deps`"
        )


def classpath(lib_dir: Path | None = None) -> str:
    return str((lib_dir or LIB_DIR) / "*")


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1, as Samsa's launcher picks them (no race between xdist workers)."""
    return launcher.free_ports(count, HOST)


def free_port() -> int:
    return free_ports(1)[0]


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def die_with_parent_hook() -> Callable[[], None] | None:
    """``preexec_fn`` that makes the child die with us. Linux sends the signal when the *thread*
    that forked exits, so it is only used from the main thread (a worker thread may end early)."""
    return _die_with_parent if threading.current_thread() is threading.main_thread() else None


def stop_pid(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM the process we started, wait up to ``timeout`` s, then SIGKILL. Never by name."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)


def java_command(
    main_class: str,
    args: Sequence[str],
    *,
    heap: Sequence[str] = ("-Xmx512m",),
    log4j: Path = TOOLS_LOG4J,
    jvm_opts: Sequence[str] = (),
    lib_dir: Path | None = None,
) -> list[str]:
    return [
        java_binary(),
        *heap,
        *JVM_PERFORMANCE_OPTS,
        f"-Dlog4j2.configurationFile={log4j}",
        *jvm_opts,
        "-cp",
        classpath(lib_dir),
        main_class,
        *args,
    ]


def class_archive(main_class: str, lib_dir: Path | None = None) -> Path:
    """Where a tool's AppCDS archive lives (JDK 13+ dynamic archives): the classes its first run loaded,
    mapped by every later run instead of parsed again. A Kafka tool's start then costs 1.25 s of CPU
    instead of 2.5 s (TopicCommand --list, JDK 17, this machine). Keyed by the JVM and the jars, so
    another JDK or jar set makes a new one; a JVM that cannot use an archive ignores it (-Xshare:auto)."""
    lib = lib_dir or LIB_DIR
    jars = sorted(name for name in os.listdir(lib) if name.endswith(".jar"))
    key = f"{os.path.realpath(shutil.which(java_binary()) or java_binary())}|{jars}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return lib / f".cds-{main_class.rsplit('.', 1)[-1]}-{digest}.jsa"


def run_kafka_tool(
    main_class: str,
    *args: str,
    timeout: float = 120.0,
    check: bool = True,
    input: str | None = None,
    heap: str = "-Xmx512m",
    jvm_opts: Sequence[str] = (),
    lib_dir: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka main class (what ``oracle/kafka-run.sh <main class> args`` does).

    Examples of main classes: ``org.apache.kafka.tools.TopicCommand`` (kafka-topics),
    ``org.apache.kafka.tools.GetOffsetShell`` (kafka-get-offsets), ``org.apache.kafka.tools.DumpLogSegments``,
    ``org.apache.kafka.tools.ProducerPerformance`` -- see the table in ``oracle/NOTES.md``.
    stdout holds the tool's output; its logging (WARN and above) goes to stderr. Text mode.
    With ``check`` a non-zero exit raises ``OracleError`` with both streams. ``lib_dir`` runs the class
    from other jars (bench/perf-tools: Kafka 4.2.1's ProducerPerformance) than the reference's.
    """
    if lib_dir is None:
        ensure_installed()
    elif not any(lib_dir.glob("kafka-tools-*.jar")):
        raise OracleError(f"no kafka-tools jar in {lib_dir}: run `make bench-deps`")
    archive = class_archive(main_class, lib_dir)
    dumping = archive.with_name(f"{archive.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    cds = ([f"-XX:SharedArchiveFile={archive}"] if archive.exists() else [f"-XX:ArchiveClassesAtExit={dumping}"])
    cmd = java_command(main_class, args, heap=[heap], jvm_opts=[*jvm_opts, *cds, "-Xlog:cds*=off"], lib_dir=lib_dir)
    try:
        res = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:  # subprocess.run kills the child on timeout
        dumping.unlink(missing_ok=True)  # perhaps cut short while the JVM wrote it
        raise OracleError(f"{main_class} {' '.join(args)} timed out after {timeout}s") from e
    if dumping.exists():  # written at the JVM's exit: renamed whole, so no JVM maps half an archive
        os.replace(dumping, archive)
    if check and res.returncode != 0:
        raise OracleError(
            f"{main_class} {' '.join(args)} exited {res.returncode}\n"
            f"--- stdout\n{res.stdout[-4000:]}\n--- stderr\n{res.stderr[-4000:]}"
        )
    return res


def random_cluster_id() -> str:
    """Like ``kafka.tools.StorageTool random-uuid``: 22 base64url characters, not starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def render_properties(template: str, values: dict[str, str | None]) -> str:
    """Replace ``key=...`` lines of a properties file; ``None`` deletes a key; new keys go at the end."""
    out: list[str] = []
    seen: set[str] = set()
    for line in template.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else None
        if key is not None and key in values:
            seen.add(key)
            if values[key] is not None:
                out.append(f"{key}={values[key]}")
            continue
        out.append(line)
    extra = [f"{k}={v}" for k, v in values.items() if k not in seen and v is not None]
    if extra:
        out += ["", "# set by oracle_fixture.py", *extra]
    return "\n".join(out) + "\n"


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None
    # extra listeners (``start_kafka(extra_listeners=...)``): listener name -> (security protocol, port)
    extra_listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def properties(self) -> Path:
        return self.dir / "server.properties"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for name in ("kafka.out", "server.log"):
            p = self.log_dir / name
            if p.exists():
                text = p.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- node {self.node_id} {p}\n" + "\n".join(text))
        return "\n".join(parts)


@dataclass
class KafkaCluster:
    nodes: list[KafkaNode]
    workdir: Path
    cluster_id: str
    start_seconds: float = 0.0
    _keep: bool = field(default=False, repr=False)
    _launch_args: tuple[str, bool, tuple[str, ...]] = field(default=("1g", False, ()), repr=False)

    def restart_node(self, node: KafkaNode) -> None:
        """Start a stopped (e.g. SIGKILLed) node again on its ports and data; returns once its port is open."""
        if node.alive():
            return
        heap, gc_log, jvm_opts = self._launch_args
        _launch(node, heap, gc_log, jvm_opts)
        deadline = time.monotonic() + 120
        while not port_open(HOST, node.port):
            if not node.alive():
                raise OracleError(f"Kafka node {node.node_id} exited during restart:\n{node.log_tail()}")
            if time.monotonic() > deadline:
                raise OracleError(f"Kafka node {node.node_id} did not reopen its port:\n{node.log_tail()}")
            time.sleep(0.1)

    @property
    def bootstrap(self) -> str:
        """Comma-separated bootstrap servers, e.g. ``127.0.0.1:41234`` for one node."""
        return ",".join(n.bootstrap for n in self.nodes)

    def listener_bootstrap(self, listener: str) -> str:
        """Bootstrap servers of an extra listener (``start_kafka(extra_listeners=...)``) by its name."""
        return ",".join(f"{HOST}:{n.extra_listeners[listener][1]}" for n in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes if n.pid is not None]

    def check_alive(self) -> None:
        dead = [n for n in self.nodes if not n.alive()]
        if dead:
            raise OracleError(
                "Kafka node(s) died: "
                + ", ".join(str(n.node_id) for n in dead)
                + "\n"
                + "\n".join(n.log_tail() for n in dead)
            )

    def rss_bytes(self) -> dict[int, int]:
        """Resident memory of each node's JVM, by node id (Linux /proc)."""
        out = {}
        for n in self.nodes:
            if n.pid is None:
                continue
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{n.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[n.node_id] = int(line.split()[1]) * 1024
        return out

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every node (controlled shutdown), then SIGKILL after ``timeout`` s; delete the dir."""
        procs = [n.proc for n in self.nodes if n.proc is not None]
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in procs:
            stop_pid(p, timeout=0.1)  # SIGKILL what is left
        if not self._keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _node_properties(
    node: KafkaNode, all_nodes: list[KafkaNode], overrides: dict[str, str | None], static_quorum: bool = False
) -> dict[str, str | None]:
    values: dict[str, str | None] = {
        "node.id": str(node.node_id),
        "log.dirs": str(node.data_dir),
        "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}",
    }
    if node.extra_listeners:  # after PLAINTEXT (still the inter-broker listener) and CONTROLLER
        extra = ",".join(f"{name}://{HOST}:{port}" for name, (_, port) in node.extra_listeners.items())
        values["listeners"] = f"{values['listeners']},{extra}"
        values["advertised.listeners"] = f"{values['advertised.listeners']},{extra}"
        values["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT," + ",".join(
            f"{name}:{protocol}" for name, (protocol, _) in node.extra_listeners.items())
    if len(all_nodes) == 1 and not static_quorum:
        # dynamic quorum, formatted with --standalone (as the release quickstart does)
        values["controller.quorum.bootstrap.servers"] = f"{HOST}:{node.controller_port}"
    else:
        # static quorum: every node is a voter (combined broker+controller)
        values["controller.quorum.bootstrap.servers"] = None
        values["controller.quorum.voters"] = ",".join(
            f"{n.node_id}@{HOST}:{n.controller_port}" for n in all_nodes
        )
        rf = str(min(3, len(all_nodes)))
        isr = str(min(2, len(all_nodes)))
        values.update(
            {
                "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "transaction.state.log.min.isr": isr,
                "share.coordinator.state.topic.replication.factor": rf,
                "share.coordinator.state.topic.min.isr": isr,
            }
        )
    values.update(overrides)
    return values


def start_kafka(
    nodes: int = 1,
    *,
    heap: str = "512m",
    overrides: dict[str, str | None] | None = None,
    start_timeout: float | None = None,
    workdir: Path | None = None,
    gc_log: bool = False,
    jvm_opts: Sequence[str] = (),
    attempts: int = 3,
    poll_s: float = 0.1,
    extra_listeners: dict[str, str] | None = None,
    static_quorum: bool = False,
) -> KafkaCluster:
    """Start ``nodes`` combined (broker+controller) KRaft nodes on free loopback ports.

    Returns when every node's PLAINTEXT port accepts TCP, which Kafka only allows once the broker
    has caught up with the metadata log and been unfenced (see oracle/NOTES.md). ``overrides``
    are extra server.properties (``None`` deletes a key). Retries with new ports if a port was
    taken between choosing and binding. ``start_timeout`` defaults to 120 s for one node and 180 s
    for more (measured: 8 s / 24 s idle, up to 30 s / 74 s on a loaded 2-core machine).
    ``extra_listeners`` adds listeners (name -> security protocol, e.g. ``{"SASL_PLAINTEXT": "SASL_PLAINTEXT"}``)
    on free ports besides PLAINTEXT (still the inter-broker listener) and CONTROLLER; their
    ``listener.name.<name>.*`` settings go in ``overrides``; ``cluster.listener_bootstrap(name)`` is their address.
    ``static_quorum`` makes even one node a static quorum (controller.quorum.voters, formatted without
    --standalone: kraft.version 0); more than one node always is.
    """
    ensure_installed()
    if start_timeout is None:
        start_timeout = 120.0 if nodes == 1 else 180.0
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return _start_once(nodes, heap, overrides or {}, start_timeout, workdir, gc_log, jvm_opts, poll_s,
                               extra_listeners or {}, static_quorum)
        except _PortRace as e:
            last = e
    raise OracleError(f"could not start Kafka after {attempts} attempts: {last}")


def _launch(n: KafkaNode, heap: str, gc_log: bool, jvm_opts: Sequence[str]) -> None:
    gc = [f"-Xlog:gc*:file={n.log_dir}/kafkaServer-gc.log:time,tags:filecount=10,filesize=100M"]
    cmd = java_command(
        "kafka.Kafka",
        [str(n.properties)],
        heap=[f"-Xms{heap}", f"-Xmx{heap}"],
        log4j=BROKER_LOG4J,
        jvm_opts=[*(gc if gc_log else []), f"-Dkafka.logs.dir={n.log_dir}", *jvm_opts],
    )
    with open(n.log_dir / "kafka.out", "ab") as out:
        n.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, preexec_fn=die_with_parent_hook())


class _PortRace(Exception):
    pass


def _start_once(
    count: int,
    heap: str,
    overrides: dict[str, str | None],
    start_timeout: float,
    workdir: Path | None,
    gc_log: bool,
    jvm_opts: Sequence[str],
    poll_s: float,
    extra_listeners: dict[str, str],
    static_quorum: bool = False,
) -> KafkaCluster:
    t0 = time.monotonic()
    keep = os.environ.get("SAMSA_KEEP_ORACLE") == "1"
    base = Path(tempfile.mkdtemp(prefix="samsa-oracle-", dir=workdir))
    width = 2 + len(extra_listeners)
    ports = free_ports(width * count)
    nodes = [
        KafkaNode(i + 1, port=ports[width * i], controller_port=ports[width * i + 1], dir=base / f"node{i + 1}",
                  extra_listeners={name: (protocol, ports[width * i + 2 + j])
                                   for j, (name, protocol) in enumerate(extra_listeners.items())})
        for i in range(count)
    ]
    cluster = KafkaCluster(nodes=nodes, workdir=base, cluster_id=random_cluster_id(), _keep=keep)
    template = SERVER_PROPERTIES.read_text()
    ok = False
    try:
        for n in nodes:
            n.log_dir.mkdir(parents=True)
            n.data_dir.mkdir(parents=True)
            n.properties.write_text(render_properties(template, _node_properties(n, nodes, overrides, static_quorum)))
        # format all log dirs (one storage-tool JVM per node, in parallel)
        formats = []
        for n in nodes:
            args = ["format", "--cluster-id", cluster.cluster_id, "--config", str(n.properties)]
            if count == 1 and not static_quorum:
                args.append("--standalone")
            cmd = java_command("kafka.tools.StorageTool", args, heap=["-Xmx256m"], jvm_opts=QUICK_JVM_OPTS)
            out = open(n.log_dir / "format.out", "wb")  # closed below
            formats.append((n, out, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                     stdin=subprocess.DEVNULL, preexec_fn=die_with_parent_hook())))
        for n, out, p in formats:
            try:
                rc = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stop_pid(p, timeout=1)
                rc = -1
            out.close()
            if rc != 0:
                raise OracleError(
                    f"kafka.tools.StorageTool format failed (rc {rc}) for node {n.node_id}:\n"
                    + (n.log_dir / "format.out").read_text(errors="replace")[-3000:]
                )
        # start the brokers
        cluster._launch_args = (heap, gc_log, tuple(jvm_opts))
        for n in nodes:
            _launch(n, heap, gc_log, jvm_opts)
        deadline = time.monotonic() + start_timeout
        pending = list(nodes)
        while pending:
            for n in list(pending):
                if port_open(HOST, n.port):
                    pending.remove(n)
                elif not n.alive():
                    tail = n.log_tail()
                    if "Address already in use" in tail:
                        raise _PortRace(f"port taken for node {n.node_id}")
                    raise OracleError(f"Kafka node {n.node_id} exited during startup:\n{tail}")
            if pending and time.monotonic() > deadline:
                raise OracleError(
                    f"Kafka did not open its port(s) within {start_timeout}s:\n"
                    + "\n".join(n.log_tail() for n in pending)
                )
            if pending:
                time.sleep(poll_s)
        cluster.start_seconds = time.monotonic() - t0
        ok = True
        return cluster
    finally:
        if not ok:
            cluster.stop(timeout=5)


@contextlib.contextmanager
def kafka_cluster(nodes: int = 1, *, stop_timeout: float = 20.0, **kwargs: object) -> Iterator[KafkaCluster]:
    """Context manager: start Kafka (see ``start_kafka``), yield the cluster, always stop it."""
    cluster = start_kafka(nodes, **kwargs)  # type: ignore[arg-type]
    try:
        yield cluster
    finally:
        cluster.stop(timeout=stop_timeout)


@contextlib.contextmanager
def kafka_oracle(nodes: int = 1, **kwargs: object) -> Iterator[str]:
    """Context manager yielding only the bootstrap string, e.g. ``"127.0.0.1:41234"``."""
    with kafka_cluster(nodes, **kwargs) as cluster:
        yield cluster.bootstrap


def _main() -> None:
    """``python compat-tests/oracle_fixture.py [NODES]``: start, print figures, stop (a smoke test)."""
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    with kafka_cluster(n) as c:
        print(f"{n} node(s) up in {c.start_seconds:.1f}s at {c.bootstrap} (pids {c.pids})", flush=True)
        t = time.monotonic()
        res = run_kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server",
                             c.bootstrap, "describe", "--status")
        print(res.stdout.strip())
        print(f"tool run: {time.monotonic() - t:.1f}s")
        print("RSS MiB:", {k: v // 2**20 for k, v in c.rss_bytes().items()})
        t = time.monotonic()
    print(f"stopped in {time.monotonic() - t:.1f}s")


if __name__ == "__main__":
    _main()
