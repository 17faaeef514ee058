"""The production modules' shape: layers point one way, no import circles, no module over 600 lines.

Layers, top to bottom: broker -> raft -> storage -> kproto. A module may import its own layer and the
layers below it, never one above (kproto imports nothing of ours). Every import counts: top-level,
function-level and under `if TYPE_CHECKING:` alike, since a circle dodged by a late import is still a
circle a reader must hold in their head. The graph is read from the source with `ast`, nothing is run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("kproto", "storage", "raft", "broker")  # bottom first
PACKAGE = "samsa"

# Circles that belong to files whose owners are still breaking them. Each entry is the exact set of
# modules in one strongly connected component; remove an entry once its circle is gone (the test
# fails on an entry that no longer matches, so the list cannot go stale).
MAX_MODULE_LINES = 600
# Modules still over MAX_MODULE_LINES whose split belongs to another change; the test fails once an
# entry is no longer over, so remove it then.
KNOWN_LONG_MODULES: frozenset[str] = frozenset()

# Empty: every circle is a failure. (The last one, raft.core <-> election <-> replication, went when the
# two halves were typed against raft.core_view's Protocol instead of RaftCore.)
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _production_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            modules[_module_name(path)] = path
    return modules


def _imported(node: ast.AST, importer: str, is_package: bool, modules: dict[str, Path]) -> Iterator[str]:
    """The production modules that one import statement loads (a name imported from a package that is
    itself a module counts as that module)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in modules:
                yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = importer.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in modules:
                yield submodule
            elif source in modules:
                yield source


def import_graph() -> dict[str, set[str]]:
    modules = _production_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets: set[str] = set()
        for node in ast.walk(tree):
            targets.update(_imported(node, name, path.name == "__init__.py", modules))
        targets.discard(name)
        graph[name] = targets
    return graph


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[1])


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_graph_sees_the_known_imports() -> None:
    # A guard on the reader itself: an empty graph would pass every check below.
    graph = import_graph()
    assert "samsa.kproto.records" in graph["samsa.storage.segment"] or any(
        m.startswith("samsa.kproto.") for m in graph["samsa.storage.segment"]
    )
    assert "samsa.raft.core" in graph["samsa.raft"]
    assert sum(len(targets) for targets in graph.values()) > 200


def test_layers_point_one_way() -> None:
    graph = import_graph()
    upward = sorted(
        f"{importer} -> {imported}"
        for importer, targets in graph.items()
        for imported in targets
        if _layer(imported) > _layer(importer)
    )
    assert upward == [], "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_import_circles_but_the_known_ones() -> None:
    circles = set(strongly_connected(import_graph()))
    new = sorted(sorted(c) for c in circles - set(KNOWN_CIRCLES))
    gone = sorted(sorted(c) for c in set(KNOWN_CIRCLES) - circles)
    assert new == [], f"import circles: {new}"
    assert gone == [], f"KNOWN_CIRCLES lists circles that are gone or changed, remove or update them: {gone}"


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, {frozenset({"a", "b"})}),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, set()),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, {frozenset({"a", "b", "c"})}),
    ],
)
def test_strongly_connected_finds_circles(graph: dict[str, set[str]], expected: set[frozenset[str]]) -> None:
    assert set(strongly_connected(graph)) == expected


def test_no_production_module_over_600_lines() -> None:
    long = {name for name, path in _production_modules().items()
            if len(path.read_text().splitlines()) > MAX_MODULE_LINES}
    too_long = sorted(long - KNOWN_LONG_MODULES)
    assert too_long == [], f"modules over {MAX_MODULE_LINES} lines, split them: {too_long}"
    assert sorted(KNOWN_LONG_MODULES - long) == [], "KNOWN_LONG_MODULES lists modules that are short now"
