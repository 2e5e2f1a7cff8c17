"""What one learner runs when the room is measured: notebook 00, notebook 01, then 01's repro as
``python -m labkit repro`` runs it, printing one JSON line.

Two measurements run it: room/bench/hub_bench.py in each learner's kernel over a real hub (how many
learners one box holds), and room/bench/kernel_memory.py in one process under a data limit
(the smallest memory limit a room may set).
"""

from __future__ import annotations

from pathlib import Path

NOTEBOOKS = ("00_setup_and_tour.ipynb", "01_reproduce_the_gibberish.ipynb")
REPRO_MARK = "LABKIT_BENCH "

# The repro as the command runs it, on the GPU's compiled kernels where there are some; one JSON line.
REPRO = f"""\
import json, torch, labkit
from labkit.backends import using_backend
from labkit.bench.modes import DEFAULT_MODES
from labkit.bench.repro import BenchConfig, run_bench
_backend = "triton" if torch.cuda.is_available() and labkit.backends.HAS_TRITON else "torch"
with using_backend(_backend):
    _r = run_bench(BenchConfig(), DEFAULT_MODES, progress=False)
print({REPRO_MARK!r} + json.dumps({{
    "backend": _backend, "responses": _r.modes["graph-fixed"].responses,
    "buggy_corrupted": _r.modes["graph-buggy"].corrupted, "fixed_corrupted": _r.modes["graph-fixed"].corrupted,
    "gpu_peak_bytes": torch.cuda.max_memory_reserved() if torch.cuda.is_available() else None}}))
"""


def cells(folder: Path) -> list[str]:
    """The code cells a learner runs from `folder` (their own edition, whose notebooks carry the
    learner's names, or notebooks/), then the repro."""
    from labkit.workshop.editions.student import learner_name
    from labkit_room.client import notebook_cells

    folder = Path(folder)
    paths = [folder / learner_name(name) if (folder / learner_name(name)).is_file() else folder / name
             for name in NOTEBOOKS]
    return [code for path in paths for code in notebook_cells(path)] + [REPRO]


def split_imports(code: str) -> tuple[str, str]:
    """(its imports, the rest) of a cell: the leading lines that are magics, comments, blank or a
    one-line ``import``/``from ... import``, then everything after. Run one after the other, the two
    do what the cell does; the bench times them apart (how long the kit's import takes before the
    first cell's own work)."""
    lines = code.splitlines(keepends=True)
    head = 0
    for line in lines:
        bare = line.strip()
        if not (not bare or bare.startswith(("%", "#", "import ")) or (bare.startswith("from ") and " import " in bare)
                ) or bare.endswith(("(", "\\", ",")):
            break
        head += 1
    return "".join(lines[:head]), "".join(lines[head:])

