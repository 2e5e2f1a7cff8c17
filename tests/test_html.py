"""The HTML side-by-side diff and the stable text renderings of bench results."""

from __future__ import annotations

import re

import pytest

from labkit.bench.repro import BenchConfig, BenchResult, ModeResult
from labkit.viz.html_views import (
    DiffRow,
    Html,
    bench_side_by_side,
    first_difference,
    function_source,
    marked_pair,
    outcome_table,
    side_by_side,
    word_diff,
)

MARKED = re.compile(r"<mark[^>]*>(.*?)</mark>", re.S)
FIRST = re.compile(r'<mark[^>]*title="first difference"[^>]*>(.*?)</mark>', re.S)


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


def test_only_the_words_that_differ_are_marked_not_the_fluent_tail():
    ref = "the baker went home. the king slept."
    bad = "the baker wenth home. the king slept."
    left, right = marked_pair(ref, bad)
    assert MARKED.findall(left) == ["went"] and MARKED.findall(right) == ["wenth"]
    # Everything else is there, unmarked, and the first mark is flagged as the first difference.
    assert left.startswith("the baker <mark") and left.endswith("</mark> home. the king slept.")
    assert FIRST.findall(right) == ["wenth"]


def test_word_diff_gives_the_texts_back_and_starts_at_the_first_difference():
    ref, bad = "a girl sings. a boy runs far.", "a girl sinks. a dog runs."
    left, right = word_diff(ref, bad)
    assert "".join(t for t, _ in left) == ref and "".join(t for t, _ in right) == bad
    assert [t for t, d in left if d] == ["sings", "boy", " far"]
    assert [t for t, d in right if d] == ["sinks", "dog"]
    # The first marked word begins at or before the first differing character, on a word boundary.
    first_marked = len(left[0][0])
    assert first_marked <= first_difference(ref, bad) and ref[first_marked - 1] == " "


def test_identical_texts_have_no_mark_and_text_is_escaped():
    left, right = marked_pair("same", "same")
    assert "<mark" not in left + right
    left, _ = marked_pair("a<b\nc", "a<b\nd")
    assert "&lt;" in left and "<b" not in left.replace("<mark", "")
    assert "\n" not in left  # line breaks become a visible glyph
    assert MARKED.findall(left) == ["c"]


def test_side_by_side_marks_each_row_where_it_differs():
    rows = [DiffRow("#1", "the king ", "has a boat.", "has a boot."),
            DiffRow("#2", "a girl ", "sings.", "sings. the")]
    html = side_by_side(rows, "eager", "graph-buggy")
    assert isinstance(html, Html) and html._repr_html_() == str(html)
    assert MARKED.findall(html) == ["boat", "boot", " the"]
    assert html.count("<tr>") == 3 and "graph-buggy" in html


def _fake_result():
    cfg = BenchConfig(prompts=3)
    modes = {
        "eager": ModeResult("eager", "eager", 3, 3, 0, 0.5234, 0.3, 80.0, 0.93, 12.3),
        "graph-buggy": ModeResult("graph-buggy", "eager", 3, 2, 1, 0.6011, 0.5, 55.5, 0.9, 20.1,
                                  corrupted_rids=[1]),
        "graph-host-only": ModeResult("graph-host-only", "eager", error="refused"),
    }
    texts = {"eager": {0: "a boat.", 1: "the king sleeps.", 2: "home."},
             "graph-buggy": {0: "a boat.", 1: "the kinng slee", 2: "home."}}
    return BenchResult(cfg, modes, texts, ["x ", "y ", "z "], wall_s=33.3)


def test_bench_side_by_side_shows_only_corrupted_responses():
    html = bench_side_by_side(_fake_result(), "graph-buggy")
    assert "#1" in html and "#0" not in html and "#2" not in html
    assert MARKED.findall(html) == ["king", "sleeps.", "kinng", "slee"]
    assert "1 of 3 responses differ" in html and "word by word" in html
    assert "refused" in bench_side_by_side(_fake_result(), "graph-host-only")
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


def test_a_function_source_numbers_its_lines_as_the_file_does_and_marks_matches():
    import inspect

    from labkit.kernels import gumbel

    text = function_source(gumbel.slot_temperature_and_seed, mark=r"mask=|other=")
    lines = text.splitlines()
    file_lines = inspect.getsource(gumbel).splitlines()
    for line in lines:  # line N of the excerpt is line N of the file (1-based)
        assert file_lines[int(line[1:5]) - 1] == line[7:]
    assert lines[0][7:] == "@triton.jit" and lines[-1][7:] == "    return temp, seed"
    assert [line[7:].strip() for line in lines if line.startswith(">")] == [
        "temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)",
        "seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)"]


def test_a_function_source_shows_a_triton_kernel_as_written_with_or_without_triton():
    from labkit.kernels import gumbel
    from labkit.kernels.triton_import import KernelWithoutTriton

    stand_in = KernelWithoutTriton(getattr(gumbel.q_row_start, "fn", gumbel.q_row_start))
    assert function_source(stand_in) == function_source(gumbel.q_row_start)
    with pytest.raises(RuntimeError, match="Triton is not installed"):
        stand_in[(1,)]
