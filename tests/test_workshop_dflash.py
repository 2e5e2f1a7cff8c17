"""Exercise (c), DFlash's sample mapping: answers written as a learner would, run through the checker."""

from __future__ import annotations

import pytest
import torch
from workshop_helpers import assert_rejected, assert_solved, kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: chooses the backend)
from labkit.bench.scenario import propose_inputs
from labkit.workshop import checkers as ex
from labkit.workshop.exercises.dflash_mapping import dflash_speculator
from labkit.workshop.harness.host_steps import SCHEDULE

# ---------------------------------------------------------------------------------------- right


def dflash_right(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = -1


def dflash_fill_first(idx_mapping, num_reqs, k, sample_idx_mapping):
    sample_idx_mapping.fill_(-1)
    sample_idx_mapping[: num_reqs * k] = idx_mapping[:num_reqs, None].expand(num_reqs, k).reshape(-1)


def dflash_loop(idx_mapping, num_reqs, k, sample_idx_mapping):
    for r in range(len(sample_idx_mapping)):
        sample_idx_mapping[r] = idx_mapping[r // k] if r < num_reqs * k else -1


def dflash_up_to_the_graph(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    graph = 1 << (num_reqs - 1).bit_length()  # capture sizes 1, 2, 4, 8
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live: graph * k] = -1


@pytest.mark.parametrize("learner", [dflash_right, dflash_fill_first, dflash_loop, dflash_up_to_the_graph])
def test_every_right_pad_is_accepted(learner):
    result = ex.check_dflash(learner)
    assert_solved(result)
    assert result.warnings == []


# ---------------------------------------------------------------------------------------- wrong


def dflash_pad_zero(idx_mapping, num_reqs, k, sample_idx_mapping):  # the skeleton: vLLM before the PR
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = 0


def dflash_no_pad(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)


def dflash_repeat(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat(k)
    sample_idx_mapping[live:] = -1


def dflash_repeat_the_last_live_slot(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = idx_mapping[num_reqs - 1]


def dflash_pad_one_request(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live: live + k] = -1


def dflash_pad_past_the_slots(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = num_reqs * k
    sample_idx_mapping[:live] = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping[live:] = len(sample_idx_mapping) // k


def dflash_new_tensor(idx_mapping, num_reqs, k, sample_idx_mapping):
    live = idx_mapping[:num_reqs].repeat_interleave(k)
    sample_idx_mapping = torch.cat([live, live.new_full((len(sample_idx_mapping) - len(live),), -1)])
    return sample_idx_mapping


def dflash_wrong_length(idx_mapping, num_reqs, k, sample_idx_mapping):
    sample_idx_mapping[: num_reqs * k] = idx_mapping[:num_reqs]
    sample_idx_mapping[num_reqs * k:] = -1


@pytest.mark.parametrize("learner,fragments", [
    (dflash_no_pad, ["At step 1", "padded sample rows 14 and 15 still hold slot 7",
                     "into draft_logits[7, 0] and [7, 1]: the q of live row 6"]),
    (dflash_repeat, ["At step 0", "Sample row 1 is draft step 1 of live row 0, whose request holds slot 0, "
                     "but it maps to 1"]),
    # The learner's code writes slot 7 into the padded rows that held 7 already: the cause is the code.
    (dflash_repeat_the_last_live_slot, ["At step 1", "padded sample rows 14 and 15 hold slot 7, which your "
                                        "`dflash_repeat_the_last_live_slot` wrote there this step",
                                        "the q of live row 6"]),
    (dflash_pad_one_request, ["At step 2", "padded sample rows 12 and 13 still hold slot 7", "the q of live row 4"]),
    (dflash_pad_past_the_slots, ["Sample row 14 holds 8, which is no slot at all"]),
    (dflash_new_tensor, ["did not change at all", "returned a tensor"]),
    (dflash_wrong_length, ["raised RuntimeError at line 2 of `dflash_wrong_length`"]),
])
def test_wrong_pads_are_rejected_with_a_true_reason(learner, fragments):
    assert_rejected(ex.check_dflash(learner), *fragments)


def test_a_pad_of_the_last_live_slot_is_blamed_on_the_code_that_wrote_it_not_on_an_earlier_step():
    result = ex.check_dflash(dflash_repeat_the_last_live_slot)
    assert "from an earlier step" not in result.message and "wrote there this step" in result.message


def test_the_untouched_exercise_first_names_the_symptom_not_the_fix():
    result = ex.check_dflash(dflash_pad_zero)
    assert_rejected(result, "At step 1", "padded sample rows 14 and 15 hold 0", "request slot 0's number",
                    "draft_logits[0, 0] and [0, 1]: the q of live row 0")
    assert "-1" not in result.message
    assert "-1" in repr(ex.hint("c", 3)) and "-1" not in repr(ex.hint("c", 1))


def test_the_pad_of_zero_really_overwrote_slot_zeros_q():
    """The claim of the message, from the speculator itself: sample row 14 stored slot 0's q last."""
    spec = dflash_speculator(dflash_pad_zero)
    for step, slots in enumerate(SCHEDULE[:2]):
        spec.propose(*propose_inputs(spec, slots, step=step))
    record = spec.last_record
    assert record.writes[0].tolist() == [2, 2]  # sample rows 0 and 14 (step 0), 1 and 15 (step 1)
    # Which store landed last is a race on a GPU; in the interpreter and the torch backend, the padded one.
    assert set(record.collisions()) <= {(0, 0, 14, 0), (0, 1, 15, 0)}


def test_missing_name_is_not_solved_yet():
    assert_rejected(ex.check_dflash({}), "`build_sample_mapping` is not defined yet")


@pytest.mark.parametrize("learner", [dflash_pad_zero, dflash_no_pad, dflash_new_tensor, dflash_pad_past_the_slots])
def test_failure_texts_do_not_say_what_to_pad_with(learner):
    # The buffer starts out as vLLM's later hardening leaves it, all -1: the verdict must not quote it.
    result = ex.check_dflash({"build_sample_mapping": learner})
    assert_rejected(result)
    assert "-1" not in repr(result)


def test_a_solved_pad_shows_the_prs_fix_beside_yours():
    result = ex.check_dflash(dflash_fill_first)
    assert_solved(result)
    shown = repr(result)
    assert "sample_idx_mapping[live:] = pad_value" in shown and "return -1 if fix.dflash else 0" in shown
    assert "def dflash_fill_first(" in shown
