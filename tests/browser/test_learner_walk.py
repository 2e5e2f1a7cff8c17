"""A learner's walk through the student edition in JupyterLab, looking for answers where a curious
learner looks: ``?`` on every name notebooks 00-02 (and 07) import, Tab after ``labkit.workshop.``,
and notebook 07 read ahead, top to bottom, before solving anything. Every text the page shows is
scanned with the secrecy patterns of the exercise records (labkit.workshop.editions.secrecy); any
answer seen before its exercise is solved fails the test.

The folder is a learner's, as `make lab` builds it; the server is the one the other browser tests
use (tests/browser/lab_driver.py). Skips as they do without Chromium or Playwright.
"""

from __future__ import annotations

import ast
import inspect
import os
from pathlib import Path

import pytest
from lab_driver import LabServer, NotebookPage, launch_browser, skip_without_browser

skip_without_browser()

import nbformat  # noqa: E402 - after the skip: the browser stage's requirements

from labkit.workshop.editions.secrecy import (  # noqa: E402
    EXERCISE_NOTEBOOK,
    STUDENT_PATH,
    answers_in,
    find_leaks,
)
from labkit.workshop.editions.student import build_learner_folder, learner_name  # noqa: E402
from labkit.workshop.exercises.record import letters  # noqa: E402

SCREENSHOTS = Path(os.environ.get("LABKIT_SCREENSHOTS", Path(__file__).resolve().parents[2] / "screenshots"))
BEFORE_THE_EXERCISES = STUDENT_PATH[:STUDENT_PATH.index(EXERCISE_NOTEBOOK)]


def _imports(nb) -> tuple[list[str], list[str]]:
    """A notebook's lines that import from the kit, and the names they bind."""
    lines, names = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            stripped = line.split("#")[0].strip()
            if not stripped.startswith(("import labkit", "from labkit")):
                continue
            lines.append(stripped)
            for node in ast.walk(ast.parse(stripped)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return lines, list(dict.fromkeys(names))


def _answers(text: str) -> dict[str, list[str]]:
    return {x: found for x in letters() if (found := answers_in(text, x))}


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    work = tmp_path_factory.mktemp("learner-walk")
    folder = build_learner_folder(work / "student")
    with LabServer(folder.root, work / "server") as server:
        with sync_playwright() as p:
            context = launch_browser(p, work / "chromium-profile")
            try:
                yield server, context, folder
            finally:
                context.close()


def _opened(server, context, notebook: str) -> NotebookPage:
    nb = NotebookPage(context.new_page(), server, learner_name(notebook))
    nb.open()
    return nb


@pytest.mark.parametrize("notebook", [*BEFORE_THE_EXERCISES, EXERCISE_NOTEBOOK])
def test_question_mark_on_every_name_a_notebook_imports_shows_no_answer(walk, notebook):
    server, context, folder = walk
    lines, names = _imports(nbformat.read(folder.root / learner_name(notebook), as_version=4))
    assert names, f"{notebook} imports nothing from the kit: this walk asks about nothing"
    nb = _opened(server, context, notebook)
    try:
        nb.run_new_cell("\n".join(lines))
        shown = {name: nb.run_new_cell(f"{name}?") for name in names}
        nb.screenshot(SCREENSHOTS / f"walk-{Path(notebook).stem}-help.png")
    finally:
        nb.page.close()
        server.close_session(learner_name(notebook))
    # `?` really showed each docstring: its first line is on the page (in JupyterLab's own line breaks).
    namespace: dict = {}
    exec("\n".join(lines), namespace)
    for name, text in shown.items():
        first = (inspect.getdoc(namespace[name]) or "").split("\n")[0]
        assert " ".join(first.split()[:6]) in " ".join(text.split()), (name, first, text[:300])
    found = {name: _answers(text) for name, text in shown.items() if _answers(text)}
    assert not found, f"`?` in {notebook} shows answers: {found}"


def test_tab_after_labkit_workshop_offers_no_answer(walk):
    server, context, folder = walk
    nb = _opened(server, context, EXERCISE_NOTEBOOK)
    try:
        nb.run_new_cell("import labkit\nfrom labkit.workshop import checkers as ex")
        offered = nb.completions("labkit.workshop.")
        offered_ex = nb.completions("ex.")
    finally:
        nb.page.close()
        server.close_session(learner_name(EXERCISE_NOTEBOOK))
    assert "checkers" in offered and "exercises" in offered, offered  # the completer answered
    assert any(name.startswith("check_") for name in offered_ex), offered_ex
    found = _answers(" ".join(offered + offered_ex))
    assert not found, f"Tab offers {found}"


def test_after_07_the_prs_fix_beside_yours_shows_whole_lines_without_scrolling(walk):
    """03 shows the PR's code next to the learner's (here: none kept yet) in two columns; at the
    default width every line of both is on screen, the lines of the fix included."""
    server, context, folder = walk
    nb = _opened(server, context, "03_the_fix.ipynb")
    try:
        overflowing, texts = {}, {}
        for x in letters():
            texts[x] = nb.run_new_cell(f'from labkit.workshop import checkers as ex\nex.compare("{x}")')
            overflowing[x] = nb.overflowing_in_last_output()
        nb.screenshot(SCREENSHOTS / "walk-03-compare.png")
    finally:
        nb.page.close()
        server.close_session(learner_name("03_the_fix.ipynb"))
    assert all("The PR's fix" in text or "PR" in text for text in texts.values()), texts
    assert not any(overflowing.values()), f"scroll sideways to read: {overflowing}"


def test_reading_07_ahead_shows_no_answer_before_its_exercise(walk):
    """07 as the page renders it, every cell, before anything runs: the scan's reading rule (what is
    before an exercise or past its first checker must not show its answer) applied to that text."""
    server, context, folder = walk
    nb = _opened(server, context, EXERCISE_NOTEBOOK)
    try:
        rendered = nb.cell_texts()
    finally:
        nb.page.close()
        server.close_session(learner_name(EXERCISE_NOTEBOOK))
    edition = {name: nbformat.read(folder.root / learner_name(name), as_version=4)
               for name in [*BEFORE_THE_EXERCISES, EXERCISE_NOTEBOOK]}
    seven = edition[EXERCISE_NOTEBOOK]
    assert len(rendered) == len(seven.cells), (len(rendered), len(seven.cells))
    for cell, text in zip(seven.cells, rendered, strict=True):
        cell.source, cell.cell_type, cell.outputs = text, "markdown", []  # what the learner reads
        cell.pop("execution_count", None)
    leaks = find_leaks(edition, help=False)
    assert not leaks, "reading 07 ahead shows:\n" + "\n".join(map(str, leaks))
