"""The `samsa` console script: hides what the program never uses (lean_start.py), then runs the command line."""

from __future__ import annotations

from samsa.broker import lean_start


def main() -> int:
    lean_start.hide_unused_imports()
    from samsa.broker.cli import main as cli_main

    return cli_main()
