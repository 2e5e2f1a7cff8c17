"""The kit's import graph: the layers ARCHITECTURE.md draws, enforced. Every module sits in a layer of
that table, imports only its own layer or a lower one, and no two modules import each other
(directly or round a longer loop); the errors module imports nothing of the kit, so any module can
raise the kit's errors.

Read with ast from the source, every import counted (also those inside functions, which only
postpone a cycle), so the test needs no import of labkit.
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


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The labkit modules `path` imports (``from labkit import x`` counts as labkit.x if that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            # The deepest module the name reaches: labkit.kernels.gumbel.gumbel_sample -> labkit.kernels.gumbel.
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != "labkit":
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p, root): p for root in (PACKAGE, ROOM_PACKAGE) for p in root.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) - {name} for name, path in paths.items()}


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
