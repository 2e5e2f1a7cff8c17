"""nbval: cells tagged `gpu` are skipped (not sent to the kernel) when no CUDA device is present.

A GPU cell must not define anything a later cell needs: on a CPU machine it never runs.
"""

from __future__ import annotations

import pytest

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - the kit needs torch; be lenient when collecting only
    HAS_CUDA = False

GPU_TAG = "gpu"


def _tags(item) -> list[str]:
    cell = getattr(item, "cell", None)  # nbval's IPyNbCell keeps its notebook cell here
    if cell is None:
        return []
    return list(cell.get("metadata", {}).get("tags", []) or [])


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="notebook cell tagged 'gpu': no CUDA device here")
    for item in items:
        if GPU_TAG in _tags(item):
            item.add_marker(skip)
            options = getattr(item, "options", None)
            if options is not None:
                options["skip"] = True  # nbval's own switch: never send the cell to the kernel
