"""A kernel started as a learner's server starts it (ipc channels, in a folder of the test's), for the
room's kernel tests: what each cell printed, and the kernel's pid while it runs."""

from __future__ import annotations

import contextlib
from pathlib import Path


class KernelSession:
    def __init__(self, manager, client):
        self.manager, self.client = manager, client
        self.printed: list[str] = []

    @property
    def pid(self) -> int:
        return self.manager.provisioner.process.pid

    def run(self, code: str, timeout: float = 60) -> dict:
        """Run `code`; its reply, its printed text appended to :attr:`printed`."""
        return self.client.execute_interactive(
            code, output_hook=lambda m: self.printed.append(m["content"].get("text", "")), timeout=timeout)


@contextlib.contextmanager
def room_kernel(folder: Path, env: dict | None = None):
    """The ``python3`` kernel spec on JUPYTER_PATH, started with `env`; ended as a server ends one (asked
    first, so that what it cleans up at its end is cleaned up)."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"))
    manager.start_kernel(**({"env": env} if env is not None else {}))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        yield KernelSession(manager, client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
