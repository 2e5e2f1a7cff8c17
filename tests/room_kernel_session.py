"""A kernel started as a learner's server starts it (ipc channels, in a folder of the test's), for the
room's kernel tests: what each cell printed, and the kernel's pid while it runs."""

from __future__ import annotations

import contextlib
import os
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


def kit_and_room_path() -> str:
    """A PYTHONPATH on which a kernel's command finds labkit_room and labkit where this test process
    finds them (an installation, or a copy of the checkout on PYTHONPATH, as on a GPU box), as the
    room's learner environment gives its kernels both."""
    import labkit
    import labkit_room

    here = [str(Path(module.__file__).resolve().parents[1]) for module in (labkit_room, labkit)]
    return os.pathsep.join(here + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


@contextlib.contextmanager
def room_kernel(folder: Path, env: dict | None = None):
    """The ``python3`` kernel spec on JUPYTER_PATH, started with `env` (this process's by default) and
    the kit on its path; ended as a server ends one (asked first, so that what it cleans up at its end
    is cleaned up)."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"))
    manager.start_kernel(env={**(os.environ if env is None else env), "PYTHONPATH": kit_and_room_path()})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        yield KernelSession(manager, client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
