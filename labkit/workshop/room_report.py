"""A checker's verdict, told to the room's instructor view: in a workshop room only, never outside one.

In a room (``python -m labkit hub start``) each learner's kernel finds two things in its environment:
where the room's view listens (:data:`REPORT_ENV`, a socket the room made) and the learner's own
token of the hub (``JUPYTERHUB_API_TOKEN``). After a checker, a hint or the capstone answers, one
short report goes there: the exercise, what happened (:data:`VERDICTS`) and, for a hint, its number.
Nothing else: no code, no output, no name (the room takes the learner's name from the token).

Outside a room neither is set and :func:`report` returns at once: no socket, no thread, nothing sent.
In a room the report goes from a thread of its own with a short timeout; whatever goes wrong (the
view is down, the socket is gone) is dropped silently: the learner's cell never waits on it or
sees it.
"""

from __future__ import annotations

import json
import os

# Set on the learners' servers by the room (labkit_room.jupyterhub_config): the view's socket.
REPORT_ENV = "LABKIT_ROOM_REPORT"
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
# What a report says happened on an exercise: a check that did not pass, a hint read, a check that passed.
VERDICTS = ("tried", "hint", "solved")
# What the room's exercises are called in a report: the records' letters, and the capstone.
CAPSTONE = "capstone"
TIMEOUT_S = 2.0


def report(exercise: str, verdict: str, hint: int | None = None) -> bool:
    """Tell the room's view that `verdict` happened on `exercise` (in a room; outside one, nothing).
    True when a report was handed to a background thread."""
    where, token = os.environ.get(REPORT_ENV), os.environ.get(TOKEN_ENV)
    if not where or not token or verdict not in VERDICTS:
        return False
    import threading

    body = {"exercise": str(exercise), "verdict": verdict, **({"hint": int(hint)} if hint is not None else {})}
    threading.Thread(target=_send, args=(where, token, json.dumps(body).encode()), daemon=True,
                     name="labkit-room-report").start()
    return True


def _send(where: str, token: str, body: bytes) -> int | None:
    """POST the report over the room's socket; the HTTP status, or None when it could not be sent."""
    import socket

    request = (f"POST /report HTTP/1.1\r\nHost: labkit-room\r\nAuthorization: token {token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
               ).encode() + body
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT_S)
            sock.connect(where)
            sock.sendall(request)
            answer = sock.recv(64)
        return int(answer.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return None
