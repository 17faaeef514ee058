"""The `samsa` command line: `serve` runs a broker; `topics`, `produce` and `consume` talk to any broker."""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path

from samsa.broker import lean_start

if sys.argv[:1] == ["-m"]:  # `python -m samsa.broker.cli` while Python imports this package (lean_start.py)
    lean_start.hide_unused_imports()

from samsa.broker.config import BrokerConfig, check_static_config, read_properties


class ServeConfigError(Exception):
    """A `samsa serve` argument that cannot be read; the message is the one line printed before exiting."""


def _host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    if not port.isdigit() or int(port) > 65535:
        raise ServeConfigError(f"Invalid address {text}: expected HOST:PORT with a port from 0 to 65535")
    return host.strip("[]") or "0.0.0.0", int(port)


def _endpoint(host: str, port: int, name: str = "PLAINTEXT") -> str:
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def given_config(args: argparse.Namespace) -> dict[str, str]:
    """The broker keys the user gave: the --config file's, then each --override (which wins)."""
    given: dict[str, str] = {}
    if args.config:
        try:
            given.update(read_properties(Path(args.config)))
        except (OSError, UnicodeDecodeError) as e:
            raise ServeConfigError(f"Cannot read --config {args.config}: {e}") from e
    for item in args.override or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ServeConfigError(f"Invalid --override {item!r}: expected KEY=VALUE")
        given[key.strip()] = value.strip()
    return given


def broker_config_from_args(args: argparse.Namespace) -> BrokerConfig:
    """The broker's config from `samsa serve`'s arguments; ServeConfigError for an argument that cannot be
    read (values are checked against the schema by check_static_config)."""
    overrides = given_config(args)
    # The first client listener (not one of controller.listener.names) is the one --listen / --advertise
    # address; the other listeners keep what the file or --override says.
    controllers = {n.strip().upper() for n in overrides.get("controller.listener.names", "").split(",") if n.strip()}
    items = [i.strip() for i in overrides.get("listeners", "").split(",") if i.strip()]
    first = next((i for i, item in enumerate(items) if item.split("://", 1)[0].upper() not in controllers), None)
    name = items[first].split("://", 1)[0] if first is not None else "PLAINTEXT"
    listen = args.listen
    if listen is None:
        listen = items[first].split("://", 1)[-1] if first is not None else "127.0.0.1:9092"
    host, port = _host_port(listen)
    advertised = {i.strip().split("://", 1)[0].upper(): i.strip()
                  for i in overrides.get("advertised.listeners", "").split(",") if i.strip()}
    advertise = args.advertise
    if advertise is None and name.upper() in advertised:
        advertise = advertised[name.upper()].split("://", 1)[-1]
    adv_host, adv_port = _host_port(advertise, port) if advertise else (host if host != "0.0.0.0" else "127.0.0.1",
                                                                      port)
    # What the broker listens on and advertises were given at start (flags or file): DescribeConfigs reports
    # them as static broker configs, as Kafka does.
    if first is None:
        items.append(_endpoint(host, port, name))
    elif args.listen is not None:
        items[first] = _endpoint(host, port, name)
    overrides["listeners"] = ",".join(items)
    advertised[name.upper()] = _endpoint(adv_host, adv_port, name)
    overrides["advertised.listeners"] = ",".join(advertised.values())
    data_dir = args.data_dir
    if data_dir is None:
        data_dir = overrides.get("log.dirs", overrides.get("log.dir", "./samsa-data")).split(",")[0]
    if getattr(args, "node_id", None) is not None:
        overrides["node.id"] = str(args.node_id)
    if getattr(args, "controller_quorum", None):
        overrides["controller.quorum.voters"] = args.controller_quorum
    if getattr(args, "controller_listen", None):
        overrides["samsa.controller.listen"] = args.controller_listen
    if getattr(args, "roles", None):
        overrides["process.roles"] = args.roles
    if getattr(args, "cluster_id", None):
        overrides["samsa.cluster.id"] = args.cluster_id
    return BrokerConfig(
        overrides=overrides, listen_host=host, listen_port=port, advertised_host=adv_host,
        advertised_port=adv_port, data_dir=Path(data_dir),
    )


def load_serve_config(args: argparse.Namespace, log: logging.Logger) -> BrokerConfig | None:
    """The validated config, or None after logging why the broker must not start (one line per bad key).

    Every key given is checked against the schema before anything listens: a bad value refuses the start;
    an unknown key or a Kafka key Samsa does not implement is one WARN line each.
    """
    try:
        given = given_config(args)
        config = broker_config_from_args(args)
        report = check_static_config({**given, **{k: v for k, v in config.overrides.items() if k not in given}})
    except ServeConfigError as e:
        log.error("samsa serve: %s", e)
        return None
    for warning in report.warnings:
        log.warning("%s", warning)
    for error in report.errors:
        log.error("samsa serve: %s", error)
    if report.errors:
        return None
    # Each listener must be usable as configured (its protocol, key and trust stores, SASL mechanisms and
    # JAAS users) before anything listens: a listener is never served half-secured.
    from samsa.broker.security.channel import ListenerSecurity
    from samsa.broker.security.client import controller_security, inter_broker_security
    from samsa.broker.security.listeners import ListenerConfigError, broker_listeners, controller_listener

    try:
        for listener in broker_listeners(config):
            ListenerSecurity.from_config(config, listener)
        address = config.controller_listen()
        controller = None if address is None else controller_listener(config, address)
        if controller is not None:
            ListenerSecurity.from_config(config, controller)
        inter_broker_security(config)  # this broker's own logins towards the others
        controller_security(config)
    except ListenerConfigError as e:
        log.error("samsa serve: %s", e)
        return None
    return config


SHUTDOWN_HANDOVER_S = 5.0


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from samsa.broker.broker import Broker
    from samsa.broker.log_format import configure_logging
    from samsa.broker.malloc_tuning import maybe_tune_malloc
    from samsa.broker.server import serve

    configure_logging(args.log_level, args.log_format)
    log = logging.getLogger("samsa")
    tuned = maybe_tune_malloc()  # request-sized buffers reused rather than faulted in per request (its docstring)
    if tuned:
        log.debug("malloc thresholds set: %s", tuned)
    loaded = load_serve_config(args, log)
    if loaded is None:
        return 1
    config = loaded
    started = time.monotonic()
    broker = Broker(config)
    # main() turned the cyclic GC off for the imports and the broker's construction (they allocate much
    # and free little: 6 ms less start-up). What they built lives as long as the process, so it is moved
    # out of the collector's sight (gc.freeze) and later collections only walk what serving allocates.
    gc.freeze()
    gc.enable()

    async def main() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:

                async def ready(port: int) -> None:
                    log.info("Samsa broker %d ready on %s:%d (advertised %s:%d) in %.2f s; data in %s",
                             broker.node_id, config.listen_host, port, config.advertised_host,
                             config.advertised_port, time.monotonic() - started, config.data_dir)

                tg.start_soon(lambda: serve(broker, config.listen_host, config.listen_port, started=ready))
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    # Kafka's order: leadership moves away (controlled shutdown), the quorum leader hands
                    # over (EndQuorumEpoch), then the sockets close. Both are bounded.
                    with anyio.move_on_after(SHUTDOWN_HANDOVER_S):
                        await broker.lifecycle.controlled_shutdown(SHUTDOWN_HANDOVER_S)
                    if broker.quorum.is_leader and not broker.single_voter:
                        broker.quorum.resign()
                        await anyio.sleep(0.2)  # let EndQuorumEpoch reach the other voters
                    tg.cancel_scope.cancel()
                    break

    backend_options = {}
    try:
        import uvloop  # noqa: F401

        backend_options["use_uvloop"] = True
    except ImportError:
        pass
    bind_error: OSError | None = None
    try:
        anyio.run(main, backend="asyncio", backend_options=backend_options)
    except BaseException as e:
        # A listener that cannot bind (a port in use, an address not on this host) is the operator's
        # error: one line naming it, not a traceback. Anything else is ours and keeps its traceback.
        bind_error = _bind_error(e)
        if bind_error is None:
            raise
    finally:
        broker.checkpoint()
        broker.close()
        log.info("shut down cleanly" if bind_error is None else "shut down: a listener could not bind")
    if bind_error is not None:
        why = (f"cannot listen: {bind_error.strerror or bind_error} "
               f"({getattr(bind_error, 'filename', None) or config.listen_host + ':' + str(config.listen_port)})")
        if args.log_format == "json":
            log.error("%s", why)  # every stderr line stays a JSON object
        else:
            print(f"samsa serve: {why}", file=sys.stderr)
        return 1
    return 0


def _bind_error(e: BaseException) -> OSError | None:
    """The OSError of a failed bind inside `e` (the task group wraps it in an ExceptionGroup), else None."""
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            found = _bind_error(inner)
            if found is not None:
                return found
        return None
    if isinstance(e, OSError) and e.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
        return e
    return None


DISTRIBUTION = "samsa-broker"


def _version() -> str:
    """The installed distribution's version (samsa-broker on PyPI; the import package is `samsa`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """--version, looked up only when asked: importlib.metadata costs ~14 ms of a broker's start-up."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"samsa {_version()}")
        parser.exit()


class _OverrideAction(argparse.Action):
    """A flag that stands for `--override KEY=VALUE` (it appends to the same list)."""

    def __init__(self, *args: object, config_key: str, **kwargs: object) -> None:
        self.config_key = config_key
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        overrides = list(getattr(namespace, self.dest, None) or [])
        overrides.append(f"{self.config_key}={values}")
        setattr(namespace, self.dest, overrides)


def main(argv: list[str] | None = None) -> int:
    serving = (sys.argv[1:] if argv is None else argv)[:1] == ["serve"]
    if serving:
        gc.disable()  # until the broker is built (cmd_serve)
        # kio registers hypothesis strategies for its types whenever hypothesis is importable (it is in
        # a test environment); a broker never needs them, and importing hypothesis costs ~0.5 s of
        # start-up. Marking it absent before kio is imported makes kio skip it.
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa, a Kafka-compatible broker in Python")
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    serve_p = sub.add_parser("serve", help="run a broker")
    serve_p.add_argument("--data-dir", default=None, help="data directory (default ./samsa-data)")
    serve_p.add_argument("--listen", default=None, help="HOST:PORT to listen on (default 127.0.0.1:9092)")
    serve_p.add_argument("--advertise", default=None, help="HOST:PORT clients should connect to")
    serve_p.add_argument("--config", default=None, help="a Kafka server.properties file")
    serve_p.add_argument("--override", action="append", help="KEY=VALUE, like kafka-server-start --override")
    serve_p.add_argument("--node-id", type=int, default=None)
    serve_p.add_argument("--controller-quorum", default=None, metavar="ID@HOST:PORT,...",
                         help="the metadata quorum's voters (controller.quorum.voters); default: this node alone")
    serve_p.add_argument("--controller-listen", default=None, metavar="HOST:PORT",
                         help="where this node's controller listener binds (a voter needs one)")
    serve_p.add_argument("--roles", default=None, help="process.roles: broker, controller, or broker,controller")
    serve_p.add_argument("--cluster-id", default=None,
                         help="the cluster id (default: derived from --controller-quorum, or random alone)")
    serve_p.add_argument("--metrics-listen", dest="override", action=_OverrideAction, metavar="HOST:PORT",
                         config_key="samsa.metrics.listen",
                         help="serve /metrics and /health/* over HTTP here (samsa.metrics.listen; default off)")
    serve_p.add_argument("--log-level", default=os.environ.get("SAMSA_LOG_LEVEL", "INFO"))
    serve_p.add_argument("--log-format", choices=("text", "json"), default=os.environ.get("SAMSA_LOG_FORMAT", "text"),
                         help="text (default) or json: one JSON object per line with timestamp, level, logger, "
                              "message and exception")
    serve_p.set_defaults(func=cmd_serve)

    if not serving:
        # The client commands' modules are left out of a broker's start-up (about 15 ms of imports).
        from samsa.broker.cli import commands

        commands.add_commands(sub, parser)  # topics, produce, consume, groups, config, cluster up|down|info|health
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
