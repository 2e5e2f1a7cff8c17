"""Blocks of the documentation rendered from records, between ``<!-- KIND:NAME -->`` markers.

The kit teaches measured numbers, and sentences that restate a constant of its code, in the README,
the docs and the notebooks' markdown cells (where the markers show nothing). Each such block stands
between a pair of markers and is written by a renderer, never by hand:

    <!-- gpu:kernel -->
    ... text rendered from labkit/data/gpu/runs.json ...
    <!-- /gpu:kernel -->

KIND names the family of blocks (:func:`labkit.docgen.numbers.all_renderers` lists them all).
``python -m labkit docs --write`` rewrites every block of :func:`documents`, and
``tests/test_taught_numbers.py`` fails when a document and its rendering disagree (a number typed by
hand into a block, or a record re-measured without re-rendering). In a notebook a block lies within
one markdown cell.

    markers(key)                 -> (begin, end)  the two marker lines of a block
    rendered_in(text, key)       -> str | None    a block's text as it stands in a document
    keys_in(text)                -> list[str]     the blocks a document holds, in order
    render_into(text, renderers) -> (text, keys)  every block of `text` that `renderers` knows, rewritten
    write_into(path, renderers)  -> list[str]     the same, in a file (a notebook: in its markdown cells)
    stale_blocks(path)           -> list[str]     blocks of a document that differ from their rendering
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

from labkit import paths

ROOT = paths.REPO
DOCUMENTS = ("README.md", "docs/INSTRUCTOR_GUIDE.md", "docs/MECHANICS.md", "docs/VLLM_MAP.md", "docs/MAINTAINING.md")


def documents() -> list[str]:
    """Every document that may hold blocks, relative to the checkout: every notebook, then the docs (the
    agendas count the notebooks' words, rendered blocks included)."""
    return [*sorted(p.relative_to(ROOT).as_posix() for p in paths.NOTEBOOKS.glob("*.ipynb")), *DOCUMENTS]


_KEY = r"[a-z][a-z0-9-]*:[a-z0-9][a-z0-9-]*"
_BEGIN = re.compile(r"<!-- (" + _KEY + r") -->")

Renderers = dict[str, Callable[[], str]]


def markers(key: str) -> tuple[str, str]:
    """The begin and end markers of block `key` ("KIND:NAME")."""
    if not re.fullmatch(_KEY, key):
        raise ValueError(f"a block key is KIND:NAME in lower case, got {key!r}")
    return f"<!-- {key} -->", f"<!-- /{key} -->"


def _pattern(key: str) -> re.Pattern:
    # A block may sit indented (inside a list item): its markers and every line of it carry the indent.
    begin, end = markers(key)
    return re.compile(r"^(?P<indent>[ ]*)" + re.escape(begin) + r"\n(?:(?P<body>.*?)\n)?(?P=indent)" + re.escape(end),
                      re.DOTALL | re.MULTILINE)


def rendered_in(text: str, key: str) -> str | None:
    """Block `key` as it stands in a document between its markers, without its indent (None if it has none)."""
    found = _pattern(key).search(text)
    if not found:
        return None
    indent = found.group("indent")
    return "\n".join(line.removeprefix(indent) for line in (found.group("body") or "").split("\n"))


def keys_in(text: str) -> list[str]:
    """The keys of every complete block in `text`, in order of appearance."""
    return [key for key in dict.fromkeys(_BEGIN.findall(text)) if rendered_in(text, key) is not None]


def render_into(text: str, renderers: Renderers) -> tuple[str, list[str]]:
    """`text` with every block that `renderers` knows rendered again; and the keys written."""
    written = []
    for key in keys_in(text):
        if key not in renderers:
            continue
        begin, end = markers(key)
        body = renderers[key]()

        def block(found, b=begin, e=end, body=body):
            pad = found.group("indent")
            lines = "\n".join(pad + line if line else line for line in body.split("\n"))
            return f"{pad}{b}\n{lines}\n{pad}{e}"

        text = _pattern(key).sub(block, text)
        written.append(key)
    return text, written


def _markdown_cells(notebook: dict) -> list[dict]:
    return [c for c in notebook["cells"] if c.get("cell_type") == "markdown"]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def text_of(path: str | Path) -> str:
    """What a document says: a file's text, or a notebook's markdown cells, one after the other."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return path.read_text()
    return "\n\n".join(_source(c) for c in _markdown_cells(json.loads(path.read_text())))


def write_into(path: str | Path, renderers: Renderers) -> list[str]:
    """Render every known block of the document at `path` in place; returns the keys written."""
    path = Path(path)
    if path.suffix != ".ipynb":
        text, written = render_into(path.read_text(), renderers)
        path.write_text(text)
        return written
    notebook, written = json.loads(path.read_text()), []
    for cell in _markdown_cells(notebook):
        text, keys = render_into(_source(cell), renderers)
        if keys:
            cell["source"] = text.splitlines(keepends=True)
            written += keys
    if written:  # as Jupyter writes notebooks, so that a rendering changes only its own lines
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return written


def stale_blocks(path: str | Path, renderers: Renderers) -> list[str]:
    """Keys of the blocks in `path` whose text differs from their rendering (unknown keys included)."""
    text = text_of(path)
    return [key for key in keys_in(text) if key not in renderers or rendered_in(text, key) != renderers[key]()]

