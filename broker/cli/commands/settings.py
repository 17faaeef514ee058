"""Where the CLI connects: --bootstrap-server, SAMSA_BOOTSTRAP_SERVERS, named profiles in profiles.toml; and how:
--command-config (or a profile's command_config), Kafka client properties with the listener's TLS and SASL."""

from __future__ import annotations

import argparse
import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.broker.cli.commands.errors import CliError

if TYPE_CHECKING:
    from samsa.broker.security.client import ClientSecurity

DEFAULT_PORT = 9092  # Kafka's default listener port, as kafka-*.sh and rpk assume
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ENV_BOOTSTRAP = "SAMSA_BOOTSTRAP_SERVERS"
ENV_PROFILE = "SAMSA_PROFILE"
ENV_PROFILES_FILE = "SAMSA_PROFILES_FILE"
DEFAULT_REQUEST_TIMEOUT_MS = 30000  # Kafka's request.timeout.ms


def profiles_path() -> Path:
    """$SAMSA_PROFILES_FILE, else $XDG_CONFIG_HOME/samsa/profiles.toml (~/.config/samsa/profiles.toml)."""
    if os.environ.get(ENV_PROFILES_FILE):
        return Path(os.environ[ENV_PROFILES_FILE])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "samsa" / "profiles.toml"


@dataclass(frozen=True, slots=True)
class Settings:
    servers: tuple[tuple[str, int], ...]
    source: str  # where the servers came from, for error messages
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    client_id: str = "samsa-cli"
    security: ClientSecurity | None = None  # TLS / SASL of the listener (None: PLAINTEXT)


def parse_servers(text: str, source: str = "--bootstrap-server") -> tuple[tuple[str, int], ...]:
    """`host[:port][,host[:port]...]`; a missing port is 9092; IPv6 as [::1]:9092."""
    servers: list[tuple[str, int]] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        elif item.count(":") == 1:
            host, _, port_text = item.partition(":")
        else:
            host, port_text = item, ""
        if "://" in item or not host:
            raise CliError(f"{source}: {item!r} is not HOST:PORT (e.g. 127.0.0.1:9092)")
        if port_text == "":
            port = DEFAULT_PORT
        else:
            try:
                port = int(port_text)
            except ValueError:
                raise CliError(f"{source}: port {port_text!r} in {item!r} is not a number (HOST:PORT)") from None
            if not 0 < port < 65536:
                raise CliError(f"{source}: port {port} in {item!r} is out of range 1-65535")
        servers.append((host, port))
    if not servers:
        raise CliError(f"{source} is empty: give HOST:PORT (e.g. 127.0.0.1:9092)")
    return tuple(servers)


def _load_profiles(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CliError(f"cannot read profiles file {path}: {e}") from None
    return data


def _profile(name: str | None, path: Path) -> tuple[str, dict[str, Any]] | None:
    data = _load_profiles(path)
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise CliError(f"{path}: [profiles] must be a table of [profiles.NAME] tables")
    if name is None:
        name = data.get("default")
        if name is None:
            return None
    entry = profiles.get(name)
    if not isinstance(entry, dict):
        known = ", ".join(sorted(profiles)) or "none"
        raise CliError(f"no profile {name!r} in {path} (profiles there: {known}); add [profiles.{name}] "
                       "with bootstrap_servers = \"HOST:PORT\"")
    return name, entry


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Where (`_where`) and how: --command-config, else the profile's command_config, else PLAINTEXT."""
    settings, command_config = _where(args)
    command_config = getattr(args, "command_config", None) or command_config
    if not command_config:
        return settings
    return dataclasses.replace(settings, security=read_command_config(Path(command_config)))


def read_command_config(path: Path) -> ClientSecurity | None:
    """The TLS and SASL of a Kafka client properties file (what kafka-*.sh take as --command-config)."""
    from samsa.broker.config import read_properties
    from samsa.broker.security.client import client_security_from_properties
    from samsa.broker.security.listeners import ListenerConfigError

    try:
        return client_security_from_properties(read_properties(path), f"--command-config {path}")
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read --command-config {path}: {e}") from None
    except ListenerConfigError as e:
        raise CliError(str(e)) from None


def _where(args: argparse.Namespace) -> tuple[Settings, str | None]:
    """--bootstrap-server, else --profile NAME, else $SAMSA_BOOTSTRAP_SERVERS, else $SAMSA_PROFILE or the
    profiles file's `default`, else 127.0.0.1:9092; and the profile's command_config, if any."""
    timeout_ms = getattr(args, "request_timeout_ms", None)
    explicit = getattr(args, "bootstrap_server", None)
    if explicit:
        return Settings(parse_servers(explicit), "--bootstrap-server", timeout_ms or DEFAULT_REQUEST_TIMEOUT_MS), None
    profile_name = getattr(args, "profile", None)
    if not profile_name and os.environ.get(ENV_BOOTSTRAP):
        return Settings(parse_servers(os.environ[ENV_BOOTSTRAP], f"${ENV_BOOTSTRAP}"), f"${ENV_BOOTSTRAP}",
                        timeout_ms or DEFAULT_REQUEST_TIMEOUT_MS), None
    path = profiles_path()
    found = _profile(profile_name or os.environ.get(ENV_PROFILE) or None, path)
    if found is not None:
        name, entry = found
        servers = entry.get("bootstrap_servers")
        if isinstance(servers, list):
            servers = ",".join(map(str, servers))
        if not isinstance(servers, str):
            raise CliError(f"profile {name!r} in {path} has no bootstrap_servers = \"HOST:PORT\"")
        source = f"profile {name!r} ({path})"
        timeout = timeout_ms or int(entry.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS))
        command_config = entry.get("command_config")
        return (Settings(parse_servers(servers, source), source, timeout, str(entry.get("client_id", "samsa-cli"))),
                str(command_config) if command_config else None)
    return Settings(parse_servers(DEFAULT_BOOTSTRAP), "the default 127.0.0.1:9092",
                    timeout_ms or DEFAULT_REQUEST_TIMEOUT_MS), None


def add_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "-b", default=None, metavar="HOST:PORT[,...]",
                   help=f"brokers to start from (default: ${ENV_BOOTSTRAP}, the profile, or {DEFAULT_BOOTSTRAP})")
    p.add_argument("--profile", default=None, help=f"a named profile from {profiles_path()}")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="Kafka client properties for a TLS or SASL listener (security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.location, ...), as kafka-*.sh take them")
    p.add_argument("--request-timeout-ms", type=int, default=None,
                   help=f"give up on one request after this long (default {DEFAULT_REQUEST_TIMEOUT_MS})")
