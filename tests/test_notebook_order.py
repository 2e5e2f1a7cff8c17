"""notebooks/conftest.py keeps each notebook's cells in their order whatever a plugin did to the items:
pytest-randomly, installed on a GPU box, shuffled nbval's cells there, and every later cell then
failed on a name an earlier one had not defined yet."""

from __future__ import annotations

import os
import random
import runpy
from pathlib import Path
from types import SimpleNamespace

CONFTEST = Path(__file__).resolve().parents[1] / "notebooks" / "conftest.py"


def test_shuffled_cells_go_back_into_their_notebooks_order_and_other_items_stay(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", ""))  # restored after
    hook = runpy.run_path(str(CONFTEST))["pytest_collection_modifyitems"]
    cells = [SimpleNamespace(fspath=f"{nb}.ipynb", cell_num=n, cell={}) for nb in ("05", "06") for n in range(12)]
    other = SimpleNamespace(fspath="test_x.py", name="test_x")
    items = cells + [other]
    random.Random(0).shuffle(items)
    at = items.index(other)
    before = [item.fspath for item in items]
    hook(None, items)
    assert items.index(other) == at  # a test that is no cell keeps its place
    assert [item.fspath for item in items] == before  # each notebook keeps the places it had
    for nb in ("05.ipynb", "06.ipynb"):
        assert [item.cell_num for item in items if item.fspath == nb] == list(range(12))
