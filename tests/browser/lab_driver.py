"""Drive JupyterLab in Debian's Chromium through Playwright: a server, a browser, and a notebook page.

* :class:`LabServer` starts ``jupyter lab`` on 127.0.0.1, a free port and a random token (never
  without one), over a temporary copy of the notebooks, with its own settings, workspaces and
  runtime folders, so nothing from the user's JupyterLab leaks in and nothing leaks out.
* :func:`launch_browser` starts Chromium headless with a fresh ``--user-data-dir`` (Playwright
  takes that as ``launch_persistent_context``'s first argument, not as a flag).
* :class:`NotebookPage` opens a notebook (on its URL, or from the file browser of a page that shows
  JupyterLab already), runs Run > Run All Cells, waits until the kernel is idle and no cell is
  queued, reports error and stderr outputs, moves an ipywidgets slider, and closes the notebook.

Nothing here downloads anything: the browser is the system's ``chromium`` package.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

# `make lab`'s overrides and server flags: the test server uses the same ones, so the browser test
# checks what a learner gets (no news prompt, no update checks).
from labkit.tools import lab

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# Flags that keep Debian's Chromium headless, quiet and offline in a container (as root, too):
# without the background-networking ones it keeps trying to reach hosts a closed network refuses.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]

# Output areas JupyterLab renders for a traceback *and* for text on stderr (both use this mime type).
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
CODE_PROMPT = ".jp-CodeCell .jp-InputArea-prompt"


def _executable(path: str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def find_chromium() -> str | None:
    """Debian's Chromium; ``LABKIT_CHROMIUM`` names another binary (and, if it is not one, none)."""
    env = os.environ.get("LABKIT_CHROMIUM")
    if env:
        return env if _executable(env) else None
    for path in CHROMIUM_CANDIDATES:
        if _executable(path):
            return path
    return shutil.which("chromium")


def missing_requirements() -> list[str]:
    """What this machine lacks for the browser test, in words (empty: all there)."""
    missing = []
    if find_chromium() is None:
        missing.append("Chromium (Debian: apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install playwright; never `playwright install`)")
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        missing.append("jupyterlab")
    return missing


def skip_without_browser() -> None:
    """At a browser test module's top: skip it, with what is missing, where this machine lacks a
    requirement -- or fail instead under LABKIT_REQUIRE_BROWSER=1 (CI), so that a skip never passes
    for a run."""
    import pytest

    missing = missing_requirements()
    if missing:
        reason = "browser test needs " + "; ".join(missing)
        if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"LABKIT_REQUIRE_BROWSER=1 but the {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# JupyterLab settings for the test server: every cell stays in the DOM (no windowing).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
# The text of JupyterLab's first-start question about news, which `make lab` turns off.
NEWS_PROMPT = "official Jupyter news"


class LabServer:
    """``jupyter lab`` over a temporary copy of `notebooks`, on 127.0.0.1 with a random token."""

    def __init__(self, notebooks: Path, workdir: Path, *, startup_timeout: float = 120.0,
                 lab_overrides: bool = True, extra_env: dict | None = None):
        self.lab_overrides = lab_overrides  # False only to show that the news prompt test can fail
        self.extra_env = dict(extra_env or {})  # e.g. MEM_LIMIT, as a room's spawner sets it
        self.source = Path(notebooks)
        self.workdir = Path(workdir)
        self.root = self.workdir / "notebooks"
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "jupyter-lab.log"

    def __enter__(self) -> "LabServer":
        shutil.copytree(self.source, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        settings = self.workdir / "lab-settings"
        for name, value in LAB_SETTINGS.items():
            plugin, file = name.rsplit("/", 1)
            (settings / plugin).mkdir(parents=True, exist_ok=True)
            (settings / plugin / file).write_text(json.dumps(value))
        # make lab's defaults, in a settings folder of the test's own (make lab writes the same
        # overrides.json into the venv's): the announcements plugin reads them, the flags too.
        # Trusted as `make lab` trusts them: signed into a signature database of the server's own.
        lab.trust_notebooks(sorted(self.root.glob("*.ipynb")), self.workdir / "lab-state")
        app_settings = self.workdir / "app-settings"
        app_settings.mkdir(parents=True, exist_ok=True)
        if self.lab_overrides:
            lab.write_lab_overrides(app_settings)
        env = lab.lab_env(self.token)  # the token in the environment, as make lab passes it
        env.update(JUPYTER_RUNTIME_DIR=str(self.workdir / "runtime"), JUPYTER_CONFIG_DIR=str(self.workdir / "config"),
                   JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1")
        env.update(self.extra_env)
        cmd = [
            sys.executable, "-m", "jupyter", "lab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={self.workdir / 'workspaces'}",
            f"--LabApp.app_settings_dir={app_settings}", *lab.NO_NEWS_FLAGS,
            *lab.trust_flags(self.workdir / "lab-state"),
            "--LabApp.extension_manager=readonly", "--ServerApp.open_browser=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # containers and CI runners; the server still needs the token
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"jupyter lab did not answer within {self.startup_timeout:.0f} s:\n{self.log_tail()}")

    def api(self, method: str, path: str, timeout: float = 5.0):
        req = urllib.request.Request(self.url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def kernels_idle(self) -> bool:
        kernels = self.api("GET", "/api/kernels")
        return all(k.get("execution_state") == "idle" for k in kernels)

    def session_of(self, notebook: str) -> dict | None:
        sessions = self.api("GET", "/api/sessions")
        return next((x for x in sessions if x.get("path", "").endswith(notebook)), None)

    def close_session(self, notebook: str) -> None:
        """Shut down the kernel of one notebook (others keep running)."""
        session = self.session_of(notebook)
        if session is not None:
            self.api("DELETE", f"/api/sessions/{session['id']}", timeout=30)

    def shutdown_kernels(self) -> None:
        for k in self.api("GET", "/api/kernels"):
            try:
                self.api("DELETE", f"/api/kernels/{k['id']}", timeout=30)
            except urllib.error.URLError:
                pass

    def lab_url(self, notebook: str) -> str:
        # One fresh workspace per notebook (`?reset`): otherwise JupyterLab restores the tabs of
        # the notebooks opened before, whose hidden panels match the page-wide selectors.
        workspace = re.sub(r"[^A-Za-z0-9_-]", "-", Path(notebook).stem)
        return f"{self.url}/lab/workspaces/{workspace}/tree/{notebook}?reset&token={self.token}"

    def server_tracebacks(self) -> list[str]:
        """Every traceback and every HTTP 5xx the server logged, each with the lines around it."""
        try:
            lines = self.log_path.read_text().splitlines()
        except OSError:
            return []
        found = []
        for i, line in enumerate(lines):
            if "Traceback (most recent call last)" in line or re.search(r"\b5\d\d (GET|POST|PUT|PATCH|DELETE) ", line):
                found.append("\n".join(lines[max(0, i - 2): i + 25]))
        return found

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                try:
                    self.shutdown_kernels()
                    self.api("POST", "/api/shutdown", timeout=10)
                except (urllib.error.URLError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.terminate()
                    try:
                        self.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        self.proc.kill()
                        self.proc.wait()
        finally:
            self._log.close()
            self.proc = None


def launch_browser(playwright, user_data_dir: Path, *, viewport=(1400, 1000)):
    """A persistent Chromium context (fresh profile in `user_data_dir`), headless, offline flags."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=find_chromium(), headless=True, args=CHROMIUM_FLAGS,
        viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=False,
    )


@dataclass
class RunReport:
    notebook: str
    seconds: float
    code_cells: int
    executed: int
    errors: list[str]  # text of error / stderr output areas
    dialogs: list[str]  # text of dialogs JupyterLab opened (kernel died, ...)
    news_prompt: bool = False  # JupyterLab's question about official Jupyter news was on the page
    widgets_as_text: list[str] = field(default_factory=list)  # saved widgets shown as their text on opening

    def problems(self) -> list[str]:
        found = [f"error or stderr output: {text[:600]}" for text in self.errors]
        found += [f"dialog: {text[:300]}" for text in self.dialogs]
        if self.executed < self.code_cells:
            found.append(f"only {self.executed} of {self.code_cells} code cells ran (Run All stops at an error)")
        return found


class NotebookPage:
    """One notebook open in JupyterLab."""

    def __init__(self, page, server: LabServer, notebook: str):
        self.page = page
        self.server = server
        self.notebook = notebook
        self.open_seconds: float | None = None  # opening and kernel start, set by run_notebooks

    def open(self, timeout_s: float = 300.0) -> None:
        """Open the notebook and wait for its kernel. A page that shows this server's JupyterLab already
        (the notebook before was closed in it) opens it as a learner does, by a double click in the file
        browser; a new page loads JupyterLab on the notebook's URL. Loading the web app is most of what
        Chromium spends on a notebook: a load takes several times the CPU of opening one in it."""
        # Generous: on a busy 2-core CI machine JupyterLab took over 120 s to render the explorer
        # notebook (02, ~700 kB of stored figures) right after another notebook's run.
        if self.page.url.startswith(f"{self.server.url}/lab"):
            item = self.page.locator(".jp-DirListing-item", has_text=self.notebook).first
            item.wait_for(state="visible", timeout=30_000)
            item.dblclick()
        else:
            self.page.goto(self.server.lab_url(self.notebook), timeout=timeout_s * 1000)
        self.page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell",
                                    timeout=timeout_s * 1000)
        # The kernel is ready when the toolbar's kernel name shows and the session reports idle.
        self._wait(lambda: self._kernel_ready(), timeout_s, "the kernel to start")

    def _kernel_ready(self) -> bool:
        return self.kernel_state() == "idle"

    def kernel_state(self) -> str | None:
        """The notebook's kernel state as the server sees it (None: no kernel)."""
        session = self.server.session_of(self.notebook)
        return session["kernel"].get("execution_state") if session else None

    def _wait(self, condition, timeout_s: float, what: str, poll_s: float = 0.5) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return
            self.page.wait_for_timeout(poll_s * 1000)
        raise TimeoutError(f"{self.notebook}: gave up waiting for {what} after {timeout_s:.0f} s")

    def menu(self, top: str, item: str) -> None:
        """Click a main-menu entry, e.g. menu('Run', 'Run All Cells')."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
        entry = self.page.locator(".lm-Menu-itemLabel", has_text=item).first
        entry.wait_for(state="visible", timeout=10_000)
        entry.click()

    def prompts(self) -> list[str]:
        return [t.strip() for t in self.page.locator(CODE_PROMPT).all_inner_texts()]

    def start_run_all(self) -> None:
        """Run > Run All Cells; returns once the run has started (a prompt changed, or a dialog)."""
        self._run_started = time.monotonic()
        self._idle_polls = 0
        before = self.prompts()
        self.menu("Run", "Run All Cells")
        self._wait(lambda: self.prompts() != before or self._dialogs(), 60, "Run All to start")

    def run_finished(self) -> bool:
        """One look at the page: True once no cell is queued or running and this notebook's kernel
        was idle at two looks in a row (a widget's message may still arrive after the last cell).
        A dialog (the kernel died, ...) ends the run at once."""
        if self._dialogs():
            return True
        done = not any("*" in p for p in self.prompts()) and self.kernel_state() == "idle"
        self._idle_polls = self._idle_polls + 1 if done else 0
        return self._idle_polls >= 2

    def report(self) -> RunReport:
        """What the finished run left on the page: cells that ran, error outputs, dialogs."""
        prompts = self.prompts()
        executed = sum(any(ch.isdigit() for ch in p) for p in prompts)
        return RunReport(self.notebook, time.monotonic() - self._run_started, len(prompts), executed,
                         self.error_outputs(), self._dialogs(), self.news_prompt_shown(),
                         getattr(self, "widgets_as_text", []))

    def close(self, timeout_s: float = 60.0) -> None:
        """File > Close Tab, discarding the run's outputs (the server's copy keeps what was stored), then
        end the notebook's session and kernel: the page is left showing JupyterLab with no notebook
        open, for the next one. Raises if a notebook panel is still there."""
        self.menu("File", "Close Tab")
        save = self.page.locator(".jp-Dialog", has_text="Save changes")
        try:
            save.wait_for(state="visible", timeout=5_000)
        except Exception:  # noqa: BLE001 - a notebook the run left unchanged closes without asking
            pass
        else:
            save.locator("button", has_text="Discard").click()
        self.page.wait_for_function("document.querySelectorAll('.jp-NotebookPanel, .jp-Dialog').length === 0",
                                    timeout=timeout_s * 1000)
        self.server.close_session(self.notebook)

    def widgets_shown_as_text(self) -> list[str]:
        """Outputs that show a widget's plain-text stand-in (``VBox(children=...``): its saved state did
        not render (an untrusted notebook, or no widget manager)."""
        texts = self.page.locator(".jp-OutputArea-output").all_inner_texts()
        return [t.strip()[:200] for t in texts if re.match(r"\s*(VBox|HBox|IntSlider|Output)\(", t)]

    def news_prompt_shown(self) -> bool:
        """Whether JupyterLab's question about news is on the page (a toast that stays until answered)."""
        return self.page.get_by_text(NEWS_PROMPT).count() > 0

    def error_outputs(self) -> list[str]:
        return [t.strip() for t in self.page.locator(STDERR_OUTPUT).all_inner_texts()]

    def _dialogs(self) -> list[str]:
        return [t.strip() for t in self.page.locator(".jp-Dialog").all_inner_texts()]

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))
        return path

    # -- typing into new cells, as a learner does -----------------------------------------

    def _cells(self):
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")

    def cell_texts(self) -> list[str]:
        """What each cell of the open notebook shows, rendered (markdown as text, code with its outputs)."""
        return [t.strip() for t in self._cells().all_inner_texts()]

    def _new_cell_at_end(self, source: str):
        """A new code cell below the last one, `source` typed in (inserted as a paste would: no brackets
        closed for us), left in edit mode; returns its locator."""
        cells = self._cells()
        count = cells.count()
        cells.last.locator(".jp-InputArea-prompt, .jp-InputPrompt").first.click()
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("b")
        self._wait(lambda: self._cells().count() == count + 1, 10, "a new cell", poll_s=0.1)
        cell = self._cells().nth(count)
        cell.locator(".cm-content").click()
        self.page.keyboard.insert_text(source)
        return cell

    def run_new_cell(self, source: str, timeout_s: float = 120.0) -> str:
        """Type `source` into a new cell at the end, run it (Shift+Enter) and return what its output shows."""
        cell = self._new_cell_at_end(source)
        self.page.keyboard.press("Shift+Enter")

        def done() -> bool:
            prompt = cell.locator(".jp-InputArea-prompt").inner_text().strip()
            return bool(re.search(r"\[\d+\]", prompt)) and self.kernel_state() == "idle"

        self._wait(done, timeout_s, f"the cell {source[:40]!r} to run", poll_s=0.1)
        return "\n".join(t.strip() for t in cell.locator(".jp-OutputArea-output").all_inner_texts())

    def overflowing_in_last_output(self) -> list[str]:
        """Elements of the output of the last cell that ran whose content is wider than they are (the
        reader would have to scroll sideways): the start of each one's text."""
        cells = self._cells()
        ran = cells.nth(cells.count() - 2)  # Shift+Enter on the last cell leaves a new empty cell below it
        return ran.locator(".jp-OutputArea-output").evaluate_all(
            """(outputs) => outputs.flatMap((out) => [out, ...out.querySelectorAll('*')])
                 .filter((el) => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
                 .map((el) => (el.innerText || '').slice(0, 80))""")

    def completions(self, prefix: str, timeout_s: float = 60.0) -> list[str]:
        """Type `prefix` into a new cell and press Tab: the names JupyterLab's completer offers."""
        cell = self._new_cell_at_end(prefix)
        self.page.keyboard.press("Tab")
        items = self.page.locator(".jp-Completer:visible .jp-Completer-item .jp-Completer-match")
        # One name offered is inserted at once, with no list shown; none offered shows nothing.
        started = time.monotonic()
        while not items.count():
            typed = cell.locator(".cm-content").inner_text().strip()
            if typed != prefix.strip() and time.monotonic() - started > 2:
                self.page.keyboard.press("Escape")
                return [typed[len(prefix.strip()):].strip()]
            if time.monotonic() - started > min(timeout_s, 15.0):  # a list shows within seconds
                self.page.keyboard.press("Escape")
                return []
            self.page.wait_for_timeout(200)
        # JupyterLab renders a long list in pieces as it is scrolled: scroll to its end until no new
        # item appears, so that every name offered is read.
        names: list[str] = []
        for _ in range(100):
            seen = [t.strip() for t in items.all_inner_texts()]
            if seen == names:
                break
            names = seen
            self.page.locator(".jp-Completer-list").first.evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
            self.page.wait_for_timeout(200)
        self.page.keyboard.press("Escape")
        return list(dict.fromkeys(names))

    # -- widgets --------------------------------------------------------------------------

    def slider(self, label: str = "step"):
        """The ipywidgets slider whose description is `label` (else the first slider)."""
        sliders = self.page.locator(".widget-slider")
        labelled = sliders.filter(has=self.page.locator(".widget-label", has_text=label))
        target = labelled.first if labelled.count() else sliders.first
        target.wait_for(state="visible", timeout=30_000)
        return target

    def slider_value(self, slider) -> str:
        return slider.locator(".widget-readout").inner_text().strip()

    def images_near(self, slider) -> list:
        """The <img> elements of the output area that holds `slider` (the explorer's figure)."""
        area = self.page.locator(".jp-OutputArea", has=slider).last
        return area.locator("img").all()

    def image_digests(self, slider) -> list[str]:
        """SHA-256 of the bytes of each image next to the slider (blob:, data: or http URLs)."""
        digests = []
        for img in self.images_near(slider):
            data = img.evaluate(
                """async (el) => {
                    const r = await fetch(el.src);
                    const b = new Uint8Array(await r.arrayBuffer());
                    let s = ''; for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
                    return btoa(s);
                }""")
            digests.append(hashlib.sha256(data.encode()).hexdigest())
        return digests

    def move_slider(self, slider, delta: int = 1) -> str:
        """Drag the slider's handle by `delta` steps with the mouse, as a learner would; returns the
        readout afterwards. (A drag ends with the 'change' event that a slider with
        ``continuous_update=False`` waits for; arrow keys move the handle without it.)"""
        handle = slider.locator(".noUi-handle").first
        lo, hi, now = (float(handle.get_attribute(a)) for a in ("aria-valuemin", "aria-valuemax", "aria-valuenow"))
        target = min(max(now + delta, lo), hi)
        track = slider.locator(".noUi-target").first.bounding_box()
        box = handle.bounding_box()
        x0, y0 = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        x1 = track["x"] + (target - lo) / max(hi - lo, 1) * track["width"]
        mouse = self.page.mouse
        mouse.move(x0, y0)
        mouse.down()
        mouse.move((x0 + x1) / 2, y0, steps=5)
        mouse.move(x1, y0, steps=5)
        mouse.up()
        self.page.wait_for_timeout(300)
        return self.slider_value(slider)

    def wait_for_images_to_change(self, slider, before: list[str], timeout_s: float) -> list[str]:
        deadline = time.monotonic() + timeout_s
        after = before
        while time.monotonic() < deadline:
            self.page.wait_for_timeout(500)
            try:
                after = self.image_digests(slider)
            except Exception:  # an <img> replaced mid-read: read again
                continue
            if after and after != before and self.server.kernels_idle():
                return after
        return after


def run_notebooks(context, server: LabServer, names: list[str], *, parallel: int = 1,
                  timeout_s: float = 900.0, keep_open: tuple[str, ...] = (),
                  screenshots: Path | None = None) -> tuple[dict, dict]:
    """Open and Run All every notebook in `names`, `parallel` at a time, each in its own kernel; return
    ({name: RunReport or the exception that stopped it}, {name: NotebookPage}).

    Kernels mostly run one Python thread, so on 2 cores two notebooks side by side finish sooner
    than one after the other. Each of the `parallel` pages loads JupyterLab once and opens its next
    notebook from the file browser once the one before is closed (its kernel shut down), as a
    learner goes from notebook to notebook. A notebook whose name starts with one of `keep_open`
    stays open with its kernel (a later test uses it), and its page takes no other; nor does a page
    whose notebook failed or raised a dialog: the next one gets a new page. Screenshots of every
    notebook at the end of its run (``NAME.png``, or ``NAME-FAILED.png``) go to `screenshots`.
    """
    results: dict = {}
    pages: dict = {}
    queue = list(names)
    active: list[tuple[str, NotebookPage, float]] = []
    free: list = []  # pages showing JupyterLab with nothing open, ready for the next notebook

    def finish(name: str, nb: NotebookPage, outcome) -> None:
        results[name] = outcome
        if screenshots is not None:
            suffix = "" if isinstance(outcome, RunReport) else "-FAILED"
            try:  # what the page showed at the end, for the CI log's reader
                nb.screenshot(screenshots / f"{Path(name).stem}{suffix}.png")
            except Exception:  # noqa: BLE001 - the run's own outcome is what matters
                pass
        if keep_open and name.startswith(keep_open):
            return
        if isinstance(outcome, RunReport) and not outcome.dialogs:
            try:
                nb.close()
                free.append(nb.page)
                return
            except Exception:  # noqa: BLE001 - the page is given up below; the run's outcome stands
                pass
        server.close_session(name)  # idle kernels would only take memory
        nb.page.close()

    while queue or active:
        while queue and len(active) < max(1, parallel):
            name = queue.pop(0)
            nb = pages[name] = NotebookPage(free.pop() if free else context.new_page(), server, name)
            try:
                opened = time.monotonic()
                nb.open()
                nb.open_seconds = time.monotonic() - opened
                nb.widgets_as_text = nb.widgets_shown_as_text()  # before anything runs: what was saved
                nb.start_run_all()
                active.append((name, nb, time.monotonic() + timeout_s))
            except Exception as err:  # reported by the notebook's own test
                finish(name, nb, err)
        running = []
        for name, nb, deadline in active:
            try:
                if nb.run_finished():
                    finish(name, nb, nb.report())
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"{name}: gave up waiting for Run All to finish after {timeout_s:.0f} s")
                else:
                    running.append((name, nb, deadline))
            except Exception as err:
                finish(name, nb, err)
        active = running
        if active:
            active[0][1].page.wait_for_timeout(500)
    return results, pages
