"""The layering of the code, read from the source with ``ast``: imports only point down
protocol → storage → verifier → odfd, and no module imports itself back through others.

Every import counts, at module level or inside a function, ``TYPE_CHECKING`` blocks included: a
lazy or typing-only import still ties the two modules together.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "storage", "verifier", "odfd")
"""Bottom first: a module may import its own layer and the ones before it."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for layer in LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _imported(module: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Our modules that ``module`` imports (the longest known prefix of each name), with lines."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import sub` imports the submodule; `from pkg import name`, the package.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in known:
                    if candidate != module:
                        yield candidate, node.lineno
                    break


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for target, line in _imported(module, path, known):
            edges.setdefault(target, line)
    return graph


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_imports_only_point_down_the_layers() -> None:
    upward = [
        f"{module} (line {line}) imports {target}"
        for module, edges in _graph().items()
        for target, line in edges.items()
        if _layer(target) > _layer(module)
    ]
    assert upward == [], "upward imports:\n" + "\n".join(upward)


def test_no_import_circles() -> None:
    graph = _graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert circles == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_the_check_sees_imports() -> None:
    """The graph is not vacuous: known edges of each kind are found."""
    graph = _graph()
    assert "protocol.errors" in graph["storage.errors"]  # from-import
    assert "storage.ipfs_client" in graph["storage.stores.ipfs"]
    assert "protocol.model._enums_generated" in graph["protocol.model.resource"]
    assert all(_layer(m) == 0 for m in graph["protocol.model._generated"])
