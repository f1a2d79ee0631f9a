"""diffrl's modules import each other in floors, without circles: read from the source, nothing imported.

The graph has one node per module of src/diffrl (a package is its ``__init__.py``) and one edge
from a module to every other diffrl module it imports:

* every ``import`` statement counts, at module level AND inside functions. A lazy import inside a
  function is as much a dependency as one at the top (the function cannot run without the other
  module); written to dodge a circle, it only moves the failure from import time to call time and
  leaves the order the modules must load in unwritten. So a lazy import that goes up a floor
  counts like any other.
* ``from x import name`` is an edge to ``x.name`` when that is a module, else to ``x``.
* not counted: the import of a module's parent packages that Python performs implicitly
  (importing ``diffrl.envs.base`` runs ``diffrl/envs/__init__.py`` first). A package that re-exports
  its submodules would make each of them and the package a circle; the re-export itself is an
  ordinary edge from the package to the submodule, and is counted. Nor imports under
  ``if TYPE_CHECKING:``, which never run, nor modules imported by a name in a string
  (``importlib.import_module``: the command line's lazy commands, the export's policy kinds), which
  a reading of the source cannot tell from any other string; both tables point down (to
  diffrl.commands and diffrl.artefacts.action_plot, to diffrl.policies).

The floors (ground floor up): :data:`GROUND` utilities depend on nothing else of diffrl's; core/
(the training loop and run plumbing) is imported only by the user commands (:data:`COMMANDS`). No
module imports a private name (``_name``) of another module (tests may; src may not).
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

GROUND = ("diffrl.nets", "diffrl.maths.normalization", "diffrl.maths.replay", "diffrl.maths.returns",
          "diffrl.maths.stats", "diffrl.maths.trust_region", "diffrl.plumbing.machine", "diffrl.plumbing.records",
          "diffrl.plumbing.sharding")
"""Ground-floor utilities (a name covers a package's modules): they import only each other."""

COMMANDS = ("diffrl.cli", "diffrl.commands", "diffrl.artefacts.action_plot")
"""The user commands: with core/ itself, the only modules that import core/."""

CORE = "diffrl.core"

PENDING_CORE_IMPORTS: set[tuple[str, str]] = set()
"""Imports of core/ from below it that are allowed for now (none)."""


def _modules() -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package)} of every module under src/diffrl."""
    out = {}
    for path in sorted((SRC / "diffrl").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _module_of(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is a diffrl module (None: not diffrl's)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def _imports(module: str, path: Path, is_package: bool, modules) -> list[tuple[str, str | None, int]]:
    """(imported diffrl module, the name taken from it or None, line) for each import in ``module``."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _skipped_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up node.level - 1 more
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full, None, node.lineno) if full in modules else (base, alias.name, node.lineno))
    out = []
    for target, name, line in found:
        target = _module_of(target, modules) if target.startswith("diffrl") else None
        if target and target != module:
            out.append((target, name, line))
    return out


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str, int]]]:
    """({module: modules it imports}, [(module, imported module, private name, line)])."""
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    private = []
    for module, (path, is_package) in modules.items():
        for target, name, line in _imports(module, path, is_package, modules):
            edges[module].add(target)
            if name and name.startswith("_") and not name.startswith("__"):
                private.append((module, target, name, line))
    return edges, private


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative: no recursion limit)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
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
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_graph_sees_top_level_and_lazy_imports():
    """The checks below are only as good as the graph: it must hold edges of every kind."""
    edges, _ = import_graph()
    assert "diffrl.core.run" in edges["diffrl.core.trainer"]  # module level
    assert "diffrl.core.build" in edges["diffrl.core.loop"]  # inside make_train
    assert "diffrl.commands.trained_run" in edges["diffrl.artefacts.action_plot"]  # inside a function, `from x import name`
    assert "diffrl.envs.base" in edges["diffrl.envs"]  # a package's re-export
    assert len(edges) > 80


def test_no_import_circles():
    edges, _ = import_graph()
    circles = [c for c in strongly_connected(edges) if len(c) > 1]
    described = ["; ".join(f"{m} -> {', '.join(sorted(set(c) & edges[m]))}" for m in c) for c in circles]
    assert not circles, "import circles in src/diffrl:\n  " + "\n  ".join(described)


def test_strongly_connected_finds_a_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert sorted(map(sorted, strongly_connected(edges))) == [["a", "b", "c"], ["d"]]


def test_no_module_imports_another_modules_private_names():
    _, private = import_graph()
    assert not private, "private names imported across modules:\n  " + "\n  ".join(
        f"{m}:{line} imports {name} from {t}" for m, t, name, line in private)


def test_ground_floor_imports_only_the_ground_floor():
    edges, _ = import_graph()
    up = [(m, t) for m in edges if _under(m, GROUND) for t in sorted(edges[m]) if not _under(t, GROUND)]
    assert not up, "ground-floor modules importing from above: " + ", ".join(f"{m} -> {t}" for m, t in up)


def test_only_core_and_the_commands_import_core():
    edges, _ = import_graph()
    up = {(m, t) for m in edges if not _under(m, (CORE,) + COMMANDS) for t in edges[m] if _under(t, (CORE,))}
    unexpected = sorted(up - PENDING_CORE_IMPORTS)
    assert not unexpected, "imports of core/ from below it: " + ", ".join(f"{m} -> {t}" for m, t in unexpected)
