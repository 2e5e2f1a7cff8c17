"""The code each exercise of notebook 07 starts from: a checker run on it says "not attempted yet".

A learner who runs the notebook top to bottom (Run All) meets every checker before writing anything.
Judging the starting code would draw its launch and name what is wrong with it, which is the
exercise's answer (or a later one's) shown before the learner tried. So a checker first asks whether
the function is still the starting code (the same syntax tree: comments, blank lines and docstrings
aside) and, if so, says only that.

The starting code is written once, in notebook 07's skeleton cells (each exercise's record names
them); it is read from the kit's own copy of that notebook (:data:`labkit.paths.NOTEBOOKS`), never
from the learner's, which the learner edits. A room's kit copy carries the student edition of it.
"""

from __future__ import annotations

import ast
import json
import textwrap
from typing import Callable

from labkit import paths
from labkit.workshop.exercises import record

_CELLS: dict = {}  # (path, mtime) -> {cell id: source}: the notebook is read once per version of it


def skeleton_cells() -> dict[str, str]:
    """Notebook 07's code cells by id ({} where the notebook is missing or unreadable)."""
    path = paths.NOTEBOOKS / record.NOTEBOOK
    try:
        key = (str(path), path.stat().st_mtime_ns)
        if key not in _CELLS:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            _CELLS.clear()
            _CELLS[key] = {c.get("id"): "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                           for c in cells if c.get("cell_type") == "code"}
        return _CELLS[key]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def starting_code(function: str) -> str | None:
    """The code the learner's function `function` starts from (None: no exercise has it, or no notebook)."""
    cells = skeleton_cells()
    for exercise in record.EXERCISES:
        for version in exercise.versions:
            if version.function == function and version.skeleton_cell in cells:
                return cells[version.skeleton_cell]
    return None


def _shape(source: str) -> str | None:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def is_starting_code(name: str, source: str | None) -> bool:
    """Whether `source` (the learner's function `name`) is still the code its exercise started from."""
    start = starting_code(name)
    return start is not None and source is not None and _shape(source) == _shape(start)


# What a check of the starting code says (and the room's report looks for: no attempt to report).
NOT_ATTEMPTED = "not solved yet: not attempted yet."


def not_attempted_message(ex: str, name: str) -> str:
    return (f"Exercise ({ex}) {NOT_ATTEMPTED} `{name}` is still the code the exercise "
            "starts from; edit it in its cell above, run that cell, then run this checker again.")


def starting_code_of(fn: Callable) -> str | None:
    """The name of the exercise function `fn` is the starting code of, or None."""
    from labkit.workshop.feedback import learner_source, python_function

    inner = python_function(fn) or fn
    name = getattr(inner, "__name__", None)
    return name if name and is_starting_code(name, learner_source(fn)) else None
