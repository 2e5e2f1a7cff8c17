"""How a block's prose is written: the docs' line length, wrapping, and ranges of measured values."""

from __future__ import annotations

import textwrap

WIDTH = 100  # the docs' line length


def wrap(text: str, width: int = WIDTH) -> str:
    """Each paragraph (or "- " / "  - " bullet) of `text` wrapped to `width`, bullets with a hanging
    indent; indented code lines (four spaces) and blank lines are kept as they are."""
    out = []
    for line in text.split("\n"):
        if not line.strip() or line.startswith("    "):
            out.append(line)
            continue
        stripped = line.lstrip(" ")
        lead = line[:len(line) - len(stripped)]
        hang = lead + ("  " if stripped.startswith("- ") else "")
        out.append(textwrap.fill(line, width, initial_indent="", subsequent_indent=hang,
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


def span(values, fmt: str = "{:.2f}", unit: str = "") -> str:
    """"a-b" (or "a" when both round alike) of `values`, formatted."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def pct(values) -> str:
    return span([100 * v for v in values], "{:.0f}", "%")


def date_of(stamp: dict) -> str:
    return str(stamp.get("date", ""))[:10]


def when_measured(stamp: dict) -> str:
    """When a section was measured: its date names the run in the record's section provenance."""
    return date_of(stamp)
