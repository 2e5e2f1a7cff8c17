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


# --- the learner's folder: the file browser lists the copies in the order they are opened ----------

# JupyterLab's file browser shows about this many characters of a name in its default width before it
# cuts the name (the browser stage checks the real width: tests/browser/test_jupyterlab.py).
NAME_FITS = 22


def test_the_learners_copies_sort_by_name_in_the_order_a_learner_opens_them(tmp_path):
    from labkit.workshop.editions.secrecy import STUDENT_PATH
    from labkit.workshop.editions.student import build_learner_folder, edition_name, learner_name

    folder = build_learner_folder(tmp_path / "student")
    names = [p.name for p in folder.notebooks]
    assert [edition_name(n) for n in sorted(names)] == list(STUDENT_PATH)  # plain sort, as a browser sorts
    assert [edition_name(n) for n in sorted(names, key=str.lower)] == list(STUDENT_PATH)
    assert sorted(p.name for p in (tmp_path / "student").glob("*.ipynb")) == names
    for name in STUDENT_PATH:
        copy = learner_name(name)
        assert copy[2:4] == name[:2], copy  # the number the notebooks call one another by
        assert len(copy) <= NAME_FITS, copy
        assert copy != name


def test_a_folder_an_older_kit_built_keeps_the_learners_work_under_the_new_names(tmp_path):
    from labkit.workshop.editions.student import build_learner_folder, is_learner_folder, learner_name

    old = tmp_path / "student"
    build_learner_folder(old)
    first = old / learner_name("00_setup_and_tour.ipynb")
    older = old / "00_setup_and_tour_student.ipynb"
    first.replace(older)
    older.write_text(older.read_text().replace("# 00", "# 00 (my notes)", 1))
    assert is_learner_folder(old)
    again = build_learner_folder(old)
    assert first in again.kept and "(my notes)" in first.read_text() and not older.exists()
    assert not again.others
