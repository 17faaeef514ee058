"""What the `samsa` program (samsa.broker.entry, `python -m samsa.broker.cli`) does before anything imports kio.

kio's phantom types import `hypothesis` whenever it is installed, only to register property-test
strategies. That import is half of the CPU a `samsa` start costs (0.8 s of user time for `samsa --help`
against 0.4 s without it, on this machine), and the program never uses the strategies, so it hides the
package from itself: a None entry in sys.modules makes `import hypothesis` raise ImportError, which kio
expects. A program that imports Samsa as a library is left alone.
"""

from __future__ import annotations

import sys


def hide_unused_imports() -> None:
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]  # Python's documented "not importable"
