"""What a learner's Jupyter server in a room sends, and what its own kernels may do to it: a
Jupyter server extension the room enables in every learner's server (never in ``make lab``).

Every learner's server answers on the hub's own address (``/user/<name>/``), so a page it serves
runs, for the browser, on the same origin as the hub and as every other learner. JupyterHub's
security overview asks two things of such a room, and this module holds the server's side of both:

* **No page of a learner's writing runs as script.** Every response that is not JupyterLab itself
  (files, exported notebooks, static and extension files, errors, the API) carries
  ``Content-Security-Policy: sandbox``: a learner's HTML opened by anyone, the learner included,
  renders without script and without the origin's cookies or storage. JupyterLab's own page
  (:data:`LAB_PAGE_POLICY`) keeps its scripts and origin, which it needs, but may not be framed
  and may not open windows, so it cannot reach into a page of the hub. (The hub's pages forbid
  framing too and cut off any window that opens them; :mod:`labkit_room.jupyterhub_config`.)
  Learner-writable places the server would serve as JupyterLab's own code, the extension and
  configuration folders of the home, are off (JupyterHub's ``Spawner.disable_user_config``).
* **The learner cannot change their server.** Its code, configuration and environment are the
  room's; it runs with the learner's id, so nothing stops a learner's kernel from signalling it,
  but the server makes itself non-dumpable here, so no process of the learner may trace it, read
  its memory or its environment, and the kernels run on a network of their own
  (:mod:`labkit_room.kernel`), so none can listen on the server's port in its place.

Enabled with ``--ServerApp.jpserver_extensions={'labkit_room.learner_server': True}`` in the
room's spawner arguments.
"""

from __future__ import annotations

EXTENSION = "labkit_room.learner_server"

# A sandbox with no allow-*: no script, an origin of its own (so no cookie, storage or DOM of the
# hub's), no form, no window. Framing it is harmless then, and JupyterLab frames some files (PDFs).
SANDBOXED_POLICY = "frame-ancestors 'self'; sandbox"
# JupyterLab needs its scripts and its origin (its API calls carry the server's cookie and XSRF
# token); it needs no popup (JupyterHub's overview: popups reach other pages of the origin) and no
# framing. The cost, said in the instructor guide: "open in a new browser tab" and the menu's
# link to the hub's control panel do nothing; the learner types /hub/home instead.
LAB_PAGE_POLICY = ("frame-ancestors 'none'; "
                   "sandbox allow-scripts allow-same-origin allow-forms allow-modals allow-downloads")

_PR_SET_DUMPABLE = 4


def policy_for(handler) -> str:
    """The Content-Security-Policy of one response: JupyterLab's page, or the sandbox."""
    try:
        from jupyterlab_server.handlers import LabHandler
    except ImportError:  # a server without JupyterLab's web app serves no page that needs script
        return SANDBOXED_POLICY
    return LAB_PAGE_POLICY if isinstance(handler, LabHandler) else SANDBOXED_POLICY


def sandbox_every_response(handler_class=None) -> bool:
    """Make every handler of the server set :func:`policy_for`'s policy; True if patched now."""
    if handler_class is None:
        from jupyter_server.base.handlers import AuthenticatedHandler as handler_class
    if getattr(handler_class, "_labkit_sandboxed", False):
        return False
    original = handler_class.set_default_headers

    def set_default_headers(self):
        original(self)
        try:
            self.set_header("Content-Security-Policy", policy_for(self))
        except Exception:  # noqa: BLE001 (tornado refuses headers on a websocket; it serves no page)
            pass

    handler_class.set_default_headers = set_default_headers
    handler_class._labkit_sandboxed = True
    return True


def undumpable() -> bool:
    """Make this process non-dumpable: only root may then trace it or read its memory and environment
    (a process's own uid otherwise may). Kernels it starts are dumpable again (execve resets it)."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def _jupyter_server_extension_points():
    return [{"module": EXTENSION}]


def _load_jupyter_server_extension(serverapp) -> None:
    sandbox_every_response()
    if not undumpable():
        serverapp.log.warning("labkit: could not make this server non-dumpable")
    serverapp.log.info("labkit: every response but JupyterLab's page is sandboxed; this server is not traceable")
