"""A learner's walk through the student edition in JupyterLab, looking for answers where a curious
learner looks: the file browser, ``?`` on every name notebooks 00-02 (and 07) import, Tab after
``labkit.workshop.``, Tab two levels deep from ``labkit.`` and ``?`` on everything it offers, and
notebooks 00, 01, 02 and 07 read ahead, top to bottom, before solving anything. Every text the page
shows is scanned with the secrecy patterns of the exercise records (labkit.workshop.editions.secrecy);
any answer seen before its exercise is solved fails the test. Then the capstone, passed, brings the
docs that explain the fix, and they open rendered, as the mask page does before it.

The folder is a learner's, as `make lab` builds it; the server is the one the other browser tests
use (tests/browser/lab_driver.py). Skips as they do without Chromium or Playwright.
"""

from __future__ import annotations

import ast
import inspect
import os
import time
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


def test_reading_the_path_ahead_up_to_07_shows_no_answer_before_its_exercise(walk):
    """00, 01, 02 and 07 as the page renders them, every cell, before anything runs: the scan's reading
    rule (what is before an exercise or past its first checker must not show its answer) applied to
    that text."""
    server, context, folder = walk
    path = [*BEFORE_THE_EXERCISES, EXERCISE_NOTEBOOK]
    edition = {name: nbformat.read(folder.root / learner_name(name), as_version=4) for name in path}
    for name in path:
        nb = _opened(server, context, name)
        try:
            rendered = nb.cell_texts()
        finally:
            nb.page.close()
            server.close_session(learner_name(name))
        cells = edition[name].cells
        assert len(rendered) == len(cells), (name, len(rendered), len(cells))
        for cell, text in zip(cells, rendered, strict=True):
            cell.source, cell.cell_type, cell.outputs = text, "markdown", []  # what the learner reads
            cell.pop("execution_count", None)
    leaks = find_leaks(edition, help=False)
    assert not leaks, "reading ahead shows:\n" + "\n".join(map(str, leaks))


# --- the file browser, and Tab two levels deep with ? on everything it offers ---------------------

def test_the_file_browser_lists_the_notebooks_in_the_learners_order_with_whole_names(walk):
    server, context, folder = walk
    nb = _opened(server, context, STUDENT_PATH[0])
    try:
        items = nb.page.locator(".jp-DirListing-content .jp-DirListing-item .jp-DirListing-itemText")
        items.first.wait_for(state="visible", timeout=30_000)
        shown = [t.strip() for t in items.all_inner_texts()]
        cut = items.evaluate_all("(els) => els.filter((el) => el.scrollWidth > el.clientWidth + 1)"
                                 ".map((el) => el.innerText.trim())")
        nb.screenshot(SCREENSHOTS / "walk-file-browser.png")
    finally:
        nb.page.close()
        server.close_session(learner_name(STUDENT_PATH[0]))
    assert [name for name in shown if name.endswith(".ipynb")] == [learner_name(n) for n in STUDENT_PATH], shown
    assert not cut, f"the file browser cuts {cut}"


def _kit_names_offered(module: str, offered: list[str]) -> list[str]:
    """Of the names Tab offers after ``module.``, those whose ``?`` shows the kit's own text: its
    submodules, and what the kit defines (a name imported from torch shows torch's docstring)."""
    import importlib
    import importlib.util

    value = importlib.import_module(module)
    kept = []
    for name in offered:
        if name.startswith("_"):
            continue
        try:
            is_module = importlib.util.find_spec(f"{module}.{name}") is not None
        except (ImportError, ValueError):
            is_module = False
        member = getattr(value, name, None)
        owner = getattr(member, "__module__", None) if callable(member) else type(member).__module__
        if is_module or (isinstance(owner, str) and owner.split(".")[0] == "labkit"):
            kept.append(name)
    return kept


def _identity(name: str):
    """What `name` names, as this process imports it: the same key for a name and its re-exports."""
    import importlib

    module, _, attr = name.rpartition(".")
    try:
        value = getattr(importlib.import_module(module), attr) if attr else importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module that cannot be imported here: asked about by its name
        return name
    return ("object", id(value)) if callable(value) or hasattr(value, "__name__") else name


def _is_submodule(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


PACKAGE = Path(__file__).resolve().parents[2] / "labkit"


def test_tab_two_levels_deep_and_question_mark_on_what_it_offers_show_no_answer(walk):
    """``labkit.<Tab>``, then ``labkit.<module>.<Tab>`` for every module offered, then ``?`` on the
    module and on each of the kit's names offered there: all before the first exercise, so held to
    the patterns of the kit's reference (every exercise's)."""

    server, context, folder = walk
    nb = _opened(server, context, STUDENT_PATH[0])
    shown: dict[str, str] = {}
    asked: dict[object, str] = {}
    try:
        # `from labkit import <Tab>` offers every module of the package, imported or not (`labkit.<Tab>`
        # offers those imported so far).
        nb.run_new_cell("import labkit")
        first = [name for name in nb.completions("from labkit import ") if not name.startswith("_")
                 and _is_submodule(f"labkit.{name}")]
        packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}  # every package of the kit, on disk
        assert packages and packages <= set(first), (packages, first)
        for module in first:
            nb.run_new_cell(f"import labkit.{module}")
            # What a module offers: its names and, for a package, its submodules on disk.
            offered = _kit_names_offered(f"labkit.{module}", nb.completions(f"from labkit.{module} import "))
            for name in [f"labkit.{module}", *(f"labkit.{module}.{n}" for n in offered)]:
                # One `?` per object: a name the kit re-exports shows what `?` showed where it was met first.
                key = _identity(name)
                if key in asked:
                    shown[name] = shown[asked[key]]
                    continue
                asked[key] = name
                if _is_submodule(name):
                    nb.run_new_cell(f"import {name}")  # `?` on a submodule needs it imported, as for a learner
                shown[name] = nb.run_new_cell(f"{name}?")
        nb.screenshot(SCREENSHOTS / "walk-tab-two-levels.png")
    finally:
        nb.page.close()
        server.close_session(learner_name(STUDENT_PATH[0]))
    assert {"labkit.kernels", "labkit.workshop", "labkit.kernels.gumbel", "labkit.kernels.dflash_prep",
            "labkit.workshop.exercises", "labkit.workshop.harness", "labkit.proofs.guarded", "labkit.tools.mutants",
            "labkit.speculator.padded_slot_error"} <= set(shown), sorted(shown)
    # `?` really showed the kit's docstrings: the first words of one are on the page.
    assert "The Gumbel sampling kernel of the drafter" in " ".join(shown["labkit.kernels.gumbel"].split())
    found = {name: hits for name, text in shown.items()
             if (hits := {x: f for x in letters() if (f := answers_in(text, x, in_help=True))})}
    assert not found, f"Tab and ? show answers before the exercises: {found}"


# --- after the capstone: the docs that explain the fix, rendered ----------------------------------

def _rendered_markdown(server, context, doc: str) -> tuple[bool, str]:
    """Open docs/`doc` as a learner does (its address in the lab) and say whether JupyterLab shows it
    rendered, with the text it shows."""
    page = context.new_page()
    try:
        page.goto(server.lab_url(f"docs/{doc}"), timeout=300_000)
        page.wait_for_selector(".jp-RenderedMarkdown, .jp-FileEditor", timeout=120_000)
        rendered = page.locator(".jp-MainAreaWidget:not(.lm-mod-hidden) .jp-RenderedMarkdown")
        if not rendered.count():
            return False, page.locator(".jp-FileEditor").first.inner_text()
        deadline = time.monotonic() + 60  # a long page (tables) is still being rendered
        while not rendered.first.inner_text().strip() and time.monotonic() < deadline:
            time.sleep(0.5)
        return True, rendered.first.inner_text()
    finally:
        page.close()


def test_the_docs_open_rendered_and_the_capstone_brings_the_ones_that_explain_the_fix(walk):
    from labkit.workshop.editions.student import DOCS_AFTER_THE_EXERCISES, LEARNER_DOCS

    server, context, folder = walk
    docs = server.root / "docs"
    assert sorted(p.name for p in docs.glob("*.md")) == sorted(LEARNER_DOCS)  # before the capstone: the mask page
    for doc in LEARNER_DOCS:
        rendered, text = _rendered_markdown(server, context, doc)
        assert rendered, f"docs/{doc} opens as source, not rendered"
        found = {x: f for x in letters() if (f := answers_in(text, x, in_task=True))}
        assert not found, (doc, found)
    # The capstone, passed with the instructor edition's answers (the torch version of (b)).
    instructor = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / EXERCISE_NOTEBOOK, as_version=4)
    answers = {c.get("id"): c.source for c in instructor.cells}
    nb = _opened(server, context, EXERCISE_NOTEBOOK)
    try:
        mine = nbformat.read(folder.root / learner_name(EXERCISE_NOTEBOOK), as_version=4)
        nb.run_new_cell(next(c.source for c in mine.cells if c.get("id") == "setup"))  # 07's first cell, as run
        for cell in ("a-solution", "b-solution-torch", "c-solution"):
            nb.run_new_cell(answers[cell])
        verdict = nb.run_new_cell("from labkit.workshop.exercises.capstone import run_capstone\n"
                                  "run_capstone(globals(), prompts=2)", timeout_s=600)
    finally:
        nb.page.close()
        server.close_session(learner_name(EXERCISE_NOTEBOOK))
    assert "your fix: 2 of 2 identical to eager" in verdict and "now in your folder" in verdict, verdict[:2000]
    assert sorted(p.name for p in docs.glob("*.md")) == sorted(LEARNER_DOCS + DOCS_AFTER_THE_EXERCISES)
    for doc in DOCS_AFTER_THE_EXERCISES:
        rendered, text = _rendered_markdown(server, context, doc)
        assert rendered and len(text) > 1000, f"docs/{doc} opens as source, not rendered"
