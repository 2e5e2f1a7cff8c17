"""Assertions and a fixture shared by the workshop tests: what a checker's verdict must look like.

Import :func:`kept_answers` into a test module (``from workshop_helpers import kept_answers``):
it is autouse, so every check there keeps the learner's code in a temporary folder, not in
``my_answers/`` of the working tree.
"""

from __future__ import annotations

import re

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

# What a verdict of (b) that is not solved yet, and its figure, must not say: the answer of (b).
ANSWER_OF_B = re.compile(r"slot\s*>=\s*0|slot\s*<\s*0|is_valid|mask|other\s*=", re.IGNORECASE)


@pytest.fixture(autouse=True)
def kept_answers(tmp_path, monkeypatch):
    """The folder the checks keep answers in ($LABKIT_ANSWERS), a fresh one per test."""
    folder = tmp_path / "my_answers"
    monkeypatch.setenv("LABKIT_ANSWERS", str(folder))
    return folder


def assert_solved(result):
    assert result.solved, result.message
    assert result.message.startswith(f"Exercise ({result.exercise}) solved."), result.message
    assert "not solved" not in result.message


def assert_rejected(result, *fragments):
    assert not result.solved, result.message
    assert result.message.startswith(f"Exercise ({result.exercise}) not solved yet:"), result.message
    for fragment in fragments:
        assert fragment in result.message, f"{fragment!r} not in: {result.message}"
    assert "Traceback" not in result.message
    assert "the kit stopped" not in result.message, result.message  # a learner's fault, not the kit's


def figure_text(fig: Figure) -> str:
    """Every piece of text drawn in `fig`, one per line."""
    fig.draw_without_rendering()  # tick labels exist once the figure is drawn
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip())


def smallest_shown_pt(fig: Figure, shown_px: int = 1280) -> float:
    """The smallest text of `fig` in pt as it reads when the figure is shown `shown_px` wide (96 px an inch)."""
    fig.draw_without_rendering()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * shown_px / (96 * fig.get_figwidth())


def assert_gives_b_away_nowhere(result):
    """A (b) verdict that is not solved yet: its words and its figure name the trouble, never the fix."""
    assert not ANSWER_OF_B.search(result.message), result.message
    assert not ANSWER_OF_B.search(repr(result)), repr(result)
    if result.figure is not None:
        text = figure_text(result.figure)
        assert not ANSWER_OF_B.search(text), text


def assert_draws_the_launch(result, *fragments):
    """A (b) verdict that is not solved yet draws its launch: legible, with `fragments`, without the fix."""
    text = figure_text(result.figure)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in the figure: {text}"
    assert_gives_b_away_nowhere(result)
    assert smallest_shown_pt(result.figure) >= 10
