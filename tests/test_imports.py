"""No runtime import cycle among the project's packages (issue #22, "A layout that shows it").

What counts, precisely:

* **Modules**: every ``.py`` file of :data:`PACKAGES` (a package is its ``__init__``).
* **An edge** ``a → b``: ``a`` contains ``import b`` or ``from b import …`` (``from p import m``
  where ``p.m`` is a module counts as an edge to ``p.m``; relative imports are resolved), either
  at module level — at the top or nested in ``if`` / ``try`` / ``with`` blocks — or inside a
  function or class body (a lazy import still runs, and a cycle it closes is a runtime cycle).
  Imports under ``if TYPE_CHECKING:`` never run and do not count; nor do those under
  ``if __name__ == "__main__":`` (a script entry such as the evaluator sandbox's runs as
  ``__main__``, a module object of its own, so it is a composition root that may import the
  kit catalog), nor the implicit imports of a module's parent packages (Python initialises a
  package before any of its submodules, so a submodule importing a sibling never waits on the
  package's own body).
* **A cycle**: a strongly connected component of more than one module, or a module importing
  itself. The failure message prints one concrete cycle per component.

The fresh-interpreter test complements the graph: one subprocess imports every module in sorted
order and a second one in reverse order, so a module that only works when some other module
happened to be imported first fails with the real ``ImportError`` (e.g. "partially initialized
module").
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flows", "tasks_lib", "evaluators", "expectations")


def module_files() -> dict[str, Path]:
    """Every project module by dotted name (packages by their ``__init__``)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _never_imported(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``__name__ == "__main__"``: a block that never runs on import."""
    if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name):
        return test.left.id == "__name__" and any(
            isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run on import or call, skipping never-imported ``if`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and _never_imported(child.test):
            for orelse in child.orelse:
                yield from _runtime_imports(ast.Module(body=[orelse], type_ignores=[]))
        else:
            yield from _runtime_imports(child)


def _targets(name: str, path: Path, stmt: ast.Import | ast.ImportFrom,
             modules: dict[str, Path]) -> Iterator[str]:
    """Project modules one import statement loads (the most specific existing module)."""
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            dotted = alias.name
            while dotted and dotted not in modules:
                dotted = dotted.rpartition(".")[0]
            if dotted:
                yield dotted
        return
    base = stmt.module or ""
    if stmt.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for _ in range(stmt.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    if base not in modules:
        return
    for alias in stmt.names:
        sub = f"{base}.{alias.name}"
        yield sub if sub in modules else base


def import_edges() -> dict[str, dict[str, int]]:
    """``module → {project module it imports at run time: line of the first such import}``."""
    modules = module_files()
    edges: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges[name] = {}
        for stmt in _runtime_imports(tree):
            for target in _targets(name, path, stmt, modules):
                edges[name][target] = min(stmt.lineno, edges[name].get(target, stmt.lineno))
    return edges


def import_graph() -> dict[str, set[str]]:
    """``module → project modules it imports at run time`` (see the module docstring)."""
    return {name: set(targets) for name, targets in import_edges().items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    components.append(sorted(component))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return components


def one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the first module of ``component`` (breadth-first search)."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    return [start]


def import_cycles() -> list[str]:
    """One printable cycle per strongly connected component, each import with its line (empty:
    no cycle)."""
    edges = import_edges()
    graph = {name: set(targets) for name, targets in edges.items()}
    cycles = []
    for component in strongly_connected(graph):
        if len(component) > 1 or component[0] in graph[component[0]]:
            path = one_cycle(graph, component)
            steps = [f"{a} (line {edges[a][b]})" for a, b in pairwise(path)]
            cycles.append(f"{len(component)} modules {component}, e.g. "
                          + " → ".join([*steps, path[-1]]))
    return cycles


def test_no_import_cycle() -> None:
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_cycle_finder_reports_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert strongly_connected(graph)[0] == ["a", "b", "c"]
    assert one_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert sorted(map(len, strongly_connected(graph))) == [1, 1, 3]


def test_edges_count_lazy_imports_but_not_type_checking_or_main_blocks() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import pkg.a\n"
        "if TYPE_CHECKING:\n    from pkg import b\n"
        "def f():\n    from pkg import c\n"
        "if __name__ == '__main__':\n    from pkg import d\n"
        "from . import e\n"
        "from .e import something\n")
    modules = {name: Path(name) for name in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.e")}
    targets = {target for stmt in _runtime_imports(ast.parse(source))
               for target in _targets("pkg.x", Path("pkg/x.py"), stmt, modules)}
    assert targets == {"pkg.a", "pkg.c", "pkg.e"}


TOOL_SCRIPTS = {"tasks_lib.ledger.migrations.env"}
"""Files a tool runs in its own context rather than imports (Alembic's migration environment
reads ``alembic.context.config``, which exists only while Alembic runs it)."""


def test_every_module_imports_in_a_fresh_interpreter() -> None:
    names = sorted(set(module_files()) - TOOL_SCRIPTS)
    for order in (names, names[::-1]):
        done = subprocess.run(
            [sys.executable, "-c", "import importlib, sys\n"
             "for name in sys.argv[1:]: importlib.import_module(name)", *order],
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
