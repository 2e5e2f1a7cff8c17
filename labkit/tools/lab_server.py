"""The kit's one change to the Jupyter server it starts: a browser that drops a kernel's websocket
while the server is still opening it leaves no traceback in the log.

Why: in jupyter_server 2.x (read in 2.21.1, ``jupyter_server/services/kernels/websocket.py``) a
kernel channel's handler waits, before it upgrades the connection, until the kernel answers its
first ``kernel_info`` request (seconds, the first time a kernel starts). A browser that closes the
socket meanwhile -- a reload, JupyterLab reconnecting as a kernel comes up, a tab restored with
several notebooks -- makes ``on_close`` set ``self.connection = None``; the handler then asks
``select_subprotocol``, which reads ``self.connection.kernel_ws_protocol``: ``AttributeError``, a
traceback in the server's log and ``500 GET /api/kernels/<id>/channels`` (jupyter-server issue
#1265). The socket is gone either way and the kernel is fine; only the log alarms a newcomer.

The patch answers those calls on a dropped connection quietly (no subprotocol, nothing to open or
disconnect) and leaves every live connection to jupyter_server's own code. It is a Jupyter server
extension, enabled where the kit starts or configures a server::

    jupyter lab --ServerApp.jpserver_extensions="{'labkit.tools.lab_server': True}"
"""

from __future__ import annotations

EXTENSION = "labkit.tools.lab_server"
CLI_FLAG = f"--ServerApp.jpserver_extensions={{'{EXTENSION}': True}}"
DROPPED_LINE = "a kernel websocket was closed by the browser before it opened (a reload): nothing to do"


def patch_kernel_websocket(handler_class=None) -> bool:
    """Guard the kernel websocket handler's three uses of its connection; True if it was patched now."""
    if handler_class is None:
        from jupyter_server.services.kernels.websocket import KernelWebsocketHandler as handler_class
    if getattr(handler_class, "_labkit_guarded", False):
        return False
    select_subprotocol, on_close, open_ = handler_class.select_subprotocol, handler_class.on_close, handler_class.open

    def guarded_select_subprotocol(self, subprotocols):
        if getattr(self, "connection", None) is None:  # the browser left during the handshake
            self.log.info(DROPPED_LINE)
            return None
        return select_subprotocol(self, subprotocols)

    def guarded_on_close(self):
        if getattr(self, "connection", None) is None:
            return None
        return on_close(self)

    async def guarded_open(self, *args, **kwargs):
        if getattr(self, "connection", None) is None:
            self.close()
            return None
        return await open_(self, *args, **kwargs)

    handler_class.select_subprotocol = guarded_select_subprotocol
    handler_class.on_close = guarded_on_close
    handler_class.open = guarded_open
    handler_class._labkit_guarded = True
    return True


def _jupyter_server_extension_points():
    return [{"module": EXTENSION}]


def _load_jupyter_server_extension(serverapp) -> None:
    if patch_kernel_websocket():
        serverapp.log.debug("labkit: kernel websockets dropped during their handshake are closed quietly")
