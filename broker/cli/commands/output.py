"""How list/describe commands print: aligned tables (the default) or JSON (--output json)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def add_output_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", choices=["table", "json"], default="table", help="table (default) or json")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Columns padded to their widest cell, like rpk and kafka-consumer-groups.sh."""
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def emit(args: argparse.Namespace, data: Any, headers: Sequence[str], rows: Sequence[Sequence[Any]],
         title: str | None = None) -> None:
    if getattr(args, "output", "table") == "json":
        json.dump(data, sys.stdout, indent=None, sort_keys=False, default=str)
        sys.stdout.write("\n")
        return
    if title:
        print(title)
    table(headers, rows)


def records(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Mapping[str, Any]]:
    """Table rows as JSON objects, keyed by the lower-case header."""
    keys = [h.lower().replace("-", "_") for h in headers]
    return [dict(zip(keys, row, strict=True)) for row in rows]
