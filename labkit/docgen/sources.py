"""The records the blocks read, each from its one path in :mod:`labkit.records`."""

from __future__ import annotations

import json

from labkit import records


def shown(path) -> str:
    """A record's path as the docs name it, relative to the repository: ``labkit/data/cpu/downloads.json``."""
    return path.relative_to(records.paths.REPO).as_posix()


def gpu_records():
    """The reader of GPU records (imported when a block asks, so that importing the renderers stays cheap)."""
    from labkit.viz import gpu_records as reader

    return reader


def gpu_record() -> dict:
    """The GPU record, :data:`labkit.records.GPU`."""
    if not records.GPU.exists():
        raise FileNotFoundError(f"no GPU record ({records.GPU.relative_to(records.paths.REPO)})")
    return gpu_records().load_record(records.GPU)


def cpu_record() -> dict:
    """The commands' wall times, :data:`labkit.records.CPU_COMMANDS` (``make bench-cpu``)."""
    return json.loads(records.CPU_COMMANDS.read_text())


def downloads_record() -> dict:
    """What a fresh ``make lab`` downloads, :data:`labkit.records.CPU_DOWNLOADS` (``make wheelhouse RECORD=1``)."""
    return json.loads(records.CPU_DOWNLOADS.read_text())
