"""CRC32C (Castagnoli), the record batch checksum: the crc32c package's C extension, loaded without its __init__.

`import crc32c` runs the package's __init__, which looks up its own version with importlib.metadata, and
that imports the email package: 14 ms of a broker's ~190 ms start-up, for a version string nobody reads.
The extension module `crc32c._crc32c` is the whole implementation, so it is loaded from the package's
directory by itself; should the layout ever differ, the package is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any

__all__ = ["crc32c"]


def _load() -> Callable[..., int]:
    spec = importlib.util.find_spec("crc32c")
    for directory in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, "_crc32c" + suffix)
            if os.path.exists(path):
                extension = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                if extension is None or extension.loader is None:
                    continue
                module: Any = importlib.util.module_from_spec(extension)
                extension.loader.exec_module(module)
                function: Callable[..., int] = module.crc32c
                return function
    import crc32c as package  # the layout changed: pay for the package's __init__

    fallback: Callable[..., int] = package.crc32c
    return fallback


# crc32c(data, value=0) -> the CRC32C of data, continuing from value (the C function itself).
crc32c: Callable[..., int] = _load()
