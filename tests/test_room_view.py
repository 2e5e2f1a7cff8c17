"""The instructor's room view (labkit_room.view) over real HTTP: the service as the hub starts it (a
process of its own, its settings and token by environment), a stand-in for the hub's API that says
who owns which token, reports sent over the service's unix socket as a learner's kernel sends them,
the board read as the instructor would, and every way a learner might read or forge a row refused
with one line. And the lesson's side (labkit.workshop.room_report): outside a room a checker sends
nothing and starts nothing; in one, a real checker's report says the exercise and the verdict, never
the learner's code."""

from __future__ import annotations

import getpass
import http.client
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from labkit.workshop import room_report
from labkit_room import view

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="unix sockets and SO_PEERCRED")

ME = getpass.getuser()  # this test's process plays the learner whose kernel reports
OTHER = "labkit-learner02"
PREFIX = f"/services/{view.SERVICE_NAME}/"
TOKENS = {
    "tok-me": {"kind": "user", "name": ME, "scopes": [view.REPORT_SCOPE, f"users:activity!user={ME}"]},
    "tok-other": {"kind": "user", "name": OTHER, "scopes": [view.REPORT_SCOPE]},
    "tok-me-no-scope": {"kind": "user", "name": ME, "scopes": [f"read:users:name!user={ME}"]},
    "tok-instructor": {"kind": "user", "name": "instructor", "scopes": [view.VIEW_SCOPE]},
}


class FakeHubAPI(BaseHTTPRequestHandler):
    """GET /hub/api/user: the token's owner, as JupyterHub answers it (403 for a token it does not know);
    and the hub's OAuth, as it goes for the instructor logged in to the hub: authorize sends the browser
    back to the service with a code, and the code is exchanged for the instructor's token."""

    def log_message(self, *args):
        pass

    def _json(self, status: int, model: dict):
        body = json.dumps(model).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/hub/api/oauth2/token"):
            return self._json(200, {"access_token": "tok-instructor", "token_type": "Bearer"})
        self._json(404, {"message": "no such page"})

    def do_GET(self):
        from urllib.parse import parse_qs, urlencode, urlsplit

        if self.path.startswith("/hub/api/oauth2/authorize"):
            query = parse_qs(urlsplit(self.path).query)
            self.send_response(302)
            self.send_header("Location", query["redirect_uri"][0] + "?" + urlencode(
                {"code": "a-code", "state": query["state"][0]}))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        token = self.headers.get("Authorization", "").partition(" ")[2]
        model = TOKENS.get(token) if self.path.rstrip("/") == "/hub/api/user" else None
        body = json.dumps(model or {"status": 403, "message": "no such token"}).encode()
        self.send_response(200 if model else 403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(tmp_path, learners: list[str], seed: dict | None = None, saved: tuple = (ME,)):
    """The view as the hub starts it, for `learners`, its board `seed`ed (the store a restart reads);
    a generator: yields what the tests reach it by, then stops it and the stand-in hub."""
    hub = ThreadingHTTPServer(("127.0.0.1", 0), FakeHubAPI)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    port = _free_port()
    work = tmp_path / "hub-work"
    for name in saved:  # what an earlier room's close kept of these learners
        (work / "a1b2c3" / name / "my_answers").mkdir(parents=True, exist_ok=True)
        (work / "a1b2c3" / name / "07_exercises.ipynb").write_text('{"cells": []}')
        (work / "a1b2c3" / name / "my_answers" / "a.py").write_text("def f(): pass\n")
    config = {"learners": learners, "exercises": view.exercises(), "verdicts": list(room_report.VERDICTS),
              "socket": str(tmp_path / "sock" / "report.sock"), "store": str(tmp_path / "room-view.json"),
              "work_folder": str(work), "home_root": "/home", "learner_folder": "stale-padding-lab"}
    if seed is not None:
        (tmp_path / "room-view.json").write_text(json.dumps(seed))
    env = {**os.environ, view.CONFIG_ENV: json.dumps(config),
           "JUPYTERHUB_API_URL": f"http://127.0.0.1:{hub.server_port}/hub/api",
           "JUPYTERHUB_API_TOKEN": "the-services-own", "JUPYTERHUB_SERVICE_NAME": view.SERVICE_NAME,
           "JUPYTERHUB_SERVICE_PREFIX": PREFIX, "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}",
           "JUPYTERHUB_CLIENT_ID": f"service-{view.SERVICE_NAME}", "JUPYTERHUB_HOST": f"http://127.0.0.1:{hub.server_port}",
           "JUPYTERHUB_BASE_URL": "/",
           "JUPYTERHUB_OAUTH_CALLBACK_URL": f"http://127.0.0.1:{port}{PREFIX}oauth_callback"}
    env.pop(room_report.REPORT_ENV, None)
    proc = subprocess.Popen([sys.executable, "-m", "labkit_room.view"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(config["socket"]) or not _listening(port):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() is not None \
            else "the view did not start in 60 s"
        time.sleep(0.1)
    try:
        yield {"port": port, "socket": config["socket"], "config": config, "proc": proc}
    finally:
        proc.terminate()
        proc.wait(10)
        hub.shutdown()


@pytest.fixture
def service(tmp_path):
    yield from start_service(tmp_path, [ME, OTHER])


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("labkit-room", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


def report(service, body, token: str | None = "tok-me", method="POST", path="/report") -> tuple[int, str]:
    conn = UnixHTTP(service["socket"])
    headers = {"Content-Type": "application/json", **({"Authorization": f"token {token}"} if token else {})}
    conn.request(method, path, body=body if isinstance(body, (bytes, str)) else json.dumps(body), headers=headers)
    resp = conn.getresponse()
    return resp.status, resp.read().decode()


def get(service, path: str, token: str | None = "tok-instructor"):
    conn = http.client.HTTPConnection("127.0.0.1", service["port"], timeout=10)
    conn.request("GET", PREFIX + path, headers={"Authorization": f"token {token}"} if token else {})
    resp = conn.getresponse()
    return resp, resp.read()


def board(service) -> dict:
    resp, body = get(service, "api/board")
    assert resp.status == 200, body
    return {row["learner"]: row for row in json.loads(body)["rows"]}


def test_a_learners_reports_reach_their_own_row_and_the_instructor_reads_the_board(service):
    assert report(service, {"exercise": "a", "verdict": "tried"})[0] == 204
    assert report(service, {"exercise": "a", "verdict": "tried"})[0] == 204
    assert report(service, {"exercise": "b", "verdict": "hint", "hint": 2})[0] == 204
    assert report(service, {"exercise": "c", "verdict": "solved"})[0] == 204
    rows = board(service)
    mine = rows[ME]["cells"]
    assert (mine["a"]["state"], mine["a"]["tries"]) == ("tried", 2)
    assert (mine["b"]["state"], mine["b"]["hint"]) == ("hint", 2)
    assert mine["c"]["state"] == "solved"
    assert mine["capstone"]["state"] == "none" and rows[ME]["since_s"] is not None
    assert all(cell["state"] == "none" for cell in rows[OTHER]["cells"].values()) and rows[OTHER]["since_s"] is None
    # The columns: every exercise of the records and the capstone, with the agendas' minutes.
    _, body = get(service, "api/board")
    columns = json.loads(body)["exercises"]
    from labkit.workshop.editions.agenda import exercise_minutes

    assert {c["id"]: c["minutes"] for c in columns} == exercise_minutes()


@pytest.mark.parametrize(("body", "token", "status", "says"), [
    ({"exercise": "a", "verdict": "solved", "learner": OTHER}, "tok-me", 400, "takes your name from your token"),
    ({"exercise": "a", "verdict": "solved", "user": OTHER}, "tok-me", 400, "takes your name from your token"),
    ({"exercise": "a", "verdict": "solved"}, "tok-other", 403, f"from {ME}'s process, not {OTHER}'s"),
    ({"exercise": "a", "verdict": "solved"}, None, 403, "needs your own token"),
    ({"exercise": "a", "verdict": "solved"}, "tok-made-up", 403, "knows no user"),
    ({"exercise": "a", "verdict": "solved"}, "tok-me-no-scope", 403, "no learner of this room"),
    ({"exercise": "a", "verdict": "solved"}, "tok-instructor", 403, "no learner of this room"),
    (b"{not json", "tok-me", 400, "JSON object"),
    (b"[1, 2]", "tok-me", 400, "JSON object"),
    ({"exercise": "z", "verdict": "solved"}, "tok-me", 400, "no exercise"),
    ({"exercise": "a", "verdict": "gave up"}, "tok-me", 400, "verdict is one of"),
    ({"exercise": "a", "verdict": "solved", "hint": 3}, "tok-me", 400, "hint number"),
])
def test_a_report_that_cannot_be_attributed_or_read_is_refused_in_one_line(service, body, token, status, says):
    got, text = report(service, body, token)
    assert got == status and says in text, text
    assert len(text.strip().splitlines()) == 1 and "Traceback" not in text
    rows = board(service)
    assert all(c["state"] == "none" for row in rows.values() for c in row["cells"].values())


def test_a_learner_flooding_reports_is_refused_past_the_rate_and_only_what_passed_counts(service):
    from concurrent.futures import ThreadPoolExecutor

    burst = 4 * view.REPORTS_PER_S  # all at once, as a loop in a kernel would send them
    with ThreadPoolExecutor(burst) as pool:
        answers = list(pool.map(lambda _: report(service, {"exercise": "d", "verdict": "tried"})[0], range(burst)))
    assert set(answers) == {204, 429}, answers
    assert board(service)[ME]["cells"]["d"]["tries"] == answers.count(204) <= 2 * view.REPORTS_PER_S
    padding = b"y" * 2 * view.MAX_REPORT_BYTES
    too_big = report(service, b'{"exercise": "a", "verdict": "tried", "x": "' + padding + b'"}')
    assert too_big[0] in (400, 413), too_big


def test_nothing_is_read_through_the_learners_door_nor_by_a_learner_at_the_view(service):
    assert report(service, {"exercise": "a", "verdict": "solved"})[0] == 204
    for method, path in (("GET", "/report"), ("GET", "/"), ("GET", PREFIX + "api/board"), ("GET", "/api/board")):
        status, text = report(service, None, "tok-me", method=method, path=path)
        assert status in (404, 405) and ME not in text, (method, path, status, text)
    for path in ("", "api/board", f"collect/{ME}.zip", f"saved/a1b2c3/{ME}.zip", "static/view.js"):
        for token in ("tok-me", "tok-other", "tok-me-no-scope"):
            resp, body = get(service, path, token)
            assert resp.status == 403, (path, token, resp.status)
            assert b"solved" not in body and ME.encode() not in body.replace(b"user " + ME.encode(), b"")


def test_the_page_runs_only_the_views_own_script_and_downloads_are_never_rendered(service):
    resp, body = get(service, "")
    assert resp.status == 200
    policy = resp.getheader("Content-Security-Policy")
    assert f"script-src 127.0.0.1:{service['port']}{PREFIX}static/;" in policy
    assert "unsafe-inline" not in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert b"<script>" not in body and f'src="{PREFIX}static/view.js"'.encode() in body
    assert resp.getheader("X-Content-Type-Options") == "nosniff"
    resp, js = get(service, "static/view.js")
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/javascript")
    assert b"innerHTML" not in js and b"textContent" in js
    resp, body = get(service, "api/board")
    assert [c["learner"] for c in json.loads(body)["saved"]] == [ME]
    resp, data = get(service, f"saved/a1b2c3/{ME}.zip")
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "application/zip"
    assert resp.getheader("Content-Disposition") == f'attachment; filename="{ME}-a1b2c3.zip"'
    assert resp.getheader("Content-Security-Policy") == "sandbox"
    assert resp.getheader("X-Content-Type-Options") == "nosniff"
    assert sorted(zipfile.ZipFile(io.BytesIO(data)).namelist()) == ["07_exercises.ipynb", "my_answers/a.py"]
    resp, text = get(service, f"saved/a1b2c3/{OTHER}.zip")
    assert resp.status == 404 and len(text.decode().strip().splitlines()) == 1
    resp, text = get(service, "collect/labkit-learner77.zip")
    assert resp.status == 404 and b"no such learner" in text


def test_the_board_survives_a_restart_of_the_service(tmp_path):
    store = tmp_path / "room-view.json"
    first = view.Board([ME], view.exercises(), store)
    first.apply(ME, "a", "solved", now=100.0)
    assert oct(store.stat().st_mode & 0o777) == "0o600"
    again = view.Board([ME], view.exercises(), store)
    assert again.snapshot(now=160.0)["rows"][0]["cells"]["a"]["state"] == "solved"
    assert again.snapshot(now=160.0)["rows"][0]["since_s"] == 60


def test_a_learner_on_one_exercise_longer_than_the_agenda_gives_it_is_marked():
    columns = view.exercises()
    minutes = {c["id"]: c["minutes"] for c in columns}
    b = view.Board([ME], columns)
    t0 = 1_000_000.0
    b.apply(ME, "b", "tried", now=t0)
    b.apply(ME, "a", "tried", now=t0)
    b.apply(ME, "a", "solved", now=t0 + 30)
    b.apply(ME, "b", "tried", now=t0 + 120)  # a second try does not restart its clock
    just_in = b.snapshot(now=t0 + 60 * minutes["b"] - 1)["rows"][0]["cells"]
    past = b.snapshot(now=t0 + 60 * minutes["b"] + 1)["rows"][0]["cells"]
    assert not just_in["b"]["over"] and past["b"]["over"]
    assert not past["a"]["over"]  # solved: never over
    assert not past["c"]["over"]  # not started: nothing to time


# -- the lesson's side: the checkers --

def _checker_of(letter: str):
    from labkit.workshop import checkers
    from labkit.workshop.exercises import record

    return getattr(checkers, record.exercise(letter).check_name)


def test_outside_a_room_a_checker_sends_nothing_and_starts_nothing(monkeypatch):
    from labkit.workshop import checkers

    monkeypatch.delenv(room_report.REPORT_ENV, raising=False)
    monkeypatch.setenv(room_report.TOKEN_ENV, "a-token-of-a-lab-without-a-room")

    def refuse(*args, **kwargs):
        raise AssertionError("a report outside a room")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    monkeypatch.setattr(socket, "socket", refuse)
    result = _checker_of("a")({})
    assert not result.solved and "not defined yet" in result.message
    assert "Hint 1/" in str(checkers.hint("a"))
    assert room_report.report("a", "solved") is False


def test_in_a_room_a_real_checker_reports_the_exercise_and_verdict_and_nothing_of_the_code(tmp_path, monkeypatch):
    from labkit.workshop import checkers

    heard: list[dict] = []
    path = str(tmp_path / "report.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(body) < length:
                    body += conn.recv(4096)
                heard.append({"head": head.decode(), "body": json.loads(body)})
                conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv(room_report.REPORT_ENV, path)
    monkeypatch.setenv(room_report.TOKEN_ENV, "the-learners-own-token")

    secret_marker = "a_name_only_my_code_has"

    def copy_idx_mapping(*args):
        a_name_only_my_code_has = 1  # noqa: F841
        raise ValueError("my own bug")

    from labkit.workshop.exercises.reveal import learner_names

    namespace = {learner_names("a")[0]: copy_idx_mapping}
    result = _checker_of("a")(namespace)
    assert not result.solved
    checkers.hint("b", 2)
    deadline = time.monotonic() + 10
    while len(heard) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.close()
    bodies = sorted((h["body"] for h in heard), key=lambda b: b["exercise"])
    assert bodies == [{"exercise": "a", "verdict": "tried"}, {"exercise": "b", "verdict": "hint", "hint": 2}]
    assert all("Authorization: token the-learners-own-token" in h["head"] for h in heard)
    assert not any(secret_marker in h["head"] + json.dumps(h["body"]) for h in heard)


# -- the page in Chromium --

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "room-view.png"
WRITE_SCREENSHOT_ENV = "LABKIT_WRITE_SCREENSHOTS"  # =1: the browser test writes the guide's screenshot


def _a_room_mid_session(names: list[str], now: float) -> dict:
    """A board as it may look 20 minutes into notebook 07: most on (a) or (b), one long on (b)."""
    ago = lambda minutes: now - 60 * minutes  # noqa: E731
    plan = [  # (exercise, tries, hint, solved, first verdict minutes ago)
        [("a", 1, 0, True, 18), ("b", 2, 0, False, 9)],
        [("a", 2, 1, True, 19), ("b", 5, 2, False, 17)],
        [("a", 1, 0, True, 15), ("b", 1, 0, True, 8), ("c", 1, 0, True, 2)],
        [("a", 3, 0, False, 12)],
        [],
        [("a", 1, 0, True, 16), ("b", 3, 1, False, 11)],
        [("a", 1, 0, True, 14), ("b", 2, 0, True, 4)],
        [("a", 4, 2, False, 13)],
    ]
    cells, last = {}, {}
    for name, row in zip(names, plan, strict=False):
        for exercise, tries, hint, solved, first in row:
            cells.setdefault(name, {})[exercise] = {
                "tries": tries, "hint": hint, "solved_at": ago(max(first - 5, 0.5)) if solved else 0.0,
                "first_at": ago(first), "last_at": ago(max(first - 6, 0.3))}
        if row:
            last[name] = max(c["last_at"] for c in cells[name].values())
    return {"cells": cells, "last": last}


def _chromium_or_skip():
    import room_browser

    missing = room_browser.missing_requirements()
    if missing:
        if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"the room view's browser test needs {', '.join(missing)}")
        pytest.skip(f"the room view's browser test needs {', '.join(missing)}")
    return room_browser


def _open_view(room_browser, playwright, service):
    """The view in Chromium as the instructor opens it: through the hub's OAuth, then a login cookie
    (what the page's script then reads the board with)."""
    chromium = room_browser.browser(playwright)
    context = chromium.new_context(viewport={"width": 1100, "height": 620})
    tab = context.new_page()
    violations: list[str] = []
    tab.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    tab.goto(f"http://127.0.0.1:{service['port']}{PREFIX}", timeout=60_000)
    tab.wait_for_selector("#board tbody tr", timeout=30_000)
    return chromium, tab, violations


def test_chromium_shows_the_view_change_as_a_learner_reports_without_a_reload(service):
    room_browser = _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium, tab, violations = _open_view(room_browser, playwright, service)
        try:
            cell = tab.locator(f'tr[data-learner="{ME}"] td[data-exercise="b"]')
            assert cell.get_attribute("data-state") == "none"
            tab.evaluate("window.__same_page = true")  # gone if the page reloads
            assert report(service, {"exercise": "b", "verdict": "tried"})[0] == 204
            tab.wait_for_selector(f'tr[data-learner="{ME}"] td[data-exercise="b"][data-state="tried"]',
                                  timeout=3000 * view.POLL_S)
            assert cell.inner_text().strip() == "1\u00d7"
            assert report(service, {"exercise": "b", "verdict": "solved"})[0] == 204
            tab.wait_for_selector(f'tr[data-learner="{ME}"] td[data-exercise="b"][data-state="solved"]',
                                  timeout=3000 * view.POLL_S)
            assert tab.evaluate("window.__same_page") is True
            other = tab.locator(f'tr[data-learner="{OTHER}"] td[data-exercise="b"]')
            assert other.get_attribute("data-state") == "none"
            assert violations == [], violations
        finally:
            chromium.close()


def test_the_screenshot_of_a_room_mid_session(tmp_path):
    """A room of eight learners 20 minutes into notebook 07, seeded through the board's store: the
    marks show where the agenda's minutes are past. Written into the guide with the flag."""
    room_browser = _chromium_or_skip()
    from PIL import Image, PngImagePlugin
    from playwright.sync_api import sync_playwright

    names = [f"labkit-learner{i:02d}" for i in range(1, 9)]
    for name in names:
        TOKENS.setdefault(f"tok-{name}", {"kind": "user", "name": name, "scopes": [view.REPORT_SCOPE]})
    seed = _a_room_mid_session(names, time.time())
    gen = start_service(tmp_path, names, seed, saved=tuple(names[:2]))
    service = next(gen)
    try:
        with sync_playwright() as playwright:
            chromium, tab, violations = _open_view(room_browser, playwright, service)
            try:
                over = tab.locator("td.cell.over")
                assert over.count() >= 2  # learner02 on (b) and learner08 on (a), past their minutes
                assert tab.locator(f'tr[data-learner="{names[1]}"] td[data-exercise="b"]').get_attribute(
                    "class") == "cell hint over"
                assert tab.locator(f'tr[data-learner="{names[2]}"] td[data-exercise="c"]').inner_text().strip() \
                    == "\u2713"
                assert violations == [], violations
                shot = tmp_path / "room-view.png"
                tab.screenshot(path=str(shot), full_page=True)
            finally:
                chromium.close()
    finally:
        gen.close()
    image = Image.open(shot)
    assert image.width >= 800
    if os.environ.get(WRITE_SCREENSHOT_ENV) == "1":
        info = PngImagePlugin.PngInfo()
        info.add_text("labkit-room-view", view.page_fingerprint())
        SCREENSHOT.parent.mkdir(exist_ok=True)
        image.save(SCREENSHOT, pnginfo=info, optimize=True)


def test_the_guides_screenshot_is_of_this_page(tmp_path):
    """docs/images/room-view.png is the browser's picture of the view as it is now: the page's
    fingerprint (its HTML, script and style) is written into the PNG when it is taken."""
    from PIL import Image

    assert SCREENSHOT.exists(), f"no {SCREENSHOT.name}: {WRITE_SCREENSHOT_ENV}=1 pytest {__file__} -k screenshot"
    image = Image.open(SCREENSHOT)
    assert image.format == "PNG" and image.width >= 800
    assert image.text.get("labkit-room-view") == view.page_fingerprint(), (
        f"the view changed since {SCREENSHOT.name} was taken: {WRITE_SCREENSHOT_ENV}=1 pytest {__file__} -k screenshot")
