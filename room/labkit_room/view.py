"""The instructor's view of the room: who is stuck, on which exercise, right now; a hub service.

One row per learner, one column per exercise (the records' exercises and the capstone), each cell
not started / tried N times / hint used / solved, the time since the learner's last verdict, and a
mark where a learner has been on one exercise longer than the agendas give it (its record's minutes,
counted from their first verdict on it). The page polls a small JSON board every few seconds. It
shows no code, no answer and nothing of a notebook: the reports carry none
(:mod:`labkit.workshop.room_report`).

Two doors, one each way:

* **Reports in**, on a unix socket the learners' kernels can reach (kernels have a network of their
  own, :mod:`labkit_room.kernel`; a socket in the file system is the way out). ``POST /report``
  only. The learner is whoever the hub says owns the token in ``Authorization`` (the kernel's
  ``JUPYTERHUB_API_TOKEN``), if that token carries :data:`REPORT_SCOPE` and its owner is a learner of
  this room; and the process at the other end of the socket must be that same learner's (its
  uid, from the kernel). A body that names anyone, or anything but exercise, verdict and hint,
  is refused. Nothing can be read through this door.
* **The view out**, through the hub's proxy at ``/services/room-view/``, behind the hub's own
  login: only a holder of ``access:services!service=room-view`` (the instructor's role here) gets
  the page, the board, the notebooks collected from a learner (a zip, as a download) and the room's
  saved copies (what a room's close keeps, beside its state folder).

The page is on the hub's origin: it renders nothing as HTML (its script builds the table with
text nodes), runs only its own script, from this service's path, under a strict
Content-Security-Policy, and every download is an attachment under ``sandbox`` and ``nosniff``.

The hub starts it (:func:`service`, from :mod:`labkit_room.jupyterhub_config`) as root, the one
user who can read the learners' homes (by descriptor, :mod:`labkit_room.learner_paths`) and the
saved copies. Its settings arrive in :data:`CONFIG_ENV` (no secret: names, paths, minutes); its
token, as every managed service's, in its environment. It imports none of the kit but
:mod:`labkit_room.learner_paths` (the kit imports torch).
"""

from __future__ import annotations

import io
import json
import os
import pwd
import re
import socket
import struct
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

SERVICE_NAME = "room-view"
# The one scope a learner's token needs to report, and all it grants: JupyterHub defines it for the room.
REPORT_SCOPE = "custom:labkit-room:report"
CUSTOM_SCOPES = {REPORT_SCOPE: {"description": "report one's own checker verdicts to the instructor's room view"}}
# What every learner's server token carries: JupyterHub's own (the "server" role's), and the report scope.
SERVER_TOKEN_SCOPES = ["users:activity!user", "access:servers!server", REPORT_SCOPE]
VIEW_SCOPE = f"access:services!service={SERVICE_NAME}"
CONFIG_ENV = "LABKIT_ROOM_VIEW"
# The board the page polls: often enough to see a room change between two sentences, cheap for 30 rows.
POLL_S = 3
# A learner's reports per second at most: a checker run takes longer than this allows between two; a
# loop that sends more is refused (429) rather than let one learner keep the view busy for everyone.
REPORTS_PER_S = 5
# A report is a few dozen bytes.
MAX_REPORT_BYTES = 4096
# The most of a learner's folder one collection zips (their notebooks are a few MB).
COLLECT_LIMIT_BYTES = 256 * 2**20
_STATIC = Path(__file__).with_name("view_static")
_STATIC_TYPES = {"view.js": "text/javascript; charset=utf-8", "view.css": "text/css; charset=utf-8"}
# A user name as the box allows it (the room's are labkit-learnerNN); never "." or "..".
_NAME_PATTERN = r"[a-z_][a-z0-9_.-]{0,31}"
_NAME = re.compile(rf"^{_NAME_PATTERN}$")
_ROOM_ID = re.compile(r"^[0-9a-f]{4,32}$")
# Downloads: never rendered on the hub's origin, whatever a browser would guess.
_DOWNLOAD_HEADERS = {"Content-Type": "application/zip", "X-Content-Type-Options": "nosniff",
                     "Content-Security-Policy": "sandbox", "Cache-Control": "no-store"}


def socket_path(room_id: str) -> Path:
    """Where the reports' socket is: a folder of root's under /run, outside the kit's checkout (a
    socket any learner may connect to is a file they may write, and nothing of the kit is theirs to
    write), which every learner's kernel sees; the room's close removes it."""
    return Path("/run") / f"labkit-room-{room_id}" / "report.sock"


def roles(learners: list[str], instructor: str) -> list[dict]:
    """The hub roles the view needs: the instructor reaches the view; each learner may report."""
    return [{"name": "room-view", "description": "sees the room's view: verdicts, collections, saved copies",
             "scopes": [VIEW_SCOPE], "users": [instructor]},
            {"name": "learner-report", "description": "reports one's own checker verdicts to the room's view",
             "scopes": [REPORT_SCOPE], "users": list(learners)}]


def service(python: str, port: int, config: dict) -> dict:
    """The hub's entry for the view (a managed service, root like the hub; its token by environment)."""
    return {"name": SERVICE_NAME, "url": f"http://127.0.0.1:{port}", "command": [python, "-m", "labkit_room.view"],
            "oauth_no_confirm": True, "environment": {CONFIG_ENV: json.dumps(config)}}


def exercises() -> list[dict]:
    """The view's columns, in the three-hour agenda's order: every exercise of the records, and the
    capstone, each with the minutes the agendas give it (the limit past which a cell is marked).
    Read from the kit, so only the hub calls it (importing the kit imports torch)."""
    from labkit.workshop.editions import agenda
    from labkit.workshop.exercises import record

    minutes = agenda.exercise_minutes()
    order = [x for activity in agenda.THREE_HOURS for x in activity.exercises]
    titles = {x.letter: x.title for x in record.EXERCISES}
    notebooks = {x.letter: x.agenda_notebook for x in record.EXERCISES}
    capstone = next(a.notebook for a in agenda.THREE_HOURS if a.capstone)
    return [{"id": x, "title": titles.get(x, "your fix in the engine"), "notebook": notebooks.get(x, capstone),
             "minutes": minutes[x]} for x in order]


def config(learners: list[str], state_dir: Path, socket_path: str, work_folder: Path, home_root: Path,
           learner_folder: str) -> dict:
    """What the view is started with (:data:`CONFIG_ENV`): names, paths and minutes, no secret."""
    from labkit.workshop.room_report import VERDICTS

    return {"learners": list(learners), "exercises": exercises(), "verdicts": list(VERDICTS),
            "socket": socket_path, "store": str(Path(state_dir) / "room-view.json"),
            "work_folder": str(work_folder), "home_root": str(home_root), "learner_folder": learner_folder}


# ---------------------------------------------------------------- the board


@dataclass
class Cell:
    tries: int = 0
    hint: int = 0          # the highest hint number read
    solved_at: float = 0.0
    first_at: float = 0.0  # the first verdict on it: when the learner was first seen on the exercise
    last_at: float = 0.0

    def state(self) -> str:
        return "solved" if self.solved_at else "hint" if self.hint else "tried" if self.tries else "none"


@dataclass
class Board:
    """Every learner's cells, in memory and in a root-only file (a restarted service loses nothing)."""

    learners: list[str]
    exercises: list[dict]  # {"id", "title", "minutes"}, in the agendas' order
    store: Path | None = None
    cells: dict = field(default_factory=dict)  # learner -> exercise -> Cell
    last: dict = field(default_factory=dict)  # learner -> time of their last verdict

    def __post_init__(self):
        if self.store is not None and self.store.exists():
            try:
                saved = json.loads(self.store.read_text())
                self.cells = {n: {x: Cell(**c) for x, c in row.items()} for n, row in saved["cells"].items()}
                self.last = dict(saved["last"])
            except (OSError, ValueError, KeyError, TypeError):
                self.cells, self.last = {}, {}

    def ids(self) -> list[str]:
        return [x["id"] for x in self.exercises]

    def apply(self, learner: str, exercise: str, verdict: str, hint: int | None = None,
              now: float | None = None) -> None:
        now = time.time() if now is None else now
        cell = self.cells.setdefault(learner, {}).setdefault(exercise, Cell())
        cell.first_at = cell.first_at or now
        cell.last_at = now
        if verdict == "tried":
            cell.tries += 1
        elif verdict == "hint":
            cell.hint = max(cell.hint, hint or 1)
        elif verdict == "solved":
            cell.tries += 1
            cell.solved_at = cell.solved_at or now
        self.last[learner] = now
        self._save()

    def _save(self) -> None:
        if self.store is None:
            return
        tmp = self.store.with_name(f".{self.store.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"cells": {n: {x: vars(c) for x, c in row.items()} for n, row in self.cells.items()},
                       "last": self.last}, fh)
        os.replace(tmp, self.store)

    def snapshot(self, now: float | None = None) -> dict:
        """What the page shows: per learner, each cell's state, tries, hint, and whether it is over time."""
        now = time.time() if now is None else now
        minutes = {x["id"]: x["minutes"] for x in self.exercises}
        rows = []
        for name in self.learners:
            row = self.cells.get(name, {})
            cells = {}
            for exercise in self.ids():
                cell = row.get(exercise, Cell())
                on_for = (now - cell.first_at) if cell.first_at and not cell.solved_at else 0.0
                cells[exercise] = {"state": cell.state(), "tries": cell.tries, "hint": cell.hint,
                                   "over": bool(on_for > 60 * minutes[exercise]), "on_for_s": round(on_for)}
            last = self.last.get(name)
            rows.append({"learner": name, "since_s": None if last is None else round(now - last), "cells": cells})
        return {"exercises": self.exercises, "rows": rows, "poll_s": POLL_S}


# ---------------------------------------------------------------- reading a report


class Refused(Exception):
    """A report or request refused: (HTTP status, one line)."""

    def __init__(self, status: int, line: str):
        super().__init__(line)
        self.status = status


def read_report(body: bytes, exercises: list[str], verdicts: list[str]) -> tuple[str, str, int | None]:
    """(exercise, verdict, hint) of a report's body, or :class:`Refused` with the one line why."""
    try:
        data = json.loads(body or b"")
    except ValueError:
        raise Refused(400, "a report is a JSON object: exercise, verdict (and hint)") from None
    if not isinstance(data, dict):
        raise Refused(400, "a report is a JSON object: exercise, verdict (and hint)")
    extra = sorted(set(data) - {"exercise", "verdict", "hint"})
    if extra:
        raise Refused(400, f"a report says exercise, verdict and hint only, not {', '.join(map(str, extra))[:80]}: "
                           "the room takes your name from your token")
    exercise, verdict, hint = data.get("exercise"), data.get("verdict"), data.get("hint")
    if exercise not in exercises:
        raise Refused(400, f"no exercise {str(exercise)[:20]!r} in this room's view: one of {', '.join(exercises)}")
    if verdict not in verdicts:
        raise Refused(400, f"a verdict is one of {', '.join(verdicts)}")
    if hint is not None and (verdict != "hint" or not isinstance(hint, int) or isinstance(hint, bool)
                             or not 1 <= hint <= 9):
        raise Refused(400, "a hint number (1-9) goes with the verdict 'hint' only")
    return exercise, verdict, hint


def peer_uid(sock) -> int | None:
    """The uid of the process at the other end of a unix socket (the kernel's, from the OS)."""
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                               struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return uid


def uid_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


# ---------------------------------------------------------------- the learners' folders


def zip_folder(folder: Path) -> bytes:
    """Every file under `folder` (root's own copy), as a zip, paths relative to it."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for where, folders, files in os.walk(folder, followlinks=False):
            folders.sort()
            for name in sorted(files):
                path = Path(where) / name
                if path.is_file() and not path.is_symlink():
                    zf.write(path, path.relative_to(folder).as_posix())
    return out.getvalue()


def collect(name: str, config: dict) -> tuple[bytes, list[str]]:
    """The learner's folder now, as a zip (read by descriptor, no link followed), and what was left out."""
    from labkit_room import learner_paths

    entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    if home != Path(config["home_root"]) / name:
        raise Refused(404, f"{name} has no home of the room's")
    with tempfile.TemporaryDirectory(prefix="room-view-") as tmp:
        dest = Path(tmp) / config["learner_folder"]
        copied = learner_paths.copy_out(home, config["learner_folder"], entry.pw_uid, dest,
                                        limit_bytes=COLLECT_LIMIT_BYTES)
        return zip_folder(dest), list(copied.left_out)


def saved_copies(work_folder: Path) -> list[dict]:
    """What the rooms closed here kept: {room, learner, files} per learner, newest room first."""
    found = []
    try:
        rooms = sorted((p for p in work_folder.iterdir() if p.is_dir() and _ROOM_ID.match(p.name)),
                       key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    for room_dir in rooms:
        for learner in sorted(p for p in room_dir.iterdir() if p.is_dir() and _NAME.match(p.name)):
            files = sum(1 for p in learner.rglob("*") if p.is_file() and not p.is_symlink())
            found.append({"room": room_dir.name, "learner": learner.name, "files": files,
                          "closed": time.strftime("%Y-%m-%d %H:%M", time.localtime(room_dir.stat().st_mtime))})
    return found


# ---------------------------------------------------------------- the web side


def page(prefix: str, xsrf: str = "") -> str:
    """The view's page: nothing of a learner's in it (its script fills the table from the board).
    `xsrf`: the token the script's requests carry (JupyterHub takes a login cookie on a script's
    request only with it)."""
    from html import escape

    p = escape(prefix, quote=True)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Room view</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{p}static/view.css">
<script src="{p}static/view.js" defer></script></head>
<body data-prefix="{p}" data-xsrf="{escape(xsrf, quote=True)}">
<header><h1>Room view</h1><p id="status">loading the room...</p></header>
<p class="legend"><span class="cell none">&middot;</span> not started
<span class="cell tried">2&times;</span> tried, not solved
<span class="cell hint">H2</span> hint 2 read
<span class="cell solved">&#10003;</span> solved
<span class="cell tried over">!</span> on it longer than the agenda gives it</p>
<table id="board"><thead></thead><tbody></tbody></table>
<h2>Saved copies</h2>
<p class="note">What a room closed on this box kept of each learner's folder: download one as a zip.</p>
<ul id="saved"></ul>
</body></html>
"""


def page_fingerprint() -> str:
    """What the page is made of (its HTML, script and style), hashed: the guide's screenshot carries
    it, and a test fails when the page changed after the screenshot was taken."""
    import hashlib

    digest = hashlib.sha256(page(f"/services/{SERVICE_NAME}/").encode())
    for name in sorted(_STATIC_TYPES):
        digest.update((_STATIC / name).read_bytes())
    return digest.hexdigest()[:16]


def page_policy(host: str, prefix: str) -> str:
    """The page's Content-Security-Policy: script and style from this service's static path alone,
    requests to its own board, no frame, no form, no base."""
    static = f"{host}{prefix}static/"
    return (f"default-src 'none'; script-src {static}; style-src {static}; connect-src 'self'; img-src 'none'; "
            "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def make_apps(config: dict, board: Board):
    """(the view's tornado app, the reports' app)."""
    from jupyterhub.services.auth import HubAuth, HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import web

    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{SERVICE_NAME}/")
    learners = set(config["learners"])
    exercise_ids = board.ids()
    recent: dict[str, list[float]] = {}  # learner -> times of their reports in the last second
    hub_auth = HubAuth(api_url=os.environ["JUPYTERHUB_API_URL"], api_token=os.environ["JUPYTERHUB_API_TOKEN"],
                       cache_max_age=60)

    class OneLine(web.RequestHandler):
        def write_error(self, status_code, **kwargs):
            exc = kwargs.get("exc_info", (None, None))[1]
            line = str(exc) if isinstance(exc, Refused) else (getattr(exc, "log_message", None) or self._reason)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.set_header("X-Content-Type-Options", "nosniff")
            self.set_header("Content-Security-Policy", "sandbox")
            self.finish(f"{status_code}: {line}\n")

        def refuse(self, err: Refused):
            self.send_error(err.status, exc_info=(Refused, err, None))

    class Report(OneLine):
        async def post(self):
            match = re.fullmatch(r"(?:token|bearer)\s+(\S+)", self.request.headers.get("Authorization", ""),
                                 re.IGNORECASE)
            try:
                if not match:
                    raise Refused(403, "a report needs your own token (Authorization: token ...)")
                user = await hub_auth.user_for_token(match.group(1), sync=False)
                if not user or user.get("kind", "user") != "user":
                    raise Refused(403, "the hub knows no user for this token")
                name = user.get("name")
                if name not in learners or REPORT_SCOPE not in (user.get("scopes") or []):
                    raise Refused(403, f"{name} is no learner of this room: nothing to report")
                peer = uid_name(peer_uid(self.request.connection.stream.socket))
                if peer != name:
                    raise Refused(403, f"this report comes from {peer or 'an unknown user'}'s process, not {name}'s")
                exercise, verdict, hint = read_report(self.request.body, exercise_ids, config["verdicts"])
                now = time.monotonic()
                times = recent[name] = [t for t in recent.get(name, []) if now - t < 1.0]
                if len(times) >= REPORTS_PER_S:
                    raise Refused(429, f"more than {REPORTS_PER_S} reports a second: this one is dropped")
                times.append(now)
            except Refused as err:
                self.refuse(err)
                return
            board.apply(name, exercise, verdict, hint)
            self.set_status(204)

    class Viewer(HubOAuthenticated, OneLine):
        hub_scopes = {VIEW_SCOPE}

        def set_default_headers(self):
            self.set_header("X-Content-Type-Options", "nosniff")
            self.set_header("Cache-Control", "no-store")
            self.set_header("Referrer-Policy", "no-referrer")
            self.set_header("X-Frame-Options", "DENY")
            self.set_header("Content-Security-Policy", "sandbox")

    class Page(Viewer):
        @web.authenticated
        def get(self):
            self.set_header("Content-Security-Policy", page_policy(self.request.host, prefix))
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(page(prefix, self.xsrf_token.decode()))

    class Static(Viewer):
        @web.authenticated
        def get(self, name):
            self.set_header("Content-Type", _STATIC_TYPES[name])
            self.finish((_STATIC / name).read_bytes())

    class BoardJSON(Viewer):
        @web.authenticated
        def get(self):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({**board.snapshot(), "saved": saved_copies(Path(config["work_folder"]))}))

    def attachment(handler, filename: str, data: bytes):
        for key, value in _DOWNLOAD_HEADERS.items():
            handler.set_header(key, value)
        handler.set_header("Content-Disposition", f'attachment; filename="{filename}"')
        handler.finish(data)

    class Collect(Viewer):
        @web.authenticated
        def get(self, name):
            try:
                if name not in learners:
                    raise Refused(404, "no such learner in this room")
                data, _left_out = collect(name, config)
            except Refused as err:
                return self.refuse(err)
            except (OSError, KeyError) as err:
                why = getattr(err, "strerror", None) or err
                return self.refuse(Refused(409, f"{name}'s folder could not be read: {why}"))
            attachment(self, f"{name}-{time.strftime('%H%M')}.zip", data)

    class Saved(Viewer):
        @web.authenticated
        def get(self, room_id, name):
            folder = Path(config["work_folder"]) / room_id / name
            if not folder.is_dir() or folder.is_symlink():
                return self.refuse(Refused(404, "no saved copy of that learner in that room"))
            attachment(self, f"{name}-{room_id}.zip", zip_folder(folder))

    settings = {"cookie_secret": os.urandom(32), "xsrf_cookies": False}
    view = web.Application([
        (prefix, Page),
        (url_path_join(prefix, "static/(view\\.js|view\\.css)"), Static),
        (url_path_join(prefix, "api/board"), BoardJSON),
        (url_path_join(prefix, f"collect/({_NAME_PATTERN})\\.zip"), Collect),
        (url_path_join(prefix, f"saved/([0-9a-f]{{4,32}})/({_NAME_PATTERN})\\.zip"), Saved),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], **settings)
    # One HubOAuth for every handler of the view (and its callback), from the service's environment.
    oauth = HubOAuth.instance()
    Viewer.hub_auth = oauth
    HubOAuthCallbackHandler.hub_auth = oauth
    reports = web.Application([(r"/report", Report)])
    return view, reports


def open_socket(path: Path):
    """The reports' socket: in a folder of root's that no one else may write to, any user may connect
    (each report proves its learner by token and uid)."""
    from tornado.netutil import bind_unix_socket

    folder = path.parent
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022 or not os.path.isdir(folder) or os.path.islink(folder):
        raise SystemExit(f"room-view: {folder} is not a folder of this user's alone: no report socket there")
    os.chmod(folder, 0o755)
    return bind_unix_socket(str(path), mode=0o666)


def main() -> int:
    import asyncio

    from tornado.httpserver import HTTPServer

    try:
        config = json.loads(os.environ[CONFIG_ENV])
    except (KeyError, ValueError):
        print(f"room-view: no configuration in ${CONFIG_ENV}", file=sys.stderr)
        return 2
    board = Board(config["learners"], config["exercises"],
                  Path(config["store"]) if config.get("store") else None)

    async def serve():
        view, reports = make_apps(config, board)
        from urllib.parse import urlsplit

        url = urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
        view.listen(url.port, url.hostname)
        HTTPServer(reports, max_body_size=MAX_REPORT_BYTES).add_socket(open_socket(Path(config["socket"])))
        print(f"room-view: the view on {url.hostname}:{url.port}, reports on {config['socket']}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
