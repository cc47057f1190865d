"""The import graph of the package, read from source with :mod:`ast` (support for test_architecture).

Every import form counts, wherever it stands (module level or inside a function): ``import cmdare.x``,
``from cmdare import x``, ``from cmdare.x import y`` (``y`` a module or a name), relative imports
(``from . import y``, ``from ..x import y``), and ``importlib.import_module`` / ``import_module`` /
``__import__`` called with a string (an f-string counts by its literal prefix). A name imported from a
lazy package (its ``_HOME`` table read by ``planner/lazy_exports.py``) counts as an import of the name's
home module: ``from cmdare.planner.speed import fit_params`` imports ``speed_fit`` on first use.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

#: Folder of each room and the rooms it may import (besides itself).
ROOMS = {"collectors": "collectors", "planner": "planner", "demo": "demo", "tui": "tui"}
ALLOWED = {
    "collectors": set(),
    "planner": {"collectors"},
    "demo": {"collectors"},
    "tui": {"collectors", "planner", "demo"},
}
DYNAMIC = {"import_module", "__import__"}


def module_name(root: Path, folder: str, path: Path) -> str:
    """``cmdare.<folder>.<parts>`` of a file (``__init__`` names its package)."""
    parts = [p for p in path.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
    return ".".join(["cmdare", folder, *parts])


def read_sources(root: Path) -> dict[str, tuple[str, bool]]:
    """Every module of every room: name -> (source, is_package)."""
    out: dict[str, tuple[str, bool]] = {}
    for folder in ROOMS.values():
        for path in sorted((root / folder).rglob("*.py")):
            out[module_name(root, folder, path)] = (path.read_text("utf-8"), path.name == "__init__.py")
    return out


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


def _literal_prefix(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rstrip(".")
    return None


def imported_names(module: str, source: str, is_package: bool = False) -> Iterator[tuple[str, int]]:
    """Every dotted name ``module`` imports, with its line (``from a import b`` yields ``a`` and ``a.b``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(module, is_package, node.level, node.module)
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            target = _literal_prefix(node.args[0]) if name in DYNAMIC else None
            if target:
                yield target, node.lineno


def lazy_homes(source: str) -> dict[str, str]:
    """A lazy package's public names and their home modules: the ``_HOME`` dict literal of its
    ``__init__`` (empty for any other module)."""
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "_HOME" and isinstance(node.value, ast.Dict):
            pairs = zip(node.value.keys, node.value.values, strict=True)
            return {
                k.value: v.value
                for k, v in pairs
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
    return {}


def lazy_names(sources: Mapping[str, tuple[str, bool]]) -> dict[str, str]:
    """``package.name`` -> ``package.home`` for every name of every lazy package in ``sources``."""
    return {
        f"{package}.{name}": f"{package}.{home}"
        for package, (source, is_package) in sources.items()
        if is_package
        for name, home in lazy_homes(source).items()
    }


def graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """module -> {imported module of the package: line}. A name that is not a module maps to its module
    (a lazy package's name to its home module)."""
    lazy = lazy_names(sources)
    edges: dict[str, dict[str, int]] = {}
    for module, (source, is_package) in sources.items():
        out = edges.setdefault(module, {})
        for name, line in imported_names(module, source, is_package):
            name = lazy.get(name, name)
            while name and name not in sources:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                out.setdefault(name, line)
    return edges


def room_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "cmdare" and parts[1] in ROOMS else None


def layer_violations(sources: Mapping[str, tuple[str, bool]]) -> list[str]:
    """Imports that go against the rooms' one-way flow, any form, anywhere in a file."""
    bad = []
    for module, (source, is_package) in sources.items():
        home = room_of(module)
        for name, line in imported_names(module, source, is_package):
            room = room_of(name) if name.startswith("cmdare.") else None
            if name == "cmdare":
                room = None
            if home and room and room != home and room not in ALLOWED[home]:
                bad.append(f"{module}:{line} imports {name}")
    return bad


def cycles(edges: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def read_scripts(
    root: Path, folders: tuple[str, ...] = ("scripts", "benchmarks", "tests")
) -> dict[str, tuple[str, bool]]:
    """The scripts and benchmarks as modules named by their file (they import each other so); the tests as
    modules of the ``tests`` package (``tests.prom_server``), the one way they import each other."""
    return {
        (f"tests.{path.stem}" if folder == "tests" else path.stem): (path.read_text("utf-8"), False)
        for folder in folders
        for path in sorted((root / folder).glob("*.py"))
    }


def private_imports(
    sources: Mapping[str, tuple[str, bool]], checked: Callable[[str, str], bool]
) -> list[str]:
    """``module:line takes _name from other`` for each private name (``_x``, not ``__x__``) that a module
    takes from another module of ``sources`` by ``from other import _x`` (relative too), where
    ``checked(module, other)`` says the pair is held to the rule."""
    bad = []
    for module, (source, is_package) in sources.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = (
                _resolve_relative(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            if base == module or base not in sources or not checked(module, base):
                continue
            bad += [
                f"{module}:{node.lineno} takes {a.name} from {base}" for a in node.names if _private(a.name)
            ]
    return bad


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")
