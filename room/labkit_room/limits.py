"""The limits a shared server puts on a learner's kernel, applied when the kernel starts.

On one server for a room (``python -m labkit hub``, :mod:`labkit_room`) every learner's kernel
runs beside 29 others, so the hub hands each learner's server its limits through its
environment, and the kit reads them here:

    LABKIT_GPU_MEMORY_FRACTION  this kernel's share of the GPU's memory, a number in (0, 1]:
                                 applied with torch.cuda.set_per_process_memory_fraction, so the
                                 caching allocator refuses to grow past it (an OutOfMemoryError
                                 in this kernel, not in a neighbour's); the kernel holds itself
                                 to it, so it binds only a learner who leaves it be
    MEM_LIMIT                    the learner's memory in bytes, all their processes together
                                 (JupyterHub's own variable for Spawner.mem_limit): the cap of
                                 their control group, where the box has one (labkit_room.groups)
    LABKIT_PROCESS_MEMORY_LIMIT  each process's data limit in bytes (RLIMIT_DATA), under MEM_LIMIT:
                                 one large allocation past it is a MemoryError with a line of
                                 explanation, before the group's cap ends a process

The room's kernels start through :mod:`labkit_room.kernel`, which calls :func:`apply` (the
GPU share), adds :func:`describe` to ``labkit.describe()`` and installs :func:`install_messages`
(one line under a memory error's traceback, saying which limit was hit and that the room is
fine). Nothing else imports this module: outside a room no kernel starts that way, and
``import labkit`` knows nothing of rooms.
"""

from __future__ import annotations

import os

GPU_SHARE_ENV = "LABKIT_GPU_MEMORY_FRACTION"
MEMORY_LIMIT_ENV = "MEM_LIMIT"
PROCESS_MEMORY_ENV = "LABKIT_PROCESS_MEMORY_LIMIT"

_applied: dict = {}


def gpu_share() -> float | None:
    """The GPU memory share this process was given (None: no share set). Bad values are an error
    the learner sees at import, not a silent full GPU."""
    text = os.environ.get(GPU_SHARE_ENV, "").strip()
    if not text:
        return None
    try:
        share = float(text)
    except ValueError:
        share = float("nan")
    if not 0 < share <= 1:
        raise ValueError(f"{GPU_SHARE_ENV}={text!r}: the GPU memory share must be a number in (0, 1]")
    return share


def _bytes_from(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def memory_limit() -> int | None:
    """The learner's memory limit in bytes, all their processes together (None: none set)."""
    return _bytes_from(MEMORY_LIMIT_ENV)


def process_memory_limit() -> int | None:
    """Each process's data limit in bytes, where the hub set one (None: none)."""
    return _bytes_from(PROCESS_MEMORY_ENV)


def note_network(line: str) -> None:
    """Whose network this kernel runs on, for :func:`describe` (labkit_room.kernel says it)."""
    _applied["network"] = line


def apply(torch_module=None) -> None:
    """Hold this process to its GPU share, once (torch is imported only where a share is set)."""
    if _applied.get("done"):
        return
    _applied["done"] = True
    share = gpu_share()
    if share is None:
        return
    if torch_module is None:
        import torch as torch_module
    if torch_module.cuda.is_available():
        for device in range(torch_module.cuda.device_count()):
            torch_module.cuda.set_per_process_memory_fraction(share, device)
        _applied["gpu_share"] = share


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def describe() -> dict:
    """The entries ``labkit.describe()`` adds: what this kernel is held to, and by whom."""
    share = gpu_share()
    limit = memory_limit()
    if share is not None and _applied.get("gpu_share") == share:
        gpu = f"{share:.3f} of each GPU's memory ({GPU_SHARE_ENV}, applied)"
    elif not _has_cuda():
        gpu = "no GPU" + (f" ({GPU_SHARE_ENV}={share:.3f} holds nothing here)" if share is not None else "")
    elif share is None:
        gpu = "whole GPU (no share set)"
    else:
        gpu = f"{share:.3f} ({GPU_SHARE_ENV}; not applied in this process yet)"
    per_process = process_memory_limit()
    if limit and per_process:
        memory = (f"{_gib(limit)} for all of this learner's processes ({MEMORY_LIMIT_ENV}), "
                  f"{_gib(per_process)} per process")
    elif limit:
        memory = f"{_gib(limit)} ({MEMORY_LIMIT_ENV})"
    else:
        memory = "none set"
    described = {"gpu_memory_share": gpu, "memory_limit": memory}
    if "network" in _applied:
        described["kernel_network"] = _applied["network"]
    return described


def limit_message(error: BaseException) -> str | None:
    """The line a learner reads under a memory error in a kernel on a shared server (None: the
    error is not a memory error, or no limit is set)."""
    text = str(error)
    gpu_oom = type(error).__name__ == "OutOfMemoryError" or "CUDA out of memory" in text
    if gpu_oom and gpu_share() is not None:
        return (f"labkit: this kernel is held to {gpu_share():.3f} of the GPU's memory, its share on this "
                "shared server. Free tensors you no longer need (del x; torch.cuda.empty_cache()) or restart "
                "the kernel; the other learners' kernels are not affected.")
    per_process = process_memory_limit() or memory_limit()
    if isinstance(error, MemoryError) and per_process is not None:
        return (f"labkit: this server's memory limit is {_gib(per_process)} per process (set by the "
                "instructor's hub), and this allocation went past it. Free large objects or restart the "
                "kernel; the other learners' servers are not affected.")
    return None


def install_messages(shell=None) -> bool:
    """In an IPython kernel with a limit set, add :func:`limit_message` under the traceback of a
    memory error. Returns whether it was installed."""
    if gpu_share() is None and memory_limit() is None and process_memory_limit() is None:
        return False
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False

    def _handler(self, etype, value, tb, tb_offset=None):
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        message = limit_message(value)
        if message:
            print(message)

    # RuntimeError: torch.OutOfMemoryError is one, and torch need not be imported to name it.
    shell.set_custom_exc((MemoryError, RuntimeError), _handler)
    return True
