"""Wrong answers that look almost right, each rejected, and messages that name the cause the learner's
code has. Right answers stay accepted (the other workshop tests).
"""

from __future__ import annotations

import pytest
import torch
from workshop_helpers import assert_rejected, assert_solved, kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: chooses the backend)
from labkit import backends
from labkit.graphs import GraphRunner
from labkit.workshop import checkers as ex
from labkit.workshop.checkers import row_key, tl, triton, uniform  # noqa: F401 (the kernel below)
from labkit.workshop.exercises.starting_code import starting_code
from labkit.workshop.harness.host_steps import WIDE, WIDE_SCHEDULE

KERNELS_RUN = backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)


def test_the_timeline_pads_at_least_5_rows_once_and_dflash_at_least_10_sample_rows():
    runner = GraphRunner(WIDE.capture_sizes)
    padded = [runner.rows_for(len(slots)) - len(slots) for slots in WIDE_SCHEDULE]
    assert max(padded) >= 5, padded
    assert max(padded) * WIDE.k >= 10, (padded, WIDE.k)
    # ... right after a step that wrote every entry, so the padded rows hold slots live requests own.
    assert len(WIDE_SCHEDULE[0]) == WIDE.max_num_reqs and padded[1] >= 5
    stale = set(range(runner.rows_for(len(WIDE_SCHEDULE[1])))[len(WIDE_SCHEDULE[1]):])
    assert stale & set(WIDE_SCHEDULE[1]), "the padded rows' stale slots must include live ones"


def fill_three_rows(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n:n + 3] = -1


def dflash_six_rows(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:live + 6] = -1


def test_a_partial_fill_is_rejected():
    assert_rejected(ex.check_mapping(fill_three_rows), "padded row")


def test_a_partial_dflash_pad_is_rejected():
    assert_rejected(ex.check_dflash(dflash_six_rows), "padded sample row")


def fill_first_live_slot(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n:] = slots[-1]  # "repeat the last row": a slot a live row owns


def test_a_slot_written_this_step_is_named_as_the_learners_own_write():
    result = ex.check_mapping(fill_first_live_slot)
    assert_rejected(result, "which your `fill_first_live_slot` wrote there this step")
    assert "from an earlier step" not in result.message


def fill_without_the_copy(idx_mapping, slots):
    idx_mapping[slots.numel():] = -1  # the copy of the live rows is gone


def fill_rebinding(idx_mapping, slots):
    idx_mapping = torch.full_like(idx_mapping, -1)
    idx_mapping[:slots.numel()] = slots


def test_a_missing_copy_is_named_as_such_and_a_rebinding_as_such():
    missing = ex.check_mapping(fill_without_the_copy)
    assert_rejected(missing, "must copy this step's batch into idx_mapping")
    assert "assign" not in missing.message
    rebinding = ex.check_mapping(fill_rebinding)
    assert_rejected(rebinding, "It assigns a new value to the argument's name (`idx_mapping`)")


def gumbel_rows(logits, idx_mapping, temperature, seeds, positions, q, salt):
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        if slot < 0:
            continue
        tokens[row] = gumbel_helper(logits[row])  # noqa: F821 - the learner's typo, on purpose
    return tokens


def test_the_torch_versions_name_error_advice_names_the_torch_helpers():
    result = ex.check_kernel(gumbel_rows)
    assert_rejected(result, "NameError", "gumbel_torch", "row_key_torch")
    assert "`tl`" not in result.message and "uniform" not in result.message


def test_a_checker_on_the_starting_code_says_not_attempted_and_shows_nothing(tmp_path, monkeypatch):
    (tmp_path / "skeleton_a.py").write_text(starting_code("copy_idx_mapping"))  # a file: its source can be read
    monkeypatch.syspath_prepend(str(tmp_path))
    import skeleton_a

    result = ex.check_mapping({"copy_idx_mapping": skeleton_a.copy_idx_mapping})
    assert_rejected(result, "not attempted yet")
    assert result.launch is None and result.reveal is None and "-1" not in result.message
    # One changed line is an attempt, judged as such.
    assert "not attempted" not in ex.check_mapping(fill_three_rows).message


if KERNELS_RUN:
    @triton.jit
    def kernel_unsigned_compare(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                                vocab_size, salt, BLOCK_V: tl.constexpr):
        row = tl.program_id(0)
        slot = tl.load(mapping_ptr + row)
        is_valid = slot.to(tl.uint32) >= 0  # always true: an unsigned value is never below 0
        offs = tl.arange(0, BLOCK_V)
        in_vocab = offs < vocab_size
        logits = tl.load(logits_ptr + row * vocab_size + offs, mask=in_vocab, other=float("-inf"))
        temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
        seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
        scaled = logits
        if temp != 0.0:
            scaled = logits / temp
        tl.store(q_ptr + slot * vocab_size + offs, scaled, mask=in_vocab & ((offs * 0 + slot) >= 0))
        scores = scaled
        if temp != 0.0:
            key = row_key(seed, tl.load(pos_ptr + row), salt)
            scores = scaled - tl.log(-tl.log(uniform(key, offs)))
        tl.store(token_ptr + row, tl.argmax(scores, axis=0))


@pytest.mark.skipif(not (KERNELS_RUN and backends.KERNELS_INTERPRETED),
                    reason="the Triton version's reads are seen where the interpreter logs every access")
def test_an_always_true_unsigned_mask_is_named_as_such():
    result = ex.check_kernel(kernel_unsigned_compare)
    assert_rejected(result, "compares an unsigned value with 0", "slot.to(tl.uint32) >= 0", "masks nothing")


def test_right_fills_still_pass_the_longer_timeline():
    def fill_right(idx_mapping, slots):
        idx_mapping[:slots.numel()] = slots
        idx_mapping[slots.numel():] = -1

    assert_solved(ex.check_mapping(fill_right))


def test_the_starting_code_the_checkers_know_is_notebook_07s_skeletons():
    import json
    from pathlib import Path

    from labkit.workshop.exercises.record import EXERCISES
    from labkit.workshop.exercises.starting_code import is_starting_code, starting_code

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_exercises.ipynb").read_text())
    cells = {c.get("id"): "".join(c["source"]) for c in nb["cells"]}
    skeletons = {v.skeleton_cell: v.function for x in EXERCISES for v in x.versions}
    # Every version of every exercise names its skeleton cell, and 07 has each.
    assert len(skeletons) >= len(EXERCISES) and set(skeletons) <= set(cells), skeletons
    for cell_id, name in skeletons.items():
        assert starting_code(name) == cells[cell_id]
        assert is_starting_code(name, cells[cell_id]), f"07's {cell_id} is not what the checkers start from"
        solution = cells[cell_id.replace("skeleton", "solution")]
        assert not is_starting_code(name, solution), f"07's solution for {name} reads as the starting code"
