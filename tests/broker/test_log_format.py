"""`samsa serve --log-format json`: every line the broker writes is one JSON object with timestamp (ISO 8601
UTC), level, logger and message, and a logged exception carries its traceback as `exception`."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
from pathlib import Path

from samsa.broker import launcher
from samsa.broker.log_format import JsonFormatter

KEYS = {"timestamp", "level", "logger", "message"}


def parse_lines(text: str) -> list[dict[str, object]]:
    """Each line of a broker's log (the launcher's `$ command` line aside) as a JSON object."""
    lines = [line for line in text.splitlines() if line and not line.startswith("$ ")]
    parsed = []
    for line in lines:
        obj = json.loads(line)  # raises on a line that is not JSON
        assert isinstance(obj, dict) and KEYS <= obj.keys(), line
        assert str(obj["timestamp"]).endswith("Z"), line
        datetime.fromisoformat(str(obj["timestamp"]).replace("Z", "+00:00"))
        parsed.append(obj)
    return parsed


def test_json_formatter_has_the_fields_and_the_exception() -> None:
    formatter = JsonFormatter()
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord("samsa.x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    line = formatter.format(record)
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["level"] == "ERROR" and obj["logger"] == "samsa.x" and obj["message"] == "failed here"
    assert "ValueError: bad" in obj["exception"] and "Traceback" in obj["exception"]
    stamp = datetime.fromisoformat(obj["timestamp"].replace("Z", "+00:00"))
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    plain = json.loads(formatter.format(logging.LogRecord("a", logging.INFO, __file__, 1, "ok", None, None)))
    assert "exception" not in plain and plain["message"] == "ok"


def test_serve_log_format_json_writes_only_json_lines(tmp_path: Path) -> None:
    port = launcher.free_port()
    log_path = tmp_path / "samsa.log"
    served = launcher.start_serve(launcher.ServeOptions(data_dir=tmp_path / "data", port=port,
                                                        extra_args=("--log-format", "json")), log_path)
    try:
        served.wait_listening()
    finally:
        code = served.stop(15.0)
    assert code == 0, served.log_tail()
    lines = parse_lines(log_path.read_text())
    messages = [str(line["message"]) for line in lines]
    assert any("ready on" in m for m in messages), messages
    assert any("shut down cleanly" in m for m in messages), messages
    assert {line["level"] for line in lines} <= {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
