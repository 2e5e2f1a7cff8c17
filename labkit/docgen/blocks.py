"""Blocks of the documentation rendered from records, between ``<!-- KIND:NAME -->`` markers.

The kit teaches measured numbers in README.md, docs/INSTRUCTOR_GUIDE.md and docs/MECHANICS.md.
Each such block stands between a pair of markers and is written by a renderer, never by hand:

    <!-- gpu:kernel -->
    ... text rendered from labkit/data/gpu/h200.json ...
    <!-- /gpu:kernel -->

KIND names the family of blocks (``agenda``: :mod:`labkit.workshop.editions.agenda`; ``gpu`` and ``cpu``:
:mod:`labkit.docgen.numbers`). :func:`renderers` maps every ``KIND:NAME`` to a function that renders it
from the records the kit ships; ``python -m labkit docs --write`` rewrites every block of
:data:`DOCUMENTS`, and ``tests/test_taught_numbers.py`` fails when a document and its rendering
disagree (a number typed by hand into a block, or a record re-measured without re-rendering).

    markers(key)                 -> (begin, end)  the two marker lines of a block
    rendered_in(text, key)       -> str | None    a block's text as it stands in a document
    keys_in(text)                -> list[str]     the blocks a document holds, in order
    render_into(text, renderers) -> (text, keys)  every block of `text` that `renderers` knows, rewritten
    write_into(path, renderers)  -> list[str]     the same, in a file
    stale_blocks(path)           -> list[str]     blocks of a document that differ from their rendering
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from labkit import paths

ROOT = paths.REPO
DOCUMENTS = ("README.md", "docs/INSTRUCTOR_GUIDE.md", "docs/MECHANICS.md", "docs/VLLM_MAP.md")
_KEY = r"[a-z][a-z0-9-]*:[a-z0-9][a-z0-9-]*"
_BEGIN = re.compile(r"<!-- (" + _KEY + r") -->")

Renderers = dict[str, Callable[[], str]]


def markers(key: str) -> tuple[str, str]:
    """The begin and end markers of block `key` ("KIND:NAME")."""
    if not re.fullmatch(_KEY, key):
        raise ValueError(f"a block key is KIND:NAME in lower case, got {key!r}")
    return f"<!-- {key} -->", f"<!-- /{key} -->"


def _pattern(key: str) -> re.Pattern:
    begin, end = markers(key)
    return re.compile(re.escape(begin) + r"\n(?:(.*?)\n)?" + re.escape(end), re.DOTALL)


def rendered_in(text: str, key: str) -> str | None:
    """Block `key` as it stands in a document between its markers (None if it has none)."""
    found = _pattern(key).search(text)
    return (found.group(1) or "") if found else None


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
        text = _pattern(key).sub(lambda _, b=begin, e=end, body=body: f"{b}\n{body}\n{e}", text)
        written.append(key)
    return text, written


def write_into(path: str | Path, renderers: Renderers) -> list[str]:
    """Render every known block of the document at `path` in place; returns the keys written."""
    path = Path(path)
    text, written = render_into(path.read_text(), renderers)
    path.write_text(text)
    return written


def stale_blocks(path: str | Path, renderers: Renderers) -> list[str]:
    """Keys of the blocks in `path` whose text differs from their rendering (unknown keys included)."""
    text = Path(path).read_text()
    return [key for key in keys_in(text) if key not in renderers or rendered_in(text, key) != renderers[key]()]

