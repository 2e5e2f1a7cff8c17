"""The secrecy scan finds the answers a learner could reach before an exercise, on text the kit once had.

Each of the five ways an answer once reached a learner before notebook 07 is put back, as its old
text, into the student edition or into a stand-in module of the kit, and the scan
(labkit.workshop.editions.secrecy) must report it; the same edition without it reports nothing
(tests/test_student_secret.py runs the whole path). The old texts are quoted here as they were.

Then the whole package: what ``?`` and Tab reach in every module of the kit, imported by a notebook
or not (labkit.workshop.editions.help_text), states no part of any answer; each of the ten places
where it once did is put back, as a stand-in module, and must be caught.
"""

from __future__ import annotations

import json
import sys
import textwrap

import nbformat
import pytest

import labkit
from labkit.workshop.editions.help_text import labkit_imports, module_help, package_help, package_modules
from labkit.workshop.editions.secrecy import (
    EXERCISE_NOTEBOOK,
    answers_in,
    find_leaks,
    find_package_leaks,
    normalised,
    outside_spoilers,
)
from labkit.workshop.editions.student import build_learner_folder, edition_name

# Leak 1: notebook 00 imported moving_parts, whose docstring offered show_fix and whose FIX table
# was one Tab away.
OLD_MOVING_PARTS = '''
"""A map of the moving parts on one screen.

    moving_parts()               -> Figure   the learner's map: marks the bug's three places (red, 1-3)
    moving_parts(show_fix=True)  -> Figure   the same, with the three parts of the PR's fix (FIX 1-3)
"""
FIX = {
    1: "FIX 1: idx_mapping[num_reqs:] = -1",
    2: "FIX 2: skip slot < 0\\n(masked loads + store)",
    3: "FIX 3: pad with -1, not 0",
}


def moving_parts(show_fix: bool = False):
    """`show_fix` adds the three parts of the PR's fix, FIX 1-3, where they act."""
'''
# Leak 2: notebook 02 imported mapping_heatmap; its docstring ended on the answer and a full stop.
OLD_MAPPING_PLOTS = '''
def mapping_heatmap(launches, *, title=None):
    """The mapping buffer over steps: live rows, padded rows with a stale slot, padded rows with -1.
    """
'''
# Leak 4: labkit.config's docstring named the switches; labkit.workshop's submodules were named
# after the fix.
OLD_CONFIG = '''
"""One drafter configuration.

    DrafterConfig(drafter, k, max_num_reqs, capture_sizes, use_graphs, fix, probabilistic)
    FixSwitches(fill_padding, mask_kernel, dflash_pad)      the parts of PR #47066, each on or off
"""
'''
OLD_WORKSHOP_MODULES = ("fill", "kernel_mask", "pr_fix", "answers")
# Leak 3: notebook 02's explorer, made with its defaults, labelled its switches with the fix.
OLD_EXPLORER_LABELS = ("step", "drafter", "DFlash pad", "fill padded rows with -1", "mask the kernel (slot >= 0)")
# Leak 4 again: notebook 00 took the kernel's inputs from the module whose gumbel_sample has the switches.
OLD_TOUR_IMPORT = "from labkit.kernels import SamplingState, WriteTrace"
# Leak 5: the introduction to (b), right below (a), and two rows of the README's notebook table.
OLD_B_TASK = ("Its `temperature`, `seeds` and `q` index like pointers: index -1 is the memory just before the\n"
              "buffer, as `ptr + slot` is in the kernel, not Python's last element.")
OLD_README_ROWS = """
| `03_the_fix` | the PR's code next to the learner's own, each part alone, the uint32 refusal, 50 of 50 right |
| `05_sibling_bugs` | the same family: int32 `slot * stride` overflow, shared noise between draft and residual |
"""


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    folder = build_learner_folder(tmp_path_factory.mktemp("learner") / "student")
    return {edition_name(p.name): nbformat.read(p, as_version=4) for p in folder.notebooks}


@pytest.fixture
def old_module(tmp_path, monkeypatch):
    """Puts an old module back, as a module of the kit (``labkit.then_<name>``) that a cell can import from:
    ``old_module("config", OLD_CONFIG)``; a tuple of names makes a package of empty submodules."""
    monkeypatch.setattr(labkit, "__path__", [*labkit.__path__, str(tmp_path)])

    def put(name: str, source: str | tuple[str, ...]) -> None:
        if isinstance(source, str):
            (tmp_path / f"then_{name}.py").write_text(source)
            return
        package = tmp_path / f"then_{name}"
        package.mkdir()
        (package / "__init__.py").write_text(f'"""The {name}."""\n')
        for sub in source:
            (package / f"{sub}.py").write_text(f'"""{sub}."""\n')

    yield put
    for name in [n for n in sys.modules if n.startswith("labkit.then_")]:
        del sys.modules[name]
    for name in [n for n in vars(labkit) if n.startswith("then_")]:
        delattr(labkit, name)


def _copy(edition):
    return {name: nbformat.from_dict(json.loads(json.dumps(nb))) for name, nb in edition.items()}


def _with_cell(edition, notebook: str, cell, after: int = 1):
    changed = _copy(edition)
    changed[notebook].cells.insert(after, cell)
    return changed


def _leaks_for(edition, exercise: str):
    return [leak for leak in find_leaks(edition) if leak.exercise == exercise]


def test_the_edition_as_it_is_shows_no_answer(edition):
    assert find_leaks(edition) == []


def test_leak_1_the_fixed_map_one_tab_from_a_name_notebook_00_imports(edition, old_module):
    old_module("moving_parts", OLD_MOVING_PARTS)
    cell = nbformat.v4.new_code_cell("from labkit.then_moving_parts import moving_parts")
    leaks = _leaks_for(_with_cell(edition, "00_setup_and_tour.ipynb", cell), "a")
    assert any(leak.seen.where == "labkit.then_moving_parts.FIX" and "-1" in leak.found for leak in leaks), leaks
    assert _leaks_for(_with_cell(edition, "00_setup_and_tour.ipynb", cell), "c")  # "pad with -1, not 0"


def test_leak_2_an_answer_before_a_full_stop_in_a_docstring(edition, old_module):
    old_module("mapping_plots", OLD_MAPPING_PLOTS)
    cell = nbformat.v4.new_code_cell("from labkit.then_mapping_plots import mapping_heatmap")
    leaks = _leaks_for(_with_cell(edition, "02_see_the_stale_idx_mapping.ipynb", cell), "a")
    assert [leak.seen.where for leak in leaks] == ["labkit.then_mapping_plots.mapping_heatmap?"]
    # As written, "-1." is not the pattern's -1 (it could be -1.5); as read, it is.
    docstring = "padded rows with a stale slot, padded rows with -1."
    assert answers_in(docstring, "a") and normalised("with\n`-1`.") == "with -1 "


def test_leak_3_the_explorers_switch_labels(edition):
    changed = _copy(edition)
    nb = changed["02_see_the_stale_idx_mapping.ipynb"]
    models = {f"m{i}": {"model_name": "CheckboxModel", "state": {"description": label}}
              for i, label in enumerate(OLD_EXPLORER_LABELS)}
    models["box"] = {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{m}" for m in models]}}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": models}}
    cell = nbformat.v4.new_code_cell("Explorer(source)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2, "version_minor": 0}})]
    nb.cells.insert(2, cell)
    found = {(leak.exercise, leak.seen.where) for leak in find_leaks(changed)}
    assert {("a", "widget label"), ("b", "widget label")} <= found, found


def test_leak_4_a_docstring_the_names_of_a_package_and_a_module_imported_from(edition, old_module):
    old_module("config", OLD_CONFIG)
    old_module("workshop", OLD_WORKSHOP_MODULES)
    config = nbformat.v4.new_code_cell("from labkit.then_config import DrafterConfig")
    found = {leak.seen.where for leak in _leaks_for(_with_cell(edition, "02_see_the_stale_idx_mapping.ipynb", config),
                                                     "b")}
    assert "labkit.then_config?" in found  # mask_kernel
    workshop = nbformat.v4.new_code_cell("from labkit.then_workshop import fill")
    leaks = _leaks_for(_with_cell(edition, EXERCISE_NOTEBOOK, workshop), "a")
    assert any(leak.seen.where == "labkit.then_workshop.<Tab>" for leak in leaks), leaks
    tour = nbformat.v4.new_code_cell(OLD_TOUR_IMPORT)
    found = {leak.seen.where for leak in _leaks_for(_with_cell(edition, "00_setup_and_tour.ipynb", tour), "b")}
    assert "signature of labkit.kernels.gumbel_sample" in found, found  # masked=True


def test_leak_5_reading_ahead_in_07_and_the_readmes_table(edition):
    changed = _copy(edition)
    task = next(cell for cell in changed[EXERCISE_NOTEBOOK].cells if cell.get("id") == "b-task")
    task.source += "\n\n" + OLD_B_TASK
    leaks = _leaks_for(changed, "a")
    assert [leak.seen.cell_id for leak in leaks] == ["b-task"], leaks  # (b)'s text, read before (a) is solved
    readme = outside_spoilers(OLD_README_ROWS)
    assert answers_in(readme, "a") == ["uint32"]
    assert answers_in(readme, "d")


def test_an_answer_past_an_exercises_checker_in_07_is_read_ahead_and_an_answer_in_03_is_not(edition):
    line = nbformat.v4.new_markdown_cell("idx_mapping[num_reqs:] = -1")
    ids = [cell.get("id") for cell in edition[EXERCISE_NOTEBOOK].cells]
    after_check = _with_cell(edition, EXERCISE_NOTEBOOK, line, after=ids.index("a-check-1") + 1)
    assert [leak.exercise for leak in find_leaks(after_check)] == ["a"]
    assert find_leaks(_with_cell(edition, "03_the_fix.ipynb", line)) == []


def test_what_a_cell_imports_from_is_read_as_python_reads_it():
    source = textwrap.dedent("""\
        %matplotlib inline
        import labkit
        import torch
        from labkit.workshop import checkers as ex
        from labkit.viz.widgets import Explorer
        x = __import__("labkit.config")
        """)
    assert labkit_imports(source) == ["labkit", "labkit.workshop", "labkit.workshop.checkers", "labkit.viz.widgets"]
    assert labkit_imports("def broken(:") == []


def test_module_help_reads_what_tab_and_question_mark_show():
    seen = dict(module_help("labkit.viz.widgets"))
    assert seen["labkit.viz.widgets?"].startswith("The stale-mapping explorer")
    assert "Explorer" in seen["labkit.viz.widgets.<Tab>"].split()
    assert seen["signature of labkit.viz.widgets.Explorer"].startswith("Explorer(source")
    assert "labkit.viz.widgets.Explorer.config?" in seen  # a class's public methods too
    package = dict(module_help("labkit.workshop"))
    assert "labkit.workshop.tour?" in package and "tour" in package["labkit.workshop.<Tab>"].split()


# --- the whole package, as Tab and ? reach it --------------------------------------------------------

# The ten places where ? showed part of the fix before the exercises, as they were; each is put back
# as a stand-in module (labkit.then_<name>) and must be caught where the learner would read it.
# (name, source, where the scan must report it, the exercises it gives away)
OLD_HELP = (
    ("gumbel", '''"""The Gumbel sampling kernel of the drafter.

`masked=True` is the kernel after the fix: rows with slot < 0
load temperature and seed with `other=0` (a noiseless argmax that is thrown away) and do not store.
"""
''', "labkit.then_gumbel?", {"b"}),
    ("dflash_prep", '''"""Input preparation of a DFlash-style drafter.

Before PR #47066 the pad for `sample_idx_mapping` was 0, meant as "a harmless valid index": but to
a slot-indexed store, 0 is request slot 0, so every padded sample row overwrote slot 0's q. After
the fix the pad is -1, which the masked sampling kernel skips.
"""
''', "labkit.then_dflash_prep?", {"a", "b", "c"}),
    ("dflash_signature", '''"""DFlash's sample mapping."""


def prepare_dflash_sample_mapping(idx_mapping, positions, sample_idx_mapping, sample_pos, *, num_reqs, k,
                                  pad_value=-1, backend=None):
    """Fill the persistent sample buffers in place (live part from the batch, the rest `pad_value`)."""
''', "signature of labkit.then_dflash_signature.prepare_dflash_sample_mapping", {"a", "c"}),
    ("sampling_kernel", '''"""Exercise (b): the sampling kernel must skip rows whose slot is -1.

Padded rows' own results are thrown away, so any way of skipping them is right: masked loads with
any ``other``, ``tl.where`` on a safe index, scalar ``if slot >= 0`` guards, or the whole body under one.
"""
''', "labkit.then_sampling_kernel?", {"a", "b"}),
    ("host_steps", '''"""Exercises (a) and (c) share this.

* the rows the graph reads: live rows map to their slots, padded rows to no slot at all (a
  negative value, which the masked kernel skips).
"""
''', "labkit.then_host_steps?", {"a", "b"}),
    ("launches", '''"""The launches of exercise (b).

Each case is one launch of a toy vocabulary with a row -> slot mapping whose padded rows hold -1.
"""
CASE_MAPPINGS = ((0, 1, 2, 4, 5, 6, 7, -1), (6, 0, -1, -1), (3, 7, 1, 0))
''', "labkit.then_launches.CASE_MAPPINGS", {"a"}),
    ("guarded", '''"""Guarded memory.

A padded row whose slot is -1 addresses ``temperature[-1]``, ``seeds[-1]`` and ``draft_logits[-1]``:
the memory just before each buffer.
"""
''', "labkit.then_guarded?", {"a"}),
    ("padded_slot", '''"""Errors."""


def padded_slot_error(kernel, rows, slots=(-1,)):
    """The refusal of an unmasked launch whose `rows` hold the negative `slots`."""
''', "signature of labkit.then_padded_slot.padded_slot_error", {"a"}),
    ("fix_explorer", '''"""Notebook 03's explorer.

    host     Speculator.copy_idx_mapping fills the padded rows of idx_mapping with -1 (no request).
    kernel   the Gumbel sampling kernel masks its loads and its q store on slot >= 0.
    dflash   DFlash pads its per-sample mapping with -1 rather than 0 (request slot 0).
"""
''', "labkit.then_fix_explorer?", {"a", "b", "c"}),
    ("record", '''"""The exercises."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    """One exercise."""

    letter: str
    upstream: str


EXERCISES = (Exercise("d", "vLLM #47383, slot * k * vocab in int32 (the kit's gumbel_sample_kernel widens it)"),)
''', "labkit.then_record.EXERCISES", {"d"}),
)


@pytest.mark.parametrize("name, source, where, exercises", OLD_HELP, ids=[old[0] for old in OLD_HELP])
def test_each_place_where_question_mark_once_showed_the_fix_is_caught(old_module, name, source, where, exercises):
    old_module(name, source)
    leaks = find_package_leaks(module_help(f"labkit.then_{name}"))
    assert {leak.exercise for leak in leaks if leak.seen.where == where} == exercises, [str(x) for x in leaks]


def test_the_walk_reaches_modules_no_notebook_imports_and_a_new_one(old_module):
    old_module("fixed_map", '''"""Notebook 03's map."""
FIX = {1: "FIX 1: idx_mapping[num_reqs:] = -1", 2: "FIX 2: skip slot < 0", 3: "FIX 3: pad with -1, not 0"}
''')
    modules = package_modules()
    # Modules of every part of the kit, imported by no notebook, and the planted one.
    assert {"labkit.kernels.dflash_prep", "labkit.tools.mutants", "labkit.upstream.report", "labkit.gpu.race",
            "labkit.workshop.harness.host_steps", "labkit.then_fixed_map"} <= set(modules)
    leaks = [leak for leak in find_package_leaks() if leak.seen.where == "labkit.then_fixed_map.FIX"]
    assert {leak.exercise for leak in leaks} == {"a", "b", "c"}, [str(x) for x in leaks]


def test_a_module_that_cannot_be_imported_still_shows_its_docstring(old_module):
    old_module("hub_config", '"""Loaded by JupyterHub: padded rows hold -1."""\nc = get_config()  # noqa: F821\n')
    seen = dict(package_help())
    assert seen["labkit.then_hub_config?"] == "Loaded by JupyterHub: padded rows hold -1."
    assert any(leak.seen.where == "labkit.then_hub_config?" for leak in find_package_leaks())


def test_what_question_mark_shows_anywhere_in_the_kit_states_no_part_of_any_answer():
    leaks = find_package_leaks()
    assert not leaks, "? and Tab show the fix before the exercises:\n" + "\n".join(map(str, leaks))
