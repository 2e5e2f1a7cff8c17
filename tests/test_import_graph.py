"""The kit's import graph: the layers ARCHITECTURE.md draws, enforced. Every module sits in a layer of
that table, imports only its own layer or a lower one, and no two modules import each other
(directly or round a longer loop); the errors module imports nothing of the kit, so any module can
raise the kit's errors.

Read with ast from the source, so the test needs no import of labkit. Every way a module reaches
another counts: ``import`` and ``from ... import``, absolute or relative, at the top or inside a
function (which only postpones a cycle); and an import by name, ``importlib.import_module``,
``__import__``, ``runpy.run_module``: with a name known from the source (a literal, or built from the
module's own string constants, ``f"{_PACKAGE}.checker"``) it imports that module; with a name it
computes (from a table of commands, say) it imports every module of the kit that the module's own
strings name, whole or as ``module:attribute``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "labkit"
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
# The room's package (its own distribution, room/): placed in the same table, above the lesson.
ROOM_PACKAGE = PACKAGE.parent / "room" / "labkit_room"


def _module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (a module's, class's, function's first statement): prose, not names."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level names bound once to a string (``_WORKSHOP = "labkit.workshop.exercises"``)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        text = _string_value(value, found)
        if text is not None:
            found[target] = text
    return found


def _string_value(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The text of a string expression when it is known from the source alone: a literal, a name bound
    to one at the top of the module, or an f-string or a sum made of those; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    return None
                value = value.value
            text = _string_value(value, constants)
            if text is None:
                return None
            parts.append(text)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left, constants), _string_value(node.right, constants)
        return None if left is None or right is None else left + right
    return None


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# The functions that import a module given its name (a string): importlib's, the builtin, runpy's.
_BY_NAME = {"import_module", "__import__", "run_module"}


def _named_module(text: str, modules: set[str]) -> str | None:
    """The kit's module a string names, whole or as ``module:attribute``; None for any other string."""
    name, colon, attribute = text.partition(":")
    if not _DOTTED.fullmatch(name) or (colon and not _DOTTED.fullmatch(attribute)):
        return None
    return name if name in modules else None


def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _resolve_relative(package: str, level: int, target: str | None) -> str:
    """The absolute name of ``<level dots><target>`` written in a module of `package`."""
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{target}" if target else package


def _name_given(call: ast.Call, constants: dict[str, str], package: str) -> str | None:
    """The module name an import-by-name call is given, where the source alone says it; else None.
    A relative name (``import_module(".x", __package__)``) is resolved against the module's package."""
    if not call.args:
        return None
    text = _string_value(call.args[0], constants)
    if text is None or not text.startswith("."):
        return text
    level = len(text) - len(text.lstrip("."))
    return _resolve_relative(package, level, text[level:] or None)


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def imports_of(source: str, module: str, modules: set[str], is_package: bool = False) -> set[str]:
    """The modules of `modules` that the source of `module` imports, in any of the ways the module's
    docstring lists (``from labkit import x`` counts as labkit.x where that is a module)."""
    tree = ast.parse(source)
    package = _package_of(module, is_package)
    constants = _string_constants(tree)
    names: list[str] = []
    computed = False  # an import by a name the source does not spell
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(package, node.level, node.module) if node.level else node.module
            names += [f"{base}.{alias.name}" for alias in node.names] + [base]
        elif isinstance(node, ast.Call) and _called(node) in _BY_NAME:
            given = _name_given(node, constants, package)
            if given is None:
                computed = True
            else:
                names.append(given)
    if computed:
        prose = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp)) and id(node) not in prose:
                text = _string_value(node, constants)
                if text is not None and (named := _named_module(text, modules)):
                    names.append(named)
    found = set()
    for name in names:
        # The deepest module the name reaches: labkit.kernels.gumbel.gumbel_sample -> labkit.kernels.gumbel.
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != "labkit":
            found.add(name)
    return found - {module}


def import_graph(*roots: Path) -> dict[str, set[str]]:
    """Every module of the given package folders (the lesson's and the room's by default) and what it imports."""
    paths = {_module_name(p, root): p for root in roots or (PACKAGE, ROOM_PACKAGE) for p in root.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path.read_text(), name, modules, path.name == "__init__.py")
            for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None. Packages' __init__ re-exports
    are edges like any other."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + "."):
                continue  # a package importing its own submodules is how packages work, not a loop
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_of_the_kit_imports_one_that_imports_it_back():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_errors_module_is_at_the_bottom():
    assert import_graph()["labkit.errors"] == set()


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def layers(text: str | None = None) -> dict[str, int]:
    """ARCHITECTURE.md's table: each named module or package and its layer."""
    text = ARCHITECTURE.read_text() if text is None else text
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    found = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            for name in re.findall(r"`([\w.]+)`", cells[1]):
                found[name] = int(cells[0])
    return found


def layer_of(module: str, table: dict[str, int]) -> int | None:
    """The layer of the longest name in `table` that is `module` or a package above it."""
    names = [n for n in table if module == n or module.startswith(n + ".")]
    return table[max(names, key=len)] if names else None


def upward_imports(graph: dict[str, set[str]], table: dict[str, int]) -> list[str]:
    return [f"{m} (layer {layer_of(m, table)}) imports {d} (layer {layer_of(d, table)})"
            for m in sorted(graph) for d in sorted(graph[m]) if layer_of(d, table) > layer_of(m, table)]


def test_every_module_sits_in_a_layer_of_the_architecture():
    table, graph = layers(), import_graph()
    assert len(set(table.values())) >= 10, table
    unplaced = sorted(m for m in graph if layer_of(m, table) is None)
    assert not unplaced, f"modules ARCHITECTURE.md's table does not place: {unplaced}"
    missing = sorted(name for name in table if name not in graph and not any(m.startswith(name + ".") for m in graph))
    assert not missing, f"ARCHITECTURE.md names modules the kit does not have: {missing}"


def test_imports_flow_down_the_layers():
    up = upward_imports(import_graph(), layers())
    assert not up, "imports that go up a layer:\n" + "\n".join(up)


def test_the_lesson_never_imports_the_room():
    # Only the command line's dispatcher, above the room, names it (python -m labkit hub).
    table, graph = layers(), import_graph()
    lesson = [m for m in graph if layer_of(m, table) < table["labkit_room"]]
    assert lesson and all(m == "labkit" or m.startswith("labkit.") for m in lesson)
    assert "labkit_room.cli" in graph and not [m for m in lesson if any(d.startswith("labkit_room") for d in graph[m])]
    assert layer_of("labkit.__main__", table) > table["labkit_room"]


def test_the_layer_check_finds_an_import_that_goes_up():
    table = layers("## Layers\n| 2 | `labkit.kernels` | x |\n| 1 | `labkit.backends` | y |\n")
    graph = {"labkit.backends": {"labkit.kernels.gumbel"}, "labkit.kernels.gumbel": {"labkit.backends"}}
    assert upward_imports(graph, table) == [
        "labkit.backends (layer 1) imports labkit.kernels.gumbel (layer 2)"]
    assert upward_imports({"labkit.kernels.gumbel": {"labkit.backends"}}, table) == []


# Each way of importing, planted in a throwaway package `labkit` of two layers: `labkit.low.b` imports
# `labkit.high.a` in that way, and `labkit.high.a` imports `labkit.low.b` back.
_PLANTED = {
    "from the top": "import labkit.high.a\n",
    "from ... import": "from labkit.high import a\n",
    "inside a function": "def f():\n    from labkit.high import a\n    return a\n",
    "relative": "from ..high import a\n",
    "relative, inside a function": "def f():\n    from ..high.a import something\n    return something\n",
    "importlib, a literal": "import importlib\nA = importlib.import_module('labkit.high.a')\n",
    "importlib, relative": "import importlib\nA = importlib.import_module('..high.a', __package__)\n",
    "importlib, from a constant": "from importlib import import_module\n_HIGH = 'labkit.high'\n"
                                  "def f():\n    return import_module(f'{_HIGH}.a')\n",
    "importlib, from a table": "import importlib\nTABLE = {'x': ('labkit.high.a', 'what x does')}\n"
                               "def run(k):\n    return importlib.import_module(TABLE[k][0])\n",
    "importlib, module:attribute": "import importlib\nWHO = ['labkit.high.a:check']\n"
                                   "def f(i):\n    m, _, n = WHO[i].partition(':')\n"
                                   "    return getattr(importlib.import_module(m), n)\n",
    "__import__": "def f():\n    return __import__('labkit.high.a')\n",
    "runpy": "import runpy\nrunpy.run_module('labkit.high.a')\n",
}


def _plant(root: Path, how: str) -> Path:
    package = root / "labkit"
    for folder in (package, package / "high", package / "low"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (package / "high" / "a.py").write_text("from labkit.low import b\n")
    (package / "low" / "b.py").write_text(f'"""Planted: {how}."""\n{_PLANTED[how]}')
    return package


def test_the_reader_finds_every_kind_of_import(tmp_path):
    table = layers("## Layers\n| 2 | `labkit.high` | x |\n| 1 | `labkit`, `labkit.low` | y |\n")
    for how in _PLANTED:
        graph = import_graph(_plant(tmp_path / how.replace(" ", "_").replace(",", ""), how))
        assert "labkit.high.a" in graph["labkit.low.b"], how
        assert find_cycle(graph) is not None, how
        assert "labkit.low.b (layer 1) imports labkit.high.a (layer 2)" in upward_imports(graph, table), how


def test_prose_and_data_that_name_a_module_are_no_import(tmp_path):
    package = _plant(tmp_path, "from the top")
    # A docstring names the module; a string names it where nothing imports by name: neither imports it.
    (package / "low" / "b.py").write_text('"""See labkit.high.a."""\nimport importlib\nNAME = "labkit.high.a"\n'
                                          'def f(name):\n    """labkit.high.a"""\n    return len(name)\n')
    assert import_graph(package)["labkit.low.b"] == set()
    # A computed import by name counts the module's own strings, never its docstrings.
    (package / "low" / "b.py").write_text('"""labkit.high.a"""\nimport importlib\n'
                                          'def f(name):\n    return importlib.import_module(name)\n')
    assert import_graph(package)["labkit.low.b"] == set()


def test_the_reader_sees_the_kits_own_imports_by_name():
    # The command line dispatches through a table of module names: each is an edge of the graph.
    graph = import_graph()
    assert "labkit.gpu.cli" in graph["labkit.__main__"] or "labkit.gpu" in graph["labkit.__main__"]
