"""The notebooks in JupyterLab in a real browser (Debian's Chromium, driven by Playwright).

For every notebook: open it, Run > Run All Cells, wait for the kernel to go idle, and fail on any
error or stderr output, any dialog (a dead kernel), or any cell that did not run. In the explorer
notebook (02), move the step slider and check that the figure's bytes changed. Screenshots go to
``$LABKIT_SCREENSHOTS`` (default ``screenshots/``, gitignored).

Skips, with the reason, when Chromium, playwright or jupyterlab is missing -- unless
``LABKIT_REQUIRE_BROWSER=1``, which turns the skip into a failure (for CI). ``LABKIT_CHROMIUM``
names another Chromium binary; ``LABKIT_BROWSER_NOTEBOOKS`` another notebook folder.

``LABKIT_BROWSER_SABOTAGE`` shows that the test can fail (it edits only the temporary copy):
``raise`` appends a cell that raises to every notebook; ``slider`` appends a cell to the explorer
notebook that detaches every widget callback, so the slider moves and the figure does not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lab_driver import LabServer, NotebookPage, launch_browser, missing_requirements

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(os.environ.get("LABKIT_BROWSER_NOTEBOOKS", REPO / "notebooks"))
SCREENSHOTS = Path(os.environ.get("LABKIT_SCREENSHOTS", REPO / "screenshots"))
EXPLORER = os.environ.get("LABKIT_EXPLORER_NOTEBOOK", "02")  # prefix of the notebook with the step slider
SABOTAGE = os.environ.get("LABKIT_BROWSER_SABOTAGE", "")
RUN_TIMEOUT_S = float(os.environ.get("LABKIT_BROWSER_TIMEOUT", "900"))

_missing = missing_requirements()
if _missing:
    reason = "browser test needs " + "; ".join(_missing)
    if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"LABKIT_REQUIRE_BROWSER=1 but the {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)

NOTEBOOK_NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))

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
    with LabServer(NOTEBOOKS, work) as server:
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
    """Run every notebook once; the per-notebook tests and the slider test read the results."""
    server, context = lab
    results, pages = {}, {}
    for name in NOTEBOOK_NAMES:
        page = context.new_page()
        nb = NotebookPage(page, server, name)
        try:
            nb.open()
            report = nb.run_all(timeout_s=RUN_TIMEOUT_S)
            nb.screenshot(SCREENSHOTS / f"{Path(name).stem}.png")
            results[name] = report
        except Exception as err:  # a timeout is reported by the notebook's own test
            results[name] = err
            try:  # what the page showed when it gave up, for the CI log's reader
                nb.screenshot(SCREENSHOTS / f"{Path(name).stem}-FAILED.png")
            except Exception:  # noqa: BLE001 - the original error is what matters
                pass
        pages[name] = nb
        if not name.startswith(EXPLORER):
            server.close_session(name)  # one idle kernel at a time besides the explorer's
            page.close()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "run-all-seconds.json").write_text(json.dumps(
        {n: round(r.seconds, 1) for n, r in results.items() if not isinstance(r, Exception)}, indent=1))
    return results, pages


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebook_runs_in_jupyterlab_without_errors(ran, name):
    results, _ = ran
    report = results[name]
    if isinstance(report, Exception):
        raise report
    problems = report.problems()
    assert not problems, f"{name} in JupyterLab ({report.seconds:.0f} s):\n  " + "\n  ".join(problems)


def test_step_slider_changes_the_explorer_figure(ran):
    results, pages = ran
    names = [n for n in NOTEBOOK_NAMES if n.startswith(EXPLORER)]
    if not names:
        pytest.skip(f"no notebook starting with {EXPLORER!r} in {NOTEBOOKS}")
    name = names[0]
    if isinstance(results[name], Exception):
        pytest.fail(f"{name} did not run, so its slider cannot be tried: {results[name]}")
    nb = pages[name]
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
