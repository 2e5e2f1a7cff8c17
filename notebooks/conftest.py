"""nbval checks the notebooks on the CPU path, on every machine; cells tagged `gpu` are skipped there.

The outputs nbval compares were committed from a run on the CPU (Triton's interpreter, or the torch
references). On a GPU the kernels compile and colliding rows race, so a checked output need not be
the same: the kernels nbval starts therefore see no GPU (``CUDA_VISIBLE_DEVICES`` is emptied here,
before torch or a kernel starts), and the same outputs hold on a laptop, in CI and on a GPU box.
The notebooks themselves run on a GPU when opened in the lab. A cell tagged `gpu` is not sent to the
kernel here; it must not define anything a later cell needs.
"""

from __future__ import annotations

import os

import pytest

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # inherited by the notebook kernels nbval starts
# With the GPU hidden, compiled kernels cannot run in those kernels: a LABKIT_BACKEND=triton set for
# the rest of the suite (on a GPU box) becomes the interpreter there, the same Triton source on the
# CPU, which is what the committed outputs come from. Any other value is passed on as it is (a bad
# one fails the notebook's import in one line, as it would in the lab).
if os.environ.get("LABKIT_BACKEND", "").strip().lower() == "triton":
    os.environ["LABKIT_BACKEND"] = "interpreter"

GPU_TAG = "gpu"


def _tags(item) -> list[str]:
    cell = getattr(item, "cell", None)  # nbval's IPyNbCell keeps its notebook cell here
    if cell is None:
        return []
    return list(cell.get("metadata", {}).get("tags", []) or [])


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="notebook cell tagged 'gpu': nbval checks the CPU path")
    for item in items:
        if GPU_TAG in _tags(item):
            item.add_marker(skip)
            options = getattr(item, "options", None)
            if options is not None:
                options["skip"] = True  # nbval's own switch: never send the cell to the kernel
