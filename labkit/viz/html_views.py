"""Renderings of bench results for the notebooks: side-by-side HTML diffs and stable text tables.

Everything here is a pure function of its inputs (no timings, no object ids), so a notebook cell
that prints it can be compared by nbval from one run to the next.

The side-by-side diff aligns the two texts word by word (:mod:`difflib`) and marks only the words
that differ, so the fluent text a corrupted response keeps writing is not marked as damage; a bar
before the first marked word shows where the response first departs from the reference. The toy
models are character-level: once a response diverges, every later token is conditioned on a
different history, so words after the first difference can match again (they are left unmarked)
and drift apart later.
"""

from __future__ import annotations

import difflib
import html as _html
import inspect
import re
from dataclasses import dataclass

__all__ = [
    "Html",
    "DiffRow",
    "first_difference",
    "word_diff",
    "marked_pair",
    "side_by_side",
    "bench_side_by_side",
    "outcome_table",
    "function_source",
]

MARK_STYLE = "background:#ffd6d6;color:#8b0000"
FIRST_STYLE = MARK_STYLE + ";border-left:3px solid #8b0000;padding-left:1px"
NEWLINE_GLYPH = "\u23ce"  # a visible stand-in for the '\n' between stories
_PIECES = re.compile(r"\w+|\s+|[^\w\s]")  # words, runs of white space, single punctuation marks


class Html(str):
    """A string that Jupyter displays as HTML (and prints as its source anywhere else)."""

    def _repr_html_(self) -> str:
        return str(self)

    def __repr__(self) -> str:  # the plain-text fallback of a notebook output: short, not the markup
        return f"<HTML fragment, {len(self)} characters: display it in a notebook>"


def first_difference(a: str, b: str) -> int | None:
    """Index of the first position where `a` and `b` differ (one ending early counts); None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    if len(a) == len(b):
        return None
    return min(len(a), len(b))


def _visible(text: str) -> str:
    return _html.escape(text).replace("\n", NEWLINE_GLYPH)


Runs = list[tuple[str, bool]]


def _append(runs: Runs, piece: str, differs: bool) -> None:
    if not piece:
        return
    if runs and runs[-1][1] == differs:
        runs[-1] = (runs[-1][0] + piece, differs)
    else:
        runs.append((piece, differs))


def word_diff(reference: str, other: str) -> tuple[Runs, Runs]:
    """Both texts as runs of (text, differs), from a word-level alignment of the two.

    Joining a side's runs gives its text back. A run differs when its words were replaced,
    dropped or added relative to the other text.
    """
    a, b = _PIECES.findall(reference), _PIECES.findall(other)
    left: Runs = []
    right: Runs = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        _append(left, "".join(a[i1:i2]), op != "equal")
        _append(right, "".join(b[j1:j2]), op != "equal")
    return left, right


def _render(runs: Runs) -> str:
    out, first = [], True
    for text, differs in runs:
        if differs:
            style, title = (FIRST_STYLE, ' title="first difference"') if first else (MARK_STYLE, "")
            out.append(f'<mark style="{style}"{title}>{_visible(text)}</mark>')
            first = False
        else:
            out.append(_visible(text))
    return "".join(out)


def marked_pair(reference: str, other: str) -> tuple[str, str]:
    """Both texts as HTML, with the words that differ marked and the first mark flagged."""
    left, right = word_diff(reference, other)
    return _render(left), _render(right)


@dataclass(frozen=True)
class DiffRow:
    label: str  # e.g. "#12"
    prompt: str
    reference: str
    other: str


def side_by_side(rows: list[DiffRow], left_title: str, right_title: str, caption: str = "") -> Html:
    """A table: prompt | left text | right text, with the words where they differ marked."""
    cell = "padding:4px 8px;vertical-align:top;border-top:1px solid #ddd;"
    text_cell = cell + "font-family:monospace;white-space:pre-wrap;max-width:28em"
    head = (f'<tr><th style="{cell}">#</th><th style="{cell}">prompt</th>'
            f'<th style="{cell}">{_html.escape(left_title)}</th>'
            f'<th style="{cell}">{_html.escape(right_title)}</th></tr>')
    body = []
    for row in rows:
        left, right = marked_pair(row.reference, row.other)
        body.append(
            f'<tr><td style="{cell}">{_html.escape(row.label)}</td>'
            f'<td style="{text_cell}">{_visible(row.prompt)}</td>'
            f'<td style="{text_cell}">{left}</td>'
            f'<td style="{text_cell}">{right}</td></tr>'
        )
    cap = f"<caption style='caption-side:bottom;text-align:left'>{_html.escape(caption)}</caption>" if caption else ""
    return Html(f'<table style="border-collapse:collapse">{cap}{head}{"".join(body)}</table>')


def bench_side_by_side(result, mode: str, limit: int = 4) -> Html:
    """The first `limit` responses of `mode` that differ from its eager reference, side by side."""
    res = result.modes[mode]
    if res.error or mode not in result.texts:
        return Html(f"<p>{_html.escape(mode)}: no responses (the mode was refused)</p>")
    ref_name = res.reference
    rows = [DiffRow(f"#{rid}", result.prompts[rid], result.texts[ref_name][rid], result.texts[mode][rid])
            for rid in res.corrupted_rids[:limit]]
    if not rows:
        return Html(f"<p>{_html.escape(mode)}: every response is identical to {_html.escape(ref_name)}</p>")
    caption = (f"{len(res.corrupted_rids)} of {res.responses} responses differ. Marked: the words that differ "
               f"after aligning the two texts word by word; the bar: where the response first differs "
               f"({NEWLINE_GLYPH} is a line break)")
    return side_by_side(rows, f"{ref_name} (reference)", mode, caption)


# -- stable text tables ---------------------------------------------------------------------------

def outcome_table(result, modes=None) -> str:
    """The bench's verdict per mode, without wall times or tokens per second (so it is reproducible).

    Columns: responses that match the eager reference token for token, responses that do not, the
    acceptance rate of draft tokens, the mean negative log-likelihood of the emitted tokens under the
    target model (lower: closer to what the target would write), and the share of generated words
    that are corpus words.
    """
    head = ["mode", "compared with", "right", "corrupted", "accept", "target NLL", "corpus words"]
    rows = []
    for name in modes or list(result.modes):
        r = result.modes[name]
        if r.error:
            rows.append([name, r.reference, "-", "-", "-", "-", "refused: unmasked kernel met slot -1"])
            continue
        rows.append([name, r.reference, f"{r.identical_to_eager} of {r.responses}", str(r.corrupted),
                     f"{r.acceptance_rate:.2f}", f"{r.mean_target_nll:.2f}", f"{r.corpus_word_share:.0%}"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


# -- source of a function ------------------------------------------------------------------------------

def function_source(fn, *, mark: str | None = None) -> str:
    """The whole source of a function (or a Triton kernel, or a class), its lines numbered as in its file.

    An excerpt is a whole function, never a span between text markers, so an edit elsewhere moves
    nothing and an excerpt cannot end in the wrong place. Lines matching the regex `mark` get a '>'
    in the margin. A Triton kernel is shown as written (its ``.fn``, with Triton or without).
    """
    fn = getattr(fn, "fn", fn)
    lines, first = inspect.getsourcelines(fn)
    pattern = re.compile(mark) if mark else None
    return "\n".join(f"{'>' if pattern and pattern.search(line) else ' '}{first + i:4d}  {line.rstrip()}"
                     for i, line in enumerate(lines))
