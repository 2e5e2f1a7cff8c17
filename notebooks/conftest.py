"""nbval checks the notebooks on the CPU path, on every machine, each notebook's cells in their order;
cells tagged `gpu` are skipped there.

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
# And they run the CPU's default backend, which the committed outputs come from, whatever
# LABKIT_BACKEND the rest of the suite runs under: with the GPU hidden, `triton` cannot run there,
# and some checked outputs depend on the backend (06 compares the Triton kernels with the torch
# references; under `torch` there is nothing to compare). The browser stage runs every notebook
# under `torch`. A value that is no backend is passed on: the notebook's import fails in one line.
if os.environ.get("LABKIT_BACKEND", "").strip().lower() in ("triton", "interpreter", "torch"):
    del os.environ["LABKIT_BACKEND"]

GPU_TAG = "gpu"


def _tags(item) -> list[str]:
    cell = getattr(item, "cell", None)  # nbval's IPyNbCell keeps its notebook cell here
    if cell is None:
        return []
    return list(cell.get("metadata", {}).get("tags", []) or [])


def pytest_collection_modifyitems(config, items):
    # A notebook's cells share one kernel and run in order: a plugin that shuffles tests
    # (pytest-randomly, where it is installed) must not shuffle them. Each notebook keeps its place
    # among the other items; its cells go back into the notebook's own order.
    cells = [i for i, item in enumerate(items) if getattr(item, "cell_num", None) is not None]
    by_notebook: dict = {}
    for i in cells:
        by_notebook.setdefault(str(items[i].fspath), []).append(items[i])
    in_order = {path: iter(sorted(group, key=lambda item: item.cell_num)) for path, group in by_notebook.items()}
    for i in cells:
        items[i] = next(in_order[str(items[i].fspath)])
    skip = pytest.mark.skip(reason="notebook cell tagged 'gpu': nbval checks the CPU path")
    for item in items:
        if GPU_TAG in _tags(item):
            item.add_marker(skip)
            options = getattr(item, "options", None)
            if options is not None:
                options["skip"] = True  # nbval's own switch: never send the cell to the kernel
