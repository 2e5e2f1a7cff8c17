"""The room's authenticator: each learner and the instructor log in with the password generated
for them, checked against a root-only table of salted hashes.

JupyterHub's DummyAuthenticator would let anyone log in as anyone (one shared password, or none),
and PAM would need a system password per learner; a room needs neither. The table is written by
``python -m labkit hub start`` (:mod:`labkit_room.control`), or for a room on Kubernetes by
``python -m labkit hub logins`` into a Secret, mode 0600, and holds no password in the clear;
failed logins are logged with the user name only.

This file imports nothing of the kit, on purpose: the Kubernetes values mount this very file into
the chart's hub image, which holds JupyterHub and not the kit (:func:`labkit_room.room.z2jh_values`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path

from jupyterhub.auth import Authenticator
from traitlets import Unicode

_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


def new_password() -> str:
    """A password for one learner: 12 characters a person can type from a slip of paper."""
    alphabet = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i
    return "-".join("".join(secrets.choice(alphabet) for _ in range(4)) for _ in range(3))


def hash_password(password: str, salt: bytes | None = None) -> dict:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    return {"salt": salt.hex(), "scrypt": digest.hex()}


def check_password(password: str, entry: dict) -> bool:
    digest = hashlib.scrypt(password.encode(), salt=bytes.fromhex(entry["salt"]), **_SCRYPT)
    return hmac.compare_digest(digest.hex(), entry["scrypt"])


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
