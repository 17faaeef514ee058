"""Each handler module's version notes, its ApiSpec declaration, the dispatch tables and ApiVersions agree."""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

import pytest

from samsa.broker import handlers
from samsa.broker.client import Connection
from samsa.broker.context import ApiSpec
from samsa.broker.handlers import CONTROLLER_HANDLERS, HANDLERS, api_versions
from samsa.kproto.messages import request_class, response_class

# "Produce (key 0), v3-v12." / "AlterConfigs (key 33, v0-v2)" / "OffsetDelete (key 47), v0 (KIP-496)."
_NOTE = re.compile(
    r"(?P<name>[A-Z][A-Za-z]+) \(key (?P<key>\d+)"
    r"(?:, v(?P<lo_in>\d+)(?:-v(?P<hi_in>\d+))?\)|\),? v(?P<lo>\d+)(?:-v(?P<hi>\d+))?)")

Note = tuple[str, int, int, int]  # (API name, key, min_version, max_version)


def parse_notes(text: str) -> list[Note]:
    """Every "Name (key K), vA-vB" (or "Name (key K, vA-vB)", or a single "vA") in a docstring."""
    out = []
    for m in _NOTE.finditer(" ".join(text.split())):
        lo = m["lo_in"] if m["lo_in"] is not None else m["lo"]
        hi = m["hi_in"] if m["lo_in"] is not None else m["hi"]
        out.append((m["name"], int(m["key"]), int(lo), int(hi if hi is not None else lo)))
    return out


def _modules() -> list[ModuleType]:
    return [importlib.import_module(f"{handlers.__name__}.{info.name}")
            for info in pkgutil.iter_modules(handlers.__path__)]


def _declared(module: ModuleType) -> list[ApiSpec]:
    return [v for v in vars(module).values() if isinstance(v, ApiSpec)]


MODULES = _modules()


def test_the_parser_reads_each_form_and_sees_a_drift() -> None:
    assert parse_notes("Produce (key 0), v3-v12.\n\nv3 requires") == [("Produce", 0, 3, 12)]
    assert parse_notes("AlterConfigs (key 33, v0-v2) and IncrementalAlterConfigs (key 44, v0-v1).") == [
        ("AlterConfigs", 33, 0, 2), ("IncrementalAlterConfigs", 44, 0, 1)]
    assert parse_notes("OffsetDelete (key 47), v0 (KIP-496).") == [("OffsetDelete", 47, 0, 0)]
    assert parse_notes("Fetch\n(key 1), v13-v17, replica") == [("Fetch", 1, 13, 17)]
    # The note write_txn_markers.py carried before the declarations existed: v1-v2 while v1 was advertised.
    drifted = parse_notes("WriteTxnMarkers (key 27), v1-v2 (Kafka 4 removed v0).")
    assert drifted == [("WriteTxnMarkers", 27, 1, 2)]
    assert (27, 1, 2) != (27, 1, 1)


def test_every_handler_module_declares_what_its_notes_say() -> None:
    handler_modules = [m for m in MODULES if _declared(m)]
    assert len(handler_modules) == len(MODULES) == 58
    for module in MODULES:
        doc = module.__doc__ or ""
        declared = sorted((s.key, s.min_version, s.max_version) for s in _declared(module))
        notes = parse_notes(doc)
        assert sorted((k, lo, hi) for _, k, lo, hi in notes) == declared, module.__name__
        if len(declared) == 1:
            # A one-API module names it, with its versions, on the docstring's first line.
            first = parse_notes(doc.splitlines()[0])
            assert [(k, lo, hi) for _, k, lo, hi in first] == declared, module.__name__


def test_the_notes_name_the_api_kio_has_under_that_key() -> None:
    for module in MODULES:
        for name, key, lo, hi in parse_notes(module.__doc__ or ""):
            for version in range(lo, hi + 1):
                assert request_class(key, version).__name__ == f"{name}Request", (module.__name__, version)
                assert response_class(key, version).__name__ == f"{name}Response", (module.__name__, version)


def test_the_tables_hold_exactly_the_declared_specs_each_with_its_modules_handler() -> None:
    declared = {id(s): (m, s) for m in MODULES for s in _declared(m)}
    used: set[int] = set()
    for table in (HANDLERS, CONTROLLER_HANDLERS):
        for key, api in table.items():
            assert key == api.spec.key
            assert id(api.spec) in declared, key  # the table's range is a module's declaration, not a copy
            module, _ = declared[id(api.spec)]
            assert api.handler.__module__ == module.__name__, key
            used.add(id(api.spec))
    assert used == set(declared), "a declared ApiSpec that no table serves"


def _as_list(table: dict[int, ApiSpec]) -> list[dict[str, int]]:
    return [{"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
            for s in sorted(table.values(), key=lambda s: s.key)]


def test_api_versions_advertises_exactly_the_declared_ranges_on_both_listeners() -> None:
    assert api_versions.api_keys(False) == _as_list({k: a.spec for k, a in HANDLERS.items()})
    assert api_versions.api_keys(True) == _as_list({k: a.spec for k, a in CONTROLLER_HANDLERS.items()})


def test_a_running_broker_advertises_the_declared_ranges(conn: Connection) -> None:
    assert conn.versions == {k: (a.min_version, a.max_version) for k, a in HANDLERS.items()}


def test_a_bad_range_is_refused_at_declaration() -> None:
    with pytest.raises(ValueError):
        ApiSpec(key=0, min_version=5, max_version=3)
