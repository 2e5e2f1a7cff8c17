"""The room's authenticator: each learner and the instructor log in with the password generated
for them, checked against a root-only table of salted hashes.

JupyterHub's DummyAuthenticator would let anyone log in as anyone (one shared password, or none),
and PAM would need a system password per learner; a room needs neither. The table is written by
``python -m labkit hub start`` (:mod:`labkit.classroom.control`), mode 0600, and holds no password in
the clear; failed logins are logged with the user name only.
"""

from __future__ import annotations

import json
from pathlib import Path

from jupyterhub.auth import Authenticator
from traitlets import Unicode

from labkit.classroom.accounts import check_password


class RoomAuthenticator(Authenticator):
    """Log in with a name and password from the room's table (``{name: {salt, scrypt}}``)."""

    table_file = Unicode(help="JSON file of the room's password hashes (root-only)").tag(config=True)

    def _table(self) -> dict:
        return json.loads(Path(self.table_file).read_text())

    async def authenticate(self, handler, data):
        name = (data or {}).get("username", "").strip()
        password = (data or {}).get("password", "")
        entry = self._table().get(name)
        if entry is None or not password or not check_password(password, entry):
            self.log.warning("failed login for %r", name)
            return None
        return name
