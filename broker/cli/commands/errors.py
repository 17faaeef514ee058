"""The CLI's one-line errors: Kafka error codes by Kafka's name and description, and the guard that turns
every failure of a command into one line on stderr and a non-zero exit (never a traceback)."""

from __future__ import annotations

import functools
import os
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any

from samsa.broker.cli.commands.kafka_errors import KAFKA_ERRORS
from samsa.broker.client import KafkaClientError

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130

# What a user can do about the errors a user meets most, appended to Kafka's description.
_HINTS: dict[int, str] = {
    3: "check the name with `samsa topics list`, or create it with `samsa topics create NAME`",
    36: "choose another name, or `samsa topics describe` the existing one",
    37: "a topic's partition count can only grow",
    38: "it cannot exceed the number of brokers (`samsa cluster info`)",
    40: "see the valid configs with `samsa topics describe-configs`",
    69: "check the name with `samsa groups list`",
    68: "stop the group's consumers first",
}


class CliError(Exception):
    """A user-facing failure: its message is the one line printed after `error: `."""


def kafka_error_text(code: int, context: str = "", message: str | None = None) -> str:
    """`NAME: description` (Kafka's Errors.java), with the broker's own message and a hint when there is one."""
    name, description = KAFKA_ERRORS.get(code, (f"ERROR_{code}", "An error code this client does not know."))
    if name == f"ERROR_{code}":
        try:
            from samsa.kproto.errors import ErrorCode

            name = ErrorCode(code).name.upper()
        except ValueError:
            pass
    text = f"{name}: {description}".rstrip()
    if message and message not in description:
        text += f" ({message})"
    if context:
        text = f"{context}: {text}"
    hint = _HINTS.get(code)
    return f"{text} Hint: {hint}." if hint else text


class KafkaError(CliError):
    """A Kafka error code in a response."""

    def __init__(self, code: int, context: str = "", message: str | None = None) -> None:
        super().__init__(kafka_error_text(code, context, message))
        self.code = code


def check(code: Any, context: str = "", message: str | None = None) -> None:
    """Raise KafkaError unless `code` (an int or kio ErrorCode) is NONE."""
    value = int(getattr(code, "value", code))
    if value != 0:
        raise KafkaError(value, context, message)


def describe_os_error(error: OSError, address: str) -> str:
    """One line for a failure to reach `address`, saying what to check."""
    if isinstance(error, socket.gaierror):
        host = address.rpartition(":")[0]
        return f"cannot resolve host {host!r} ({address}): unknown host; check --bootstrap-server"
    if isinstance(error, ConnectionRefusedError):
        return (f"cannot connect to {address}: connection refused; is a broker running there? "
                "(check --bootstrap-server and the port)")
    if isinstance(error, TimeoutError | socket.timeout):
        return f"no answer from {address} in time: is it a Kafka listener, and reachable? (check --bootstrap-server)"
    reason = error.strerror or str(error) or type(error).__name__
    return f"cannot talk to {address}: {reason}; check --bootstrap-server"


def print_error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)


def guarded(func: Callable[[Any], int]) -> Callable[[Any], int]:
    """Run a command: any failure is one line on stderr and exit 1; Ctrl-C is exit 130; a closed stdout
    pipe (`| head`) ends quietly. SAMSA_DEBUG=1 prints the traceback of an unexpected error as well."""

    @functools.wraps(func)
    def run(args: Any) -> int:
        try:
            return func(args)
        except CliError as e:
            print_error(str(e))
        except KafkaClientError as e:
            print_error(f"{e}; check --bootstrap-server")
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            # stdout went away (`samsa consume t | head`): not an error of ours; silence the flush at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_ERROR
        except OSError as e:
            print_error(describe_os_error(e, getattr(e, "samsa_address", "the broker")))
        except Exception as e:
            if os.environ.get("SAMSA_DEBUG") == "1":
                traceback.print_exc()
            print_error(f"unexpected {type(e).__name__}: {e} (a bug in samsa: please report it; "
                        "SAMSA_DEBUG=1 shows the traceback)")
        return EXIT_ERROR

    return run
