"""The HTML side-by-side diff and the stable text renderings of bench results."""

from __future__ import annotations

import re

import pytest

from labkit.repro import BenchConfig, BenchResult, ModeResult
from labkit.viz.html_views import (
    DiffRow,
    Html,
    bench_side_by_side,
    first_difference,
    highlight_from,
    outcome_table,
    side_by_side,
    source_excerpt,
)

MARKED = re.compile(r"<mark[^>]*>(.*?)</mark>", re.S)


@pytest.mark.parametrize("a,b,expected", [
    ("the cat", "the cat", None),
    ("the cat", "the car", 6),
    ("abc", "xbc", 0),
    ("the cat", "the cats", 7),
    ("the cats", "the cat", 7),
    ("", "a", 0),
])
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


def test_highlight_marks_exactly_the_tail_from_the_first_difference():
    ref, bad = "the baker went home.", "the baker wenth hoome"
    start = first_difference(ref, bad)
    assert start == len("the baker went")
    marked_ref = MARKED.findall(highlight_from(ref, start))
    marked_bad = MARKED.findall(highlight_from(bad, start))
    assert marked_ref == [ref[start:]] and marked_bad == [bad[start:]]
    # Everything before the mark is the common prefix, unmarked.
    assert highlight_from(bad, start).startswith(bad[:start] + "<mark")


def test_identical_texts_have_no_mark_and_text_is_escaped():
    assert "<mark" not in highlight_from("same", first_difference("same", "same"))
    html = highlight_from("a<b\nc", 1)
    assert "&lt;" in html and "<b" not in html.replace("<mark", "")
    assert "\n" not in html  # line breaks become a visible glyph


def test_side_by_side_marks_each_row_from_its_own_first_difference():
    rows = [DiffRow("#1", "the king ", "has a boat.", "has a boot."),
            DiffRow("#2", "a girl ", "sings.", "sings. the")]
    html = side_by_side(rows, "eager", "graph-buggy")
    assert isinstance(html, Html) and html._repr_html_() == str(html)
    assert MARKED.findall(html) == ["at.", "ot.", " the"]
    assert html.count("<tr>") == 3 and "graph-buggy" in html


def _fake_result():
    cfg = BenchConfig(prompts=3)
    modes = {
        "eager": ModeResult("eager", "eager", 3, 3, 0, 0.5234, 0.3, 80.0, 0.93, 12.3),
        "graph-buggy": ModeResult("graph-buggy", "eager", 3, 2, 1, 0.6011, 0.5, 55.5, 0.9, 20.1,
                                  corrupted_rids=[1]),
        "graph-fill-only": ModeResult("graph-fill-only", "eager", error="refused"),
    }
    texts = {"eager": {0: "a boat.", 1: "the king sleeps.", 2: "home."},
             "graph-buggy": {0: "a boat.", 1: "the kinng slee", 2: "home."}}
    return BenchResult(cfg, modes, texts, ["x ", "y ", "z "], wall_s=33.3)


def test_bench_side_by_side_shows_only_corrupted_responses():
    html = bench_side_by_side(_fake_result(), "graph-buggy")
    assert "#1" in html and "#0" not in html and "#2" not in html
    assert MARKED.findall(html) == ["g sleeps.", "ng slee"]
    assert "1 of 3 responses differ" in html
    assert "refused" in bench_side_by_side(_fake_result(), "graph-fill-only")
    assert "identical" in bench_side_by_side(_fake_result(), "eager")


def test_outcome_table_is_free_of_timings():
    table = outcome_table(_fake_result())
    lines = table.splitlines()
    assert lines[0].split() == ["mode", "compared", "with", "right", "corrupted", "accept", "target", "NLL",
                                 "corpus", "words"]
    assert "2 of 3" in lines[2] and "0.60" in lines[2] and "0.50" in lines[2] and "90%" in lines[2]
    assert "refused" in lines[3]
    for number in ("12.3", "20.1", "55", "80", "33.3"):
        assert number not in table


def test_source_excerpt_numbers_lines_and_marks_matches():
    from labkit.kernels import gumbel

    text = source_excerpt(gumbel, "if MASK_PADDING:", "store_mask = in_vocab &", mark=r"mask=|other=")
    lines = text.splitlines()
    assert "if MASK_PADDING:" in lines[0] and "store_mask = in_vocab &" in lines[-1]
    assert any(line.startswith(">") and "other=" in line for line in lines)
    with pytest.raises(ValueError, match="not found"):
        source_excerpt(gumbel, "no such line anywhere")
