"""The notebooks in JupyterLab in a real browser (Debian's Chromium, driven by Playwright).

For every notebook: open it, Run > Run All Cells, wait for its kernel to go idle, and fail on any
error or stderr output, any dialog (a dead kernel), or any cell that did not run. Notebooks run
``LABKIT_BROWSER_PARALLEL`` at a time (default: 2, or 1 on one CPU), each in its own kernel, in as
many pages: each page loads JupyterLab once and opens its next notebook from the file browser when
the one before is closed, as a learner goes on. In the explorer notebook (02), move the step slider
and check that the figure's bytes changed. Screenshots go to ``$LABKIT_SCREENSHOTS`` (default
``screenshots/``, gitignored).

Skips, with the reason, when Chromium, playwright or jupyterlab is missing -- unless
``LABKIT_REQUIRE_BROWSER=1``, which turns the skip into a failure (for CI). ``LABKIT_CHROMIUM``
names another Chromium binary; ``LABKIT_BROWSER_NOTEBOOKS`` another notebook folder.

``LABKIT_BROWSER_SABOTAGE`` shows that the test can fail (it edits only the temporary copy):
``raise`` appends a cell that raises to every notebook; ``slider`` appends a cell to the explorer
notebook that detaches every widget callback, so the slider moves and the figure does not; ``news``
starts JupyterLab without `make lab`'s overrides, so its question about Jupyter news comes up;
``gauge`` starts it without a memory limit, so the status bar's gauge shows no limit.

JupyterLab runs with the settings `make lab` gives it (labkit/tools/lab.py): the first notebook
must open without the question "Would you like to get notified about official Jupyter news?", the
notebooks open trusted (a notebook's saved widgets render before it runs, not as their text), and
the server's log must hold no traceback and no HTTP 5xx when the run is over.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lab_driver import NEWS_PROMPT, LabServer, RunReport, launch_browser, run_notebooks, skip_without_browser

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(os.environ.get("LABKIT_BROWSER_NOTEBOOKS", REPO / "notebooks"))
SCREENSHOTS = Path(os.environ.get("LABKIT_SCREENSHOTS", REPO / "screenshots"))
EXPLORER = os.environ.get("LABKIT_EXPLORER_NOTEBOOK", "02")  # prefix of the notebook with the step slider
SABOTAGE = os.environ.get("LABKIT_BROWSER_SABOTAGE", "")
RUN_TIMEOUT_S = float(os.environ.get("LABKIT_BROWSER_TIMEOUT", "900"))
# Notebooks run side by side, each in its own page and kernel (make passes its JOBS).
_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
PARALLEL = max(1, int(os.environ.get("LABKIT_BROWSER_PARALLEL") or min(2, _CPUS)))

skip_without_browser()

NOTEBOOK_NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
# The learner's memory limit, as a room's spawner hands it to the server (MEM_LIMIT, bytes): the
# status bar's gauge (jupyter-resource-usage) shows the server's use against it.
GAUGE_LIMIT_MB = 3072

RAISING_CELL = 'raise RuntimeError("deliberately broken cell (LABKIT_BROWSER_SABOTAGE=raise)")'
DETACH_CALLBACKS = """\
import ipywidgets
for _w in list(ipywidgets.widgets.widget._instances.values()):
    if isinstance(_w, ipywidgets.widgets.widget_int._Int):
        _w.unobserve_all("value")  # LABKIT_BROWSER_SABOTAGE=slider: the slider no longer redraws
"""


def _sabotage(root: Path) -> None:
    import nbformat

    for path in sorted(root.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if SABOTAGE == "raise":
            nb.cells.append(nbformat.v4.new_code_cell(RAISING_CELL))
        elif SABOTAGE == "slider" and path.name.startswith(EXPLORER):
            nb.cells.append(nbformat.v4.new_code_cell(DETACH_CALLBACKS))
        else:
            continue
        nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    if not NOTEBOOK_NAMES:
        pytest.skip(f"no notebooks in {NOTEBOOKS}")
    work = tmp_path_factory.mktemp("jupyterlab")
    gauge = {} if SABOTAGE == "gauge" else {"MEM_LIMIT": str(GAUGE_LIMIT_MB * 2**20)}
    with LabServer(NOTEBOOKS, work, lab_overrides=SABOTAGE != "news", extra_env=gauge) as server:
        if SABOTAGE:
            _sabotage(server.root)
        with sync_playwright() as p:
            context = launch_browser(p, work / "chromium-profile")
            try:
                yield server, context
            finally:
                context.close()


@pytest.fixture(scope="module")
def ran(lab):
    """Run every notebook once, PARALLEL at a time; the per-notebook tests and the slider test
    read the results. The explorer's page and kernel stay open for the slider test."""
    server, context = lab
    results, pages = run_notebooks(context, server, NOTEBOOK_NAMES, parallel=PARALLEL, timeout_s=RUN_TIMEOUT_S,
                                   keep_open=(EXPLORER,), screenshots=SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "run-all-seconds.json").write_text(json.dumps(
        {"parallel": PARALLEL,
         "open_seconds": {n: round(p.open_seconds, 1) for n, p in pages.items() if p.open_seconds is not None},
         "run_all_seconds": {n: round(r.seconds, 1) for n, r in results.items() if not isinstance(r, Exception)}},
        indent=1))
    return results, pages


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebook_runs_in_jupyterlab_without_errors(ran, name):
    results, _ = ran
    report = results[name]
    if isinstance(report, Exception):
        raise report
    problems = report.problems()
    assert not problems, f"{name} in JupyterLab ({report.seconds:.0f} s):\n  " + "\n  ".join(problems)


def test_the_servers_log_holds_no_traceback(ran, lab):
    server, _ = lab
    found = server.server_tracebacks()
    assert not found, f"jupyter lab logged {len(found)} traceback(s) or 5xx answer(s):\n" + "\n---\n".join(found[:3])


def test_saved_widgets_render_on_opening_because_the_notebooks_are_trusted(ran):
    results, _ = ran
    names = [n for n in NOTEBOOK_NAMES if n.startswith(EXPLORER)]
    if not names:
        pytest.skip(f"no notebook starting with {EXPLORER!r} in {NOTEBOOKS}")
    report = results[names[0]]
    if isinstance(report, Exception):
        pytest.fail(f"{names[0]} did not open: {report}")
    assert not report.widgets_as_text, f"{names[0]} opened showing widgets as text: {report.widgets_as_text}"


def test_jupyterlab_opens_without_the_news_prompt(ran):
    results, _ = ran
    first = NOTEBOOK_NAMES[0]  # the notebook `make lab` opens
    report = results[first]
    if isinstance(report, Exception):
        pytest.fail(f"{first} did not open, so the page cannot be looked at: {report}")
    assert not report.news_prompt, f"JupyterLab asked about '{NEWS_PROMPT}' on opening {first}"
    asked = [n for n, r in results.items() if isinstance(r, RunReport) and r.news_prompt]
    assert not asked, f"JupyterLab asked about '{NEWS_PROMPT}' in {asked}"


def test_the_status_bar_shows_memory_use_against_the_learners_limit(ran):
    """A learner meets their memory limit on a gauge before a MemoryError: JupyterLab's status bar
    reads "Mem: USE / LIMIT MB" (jupyter-resource-usage, polling the server every few seconds)."""
    import re

    _, pages = ran
    page = next(p.page for name, p in pages.items() if name.startswith(EXPLORER))
    bar = page.locator("#jp-main-statusbar")
    deadline = 60_000
    page.wait_for_function("() => /Mem:/.test(document.querySelector('#jp-main-statusbar')?.innerText || '')",
                           timeout=deadline)
    text = bar.inner_text()
    match = re.search(r"Mem:\s*([\d.]+)\s*/\s*([\d.]+)\s*(KB|MB|GB)", text)
    assert match, f"the status bar shows no memory against a limit: {text!r}"
    in_mb = {"KB": 1 / 1024, "MB": 1, "GB": 1024}[match.group(3)]
    used, limit = float(match.group(1)) * in_mb, float(match.group(2)) * in_mb
    assert abs(limit - GAUGE_LIMIT_MB) < 1 and 0 < used < limit, text


def test_step_slider_changes_the_explorer_figure(ran):
    results, pages = ran
    names = [n for n in NOTEBOOK_NAMES if n.startswith(EXPLORER)]
    if not names:
        pytest.skip(f"no notebook starting with {EXPLORER!r} in {NOTEBOOKS}")
    name = names[0]
    if isinstance(results[name], Exception):
        pytest.fail(f"{name} did not run, so its slider cannot be tried: {results[name]}")
    nb = pages[name]
    # Its page was left behind the pages of the notebooks after it: Chromium renders a page in the
    # background only when it must, so the screenshot and the drag below would first redraw all of it.
    nb.page.bring_to_front()
    state = nb.kernel_state()
    assert state in ("idle", "busy"), f"{name}: its kernel is not running (state {state}), nothing can redraw"
    slider = nb.slider("step")
    slider.scroll_into_view_if_needed()
    value = nb.slider_value(slider)
    errors_before = nb.error_outputs()
    before = nb.image_digests(slider)
    assert before, f"{name}: no image next to the step slider"
    slider.locator("xpath=ancestor::div[contains(@class,'jp-OutputArea')][1]").screenshot(
        path=str(SCREENSHOTS / f"{Path(name).stem}-explorer-before.png"))
    # From the last step go back one, from any other step forward one.
    moved_to = nb.move_slider(slider, +1)
    if moved_to == value:
        moved_to = nb.move_slider(slider, -1)
    assert moved_to != value, f"{name}: the step slider did not move (still {value})"
    after = nb.wait_for_images_to_change(slider, before, timeout_s=240)
    slider.locator("xpath=ancestor::div[contains(@class,'jp-OutputArea')][1]").screenshot(
        path=str(SCREENSHOTS / f"{Path(name).stem}-explorer-after.png"))
    assert after != before, (f"{name}: the step slider moved from {value} to {moved_to}, but the figure "
                             "next to it did not change")
    new_errors = [e for e in nb.error_outputs() if e not in errors_before]
    assert not new_errors, f"{name}: moving the slider produced error output: {new_errors[0][:600]}"
