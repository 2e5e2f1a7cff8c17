"""The case book keeps each case's answer until the case asks for it (labkit.workshop.editions.secrecy,
the cases' records in labkit.family.record).

A learner reaches notebook 09 after every other lesson notebook of the student path, and in 09 meets
each case's "predict, then run" cell after the case's sources and mechanism. Nothing before that cell
may show the case's answer: no notebook's source or saved output on the way, no doc a notebook names,
nothing ``?`` and Tab show of the kit's modules a cell imports from, and not the README outside its
spoiler section. The notebooks after 07 are scanned as the instructor edition saves them: their saved
outputs are what a learner sees on running them. A scan of patterns that match nothing would pass any
notebook, so each case's patterns must catch the notebook's own answer, and a planted answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from labkit.family.record import CASES, NOTEBOOK
from labkit.workshop.editions.secrecy import (
    CASE_NOTEBOOK,
    STUDENT_PATH,
    answers_in,
    before_each_case,
    find_case_leaks,
    outside_spoilers,
)

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
DOCS = {p.name: p.read_text() for p in sorted((REPO / "docs").glob("*.md"))}


@pytest.fixture(scope="module")
def path_notebooks() -> dict:
    return {name: nbformat.read(NOTEBOOKS / name, as_version=4) for name in STUDENT_PATH}


def _answer_text(nb, case) -> str:
    """The two cells after a case's prediction: the run (with its saved output) and its reading."""
    ids = [c.get("id") for c in nb.cells]
    at = ids.index(case.predict_cell)
    return "\n".join(c.source + "".join(o.get("text", "") for o in c.get("outputs", []))
                     for c in nb.cells[at + 1: at + 3])


def test_the_case_book_sits_in_the_student_path_after_every_lesson_and_before_the_appendix():
    assert CASE_NOTEBOOK == NOTEBOOK and (NOTEBOOKS / NOTEBOOK).is_file()
    at = STUDENT_PATH.index(NOTEBOOK)
    assert STUDENT_PATH.index("07_exercises.ipynb") < at and STUDENT_PATH.index("06_audit_and_distribution.ipynb") < at
    assert STUDENT_PATH[-1].startswith("08_")


def test_no_case_answer_is_shown_before_its_predict_cell(path_notebooks):
    leaks = find_case_leaks(path_notebooks, DOCS)
    assert not leaks, "the case book gives answers away:\n" + "\n".join(map(str, leaks))


def test_the_scan_reads_the_path_docs_and_help_up_to_each_predict_cell(path_notebooks):
    seen = before_each_case(path_notebooks, DOCS)
    for case in CASES:
        where = {piece.where for piece in seen[case.name]}
        notebooks = {piece.notebook for piece in seen[case.name]}
        assert {"doc docs/MECHANICS.md", "doc docs/VLLM_MAP.md", "source"} <= where, case.name
        assert any(w.startswith("doc of") or w.endswith("?") for w in where), case.name
        assert set(STUDENT_PATH[:STUDENT_PATH.index(NOTEBOOK) + 1]) == notebooks, case.name
    # Each case sees the earlier cases' answers and more of 09, never its own prediction.
    lengths = [len(seen[c.name]) for c in CASES]
    assert lengths == sorted(lengths) and len(set(lengths)) == len(lengths)


def test_every_case_has_its_predict_cell_and_its_patterns_catch_its_own_answer(path_notebooks):
    nb = path_notebooks[NOTEBOOK]
    ids = [c.get("id") for c in nb.cells]
    for case in CASES:
        assert case.predict_cell in ids, case.name
        assert answers_in(_answer_text(nb, case), case), f"{case.name}'s patterns miss its own answer"
        assert not answers_in(nb.cells[ids.index(case.predict_cell)].source, case), f"{case.name}'s question tells"


@pytest.mark.parametrize("where", ["00_setup_and_tour.ipynb", "05_sibling_bugs.ipynb", NOTEBOOK])
def test_the_scan_catches_each_case_answer_planted_before_its_predict_cell(path_notebooks, where):
    planted = {name: nbformat.from_dict(json.loads(json.dumps(nb))) for name, nb in path_notebooks.items()}
    for case in CASES:
        cell = nbformat.v4.new_markdown_cell(_answer_text(path_notebooks[NOTEBOOK], case))
        ids = [c.get("id") for c in planted[where].cells]
        planted[where].cells.insert(1 if where != NOTEBOOK else ids.index(case.predict_cell), cell)
    leaks = find_case_leaks(planted, DOCS)
    for case in CASES:
        mine = [leak for leak in leaks if leak.exercise == case.name and leak.seen.notebook == where]
        assert mine, (case.name, where)
        assert "before its predict cell asks for it" in str(mine[0])


def test_the_readme_outside_its_spoilers_shows_no_case_answer():
    outside = outside_spoilers((REPO / "README.md").read_text())
    found = {case.name: answers_in(outside, case) for case in CASES}
    assert not any(found.values()), found
