"""How `samsa serve` writes its log lines: Kafka-like text, or one JSON object per line for log shippers.

JSON lines carry `timestamp` (ISO 8601, UTC, milliseconds), `level`, `logger`, `message` and, when a record
carries one, `exception` (the formatted traceback), so Loki, Elasticsearch or `jq` read them without a
parsing rule. Each line is one object: a message or traceback with newlines stays inside its JSON string.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from types import TracebackType
from typing import Final, Literal

LogFormat = Literal["text", "json"]
LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
                         .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def configure_logging(level: str, log_format: LogFormat) -> None:
    """The root logger writes to stderr at `level` in `log_format` (what logging.basicConfig did before)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    if log_format == "json":
        # Whatever else reaches stderr must be a JSON line too: Python's warnings and an uncaught
        # exception's traceback (printed by sys.excepthook) go through the same handler.
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    logging.getLogger("samsa").critical("uncaught %s", kind.__name__, exc_info=(kind, value, tb))
