"""The capstone: the learner's fill, kernel and DFlash pad in the engine, on notebook 01's workload.

The claims of its table are computed here from the engine itself: with the learner's pieces
right, every response equals the eager run's; with the kit's fill left out (the learner's fill
untouched), the engine does exactly what the kit's "graph-kernel-only" mode does.
"""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from test_workshop_dflash import dflash_pad_zero, dflash_right
from test_workshop_fill import fill_nothing, fill_right, fill_zero
from test_workshop_kernel import kernel_early_exit
from test_workshop_kernel_torch import rows_skip_padded
from workshop_helpers import kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: sets TRITON_INTERPRET)
from labkit import backends
from labkit.bench.modes import mode_named
from labkit.bench.repro import BenchConfig, bench_requests
from labkit.engine import Engine
from labkit.errors import LabkitInputError
from labkit.models import load_toy_models
from labkit.proofs.ownership import OwnershipTable
from labkit.workshop import checkers as ex
from labkit.workshop.exercises.capstone import run_capstone

KERNELS_RUN = backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)


def _your_rows(result):
    return {r.drafter: r for r in result.rows if r.run == "your fix"}


def test_the_capstone_with_right_pieces_reproduces_the_table_and_maps_your_launch():
    result = run_capstone({"copy_idx_mapping": fill_right, "gumbel_rows": rows_skip_padded,
                           "build_sample_mapping": dflash_right}, prompts=8)
    assert result.solved, repr(result)
    assert [(r.drafter, r.run) for r in result.rows] == [
        ("autoregressive", "eager (reference)"), ("autoregressive", "kit before the fix (graph-buggy)"),
        ("autoregressive", "your fix"), ("dflash", "eager (reference)"),
        ("dflash", "kit before the fix (dflash-buggy)"), ("dflash", "your fix")]
    assert all(r.identical == r.responses == 8 for r in _your_rows(result).values())
    assert repr(result).startswith("your fix: 8 of 8 identical to eager (autoregressive), 8 of 8")
    table = result.ownership
    assert [int(s) for s in table.record.mapping] == [0, 1, 2, 4, 5, 6, 7, -1]
    assert table.collisions() == []
    assert "row 7" not in str(table).split("verdict", 1)[1]  # the padded row stored nothing
    assert isinstance(result.ownership_map(), Figure)


def test_each_drafter_shows_its_own_launch_once():
    pieces = {"copy_idx_mapping": fill_right, "gumbel_rows": rows_skip_padded, "build_sample_mapping": dflash_right}
    dflash = run_capstone(pieces, prompts=2, drafters=("dflash",))
    assert dflash.solved and list(dflash.launches) == ["dflash"]
    record = dflash.launches["dflash"]
    # DFlash's launch reads the sample mapping your (c) built: 7 live requests, k = 2 rows each, padded to 16.
    mapping = [int(s) for s in record.mapping]
    assert record.samples_per_req == 2 and len(mapping) == 16
    assert mapping[:14] == [s for s in (0, 1, 2, 4, 5, 6, 7) for _ in range(2)] and all(s < 0 for s in mapping[14:])
    shown = repr(dflash)
    assert shown.count("Your own ") == 1 and "Your own dflash launch" in shown and "your (a), (b) and (c)" in shown
    assert str(OwnershipTable.from_record(record)) in shown
    both = run_capstone(pieces, prompts=2)
    shown = repr(both)
    assert [line for line in shown.splitlines() if line.startswith("Your own ")] == [
        line for line in shown.splitlines() if line.startswith(("Your own autoregressive", "Your own dflash"))]
    assert shown.count("Your own autoregressive launch") == shown.count("Your own dflash launch") == 1
    assert both.launch is both.launches["autoregressive"]


def test_a_passed_capstone_brings_the_docs_that_explain_the_fix_into_a_learners_folder(tmp_path, monkeypatch):
    from labkit.workshop.editions.student import DOCS_AFTER_THE_EXERCISES, build_learner_folder

    folder = build_learner_folder(tmp_path / "student").root
    monkeypatch.chdir(folder)  # where a learner's kernel runs
    pieces = {"copy_idx_mapping": fill_right, "gumbel_rows": rows_skip_padded, "build_sample_mapping": dflash_right}
    failed = run_capstone({**pieces, "build_sample_mapping": dflash_pad_zero}, prompts=2)
    assert not failed.solved and not any((folder / "docs" / doc).exists() for doc in DOCS_AFTER_THE_EXERCISES)
    result = run_capstone(pieces, prompts=2, drafters=("autoregressive",))
    assert result.solved
    for doc in DOCS_AFTER_THE_EXERCISES:
        assert (folder / "docs" / doc).is_file() and f"docs/{doc}" in result.message
    assert "are now in your folder" in result.message
    again = build_learner_folder(folder)  # a rebuild keeps them and counts them as the folder's own
    assert again.others == () and (folder / "docs" / DOCS_AFTER_THE_EXERCISES[0]).is_file()


def test_the_capstone_waits_for_the_checkers():
    result = ex.capstone({"copy_idx_mapping": fill_zero, "gumbel_rows": rows_skip_padded,
                          "build_sample_mapping": dflash_right}, prompts=2)
    assert not result.solved and result.rows == []
    assert "Not yet" in result.message and "Exercise (a) not solved yet" in result.message
    assert repr(result.ownership_map()).startswith("No launch to map yet")


def test_your_untouched_fill_does_what_the_kits_mask_only_mode_does():
    prompts = 10
    result = run_capstone(copy_idx_mapping=fill_nothing, kernel=rows_skip_padded, sample_mapping=dflash_right,
                          prompts=prompts, drafters=("autoregressive",), check_first=False)
    cfg = BenchConfig(prompts=prompts)
    models = load_toy_models("cpu")
    with backends.using_backend("torch"):
        eager, mask_only = (Engine(models, mode_named(mode).config.at_shapes_of(cfg.shapes)).generate(
            bench_requests(cfg, models.tokenizer)).outputs for mode in ("eager", "graph-kernel-only"))
    same = sum(mask_only[rid] == eager[rid] for rid in eager)
    yours = _your_rows(result)["autoregressive"]
    assert yours.identical == same < prompts  # stale slots corrupt, as in the kit's mode
    assert not result.solved and result.message.startswith("Not yet: your fix gave")
    assert result.ownership.collisions()  # row 7 still holds slot 7: it overwrote live row 6's q


@pytest.mark.skipif(not KERNELS_RUN, reason="Triton kernels cannot run here")
def test_the_capstone_runs_a_triton_kernel():
    result = run_capstone(copy_idx_mapping=fill_right, kernel=kernel_early_exit, sample_mapping=dflash_right, prompts=3,
                          check_first=False)
    assert result.solved, repr(result)
    assert "your Triton kernel ran" in repr(result)
    assert result.ownership.collisions() == []


def test_bad_arguments_are_refused_in_words():
    with pytest.raises(LabkitInputError, match="prompts must be at least 1"):
        run_capstone(copy_idx_mapping=fill_right, kernel=rows_skip_padded, sample_mapping=dflash_right, prompts=0)
    with pytest.raises(LabkitInputError, match="drafters must be some of"):
        run_capstone(copy_idx_mapping=fill_right, kernel=rows_skip_padded, sample_mapping=dflash_right,
                     drafters=("eagle",))
