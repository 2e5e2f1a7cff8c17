"""Exercise (a), the host-side fill: answers written as a learner would, run through the checker.

Right answers must be accepted, whatever their form; wrong ones rejected with a reason that is
true of what the padded graph did.
"""

from __future__ import annotations

import pytest
import torch
from workshop_helpers import assert_rejected, assert_solved, kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: chooses the backend)
from labkit.bench.scenario import propose_inputs
from labkit.workshop import checkers as ex
from labkit.workshop.exercises.host_mapping import FILL, fill_speculator
from labkit.workshop.exercises.kept_code import answers_folder
from labkit.workshop.harness.host_steps import SCHEDULE

# ---------------------------------------------------------------------------------------- right


def fill_right(idx_mapping, slots):
    num_reqs = slots.numel()
    idx_mapping[:num_reqs] = slots
    idx_mapping[num_reqs:] = -1


def fill_first_then_copy(idx_mapping, slots):
    idx_mapping.fill_(-1)
    idx_mapping[: len(slots)].copy_(slots)


def fill_up_to_the_graph(idx_mapping, slots):
    # Only the rows this step's graph reads (capture sizes 1, 2, 4, 8: the next power of two).
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n: 1 << (n - 1).bit_length()] = -1


def fill_with_a_loop(idx_mapping, slots):
    for row in range(len(idx_mapping)):
        idx_mapping[row] = slots[row] if row < len(slots) else -1


def fill_with_where(idx_mapping, slots):
    rows = torch.arange(len(idx_mapping), device=slots.device)
    padded = torch.cat([slots, slots.new_zeros(len(idx_mapping) - len(slots))])
    idx_mapping.copy_(torch.where(rows < len(slots), padded, -1))


def fill_minus_two(idx_mapping, slots):
    idx_mapping[: len(slots)] = slots
    idx_mapping[len(slots):] = -2


@pytest.mark.parametrize("learner", [fill_right, fill_first_then_copy, fill_up_to_the_graph, fill_with_a_loop,
                                     fill_with_where])
def test_every_right_fill_is_accepted(learner):
    result = ex.check_mapping(learner)
    assert_solved(result)
    assert result.warnings == []


def test_a_namespace_is_searched_for_the_function():
    assert_solved(ex.check_mapping({"copy_idx_mapping": fill_right}))


def test_a_negative_value_other_than_minus_one_is_accepted_with_a_warning():
    result = ex.check_mapping(fill_minus_two)
    assert_solved(result)
    assert len(result.warnings) == 1 and "-2" in result.warnings[0] and "-1" in result.warnings[0]
    assert "mask" not in result.warnings[0] and "skip" not in result.warnings[0]  # (b) comes after (a)
    assert "Warning:" in repr(result)


# ---------------------------------------------------------------------------------------- wrong


def fill_nothing(idx_mapping, slots):  # the notebook's skeleton: vLLM before the PR
    idx_mapping[: slots.numel()] = slots


def fill_zero(idx_mapping, slots):
    idx_mapping[: slots.numel()] = slots
    idx_mapping[slots.numel():] = 0


def fill_one_row(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    if n < len(idx_mapping):
        idx_mapping[n] = -1


def fill_off_by_one(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n + 1:] = -1


def make_fill_only_when_shrinking():
    seen = {}

    def fill_when_shrinking(idx_mapping, slots):
        n = slots.numel()
        idx_mapping[:n] = slots
        if "n" in seen and n < seen["n"]:
            idx_mapping[n:] = -1
        seen["n"] = n

    return fill_when_shrinking


def fill_new_tensor(idx_mapping, slots):
    n = slots.numel()
    idx_mapping = torch.cat([slots, torch.full((len(idx_mapping) - n,), -1, dtype=slots.dtype, device=slots.device)])
    return idx_mapping


def fill_past_the_slots(idx_mapping, slots):
    idx_mapping[: slots.numel()] = slots
    idx_mapping[slots.numel():] = len(idx_mapping)


def fill_wrong_size(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    idx_mapping[n:] = torch.full((3,), -1, device=slots.device)


def fill_sorted(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots.sort().values
    idx_mapping[n:] = -1


def fill_with_a_free_slot(idx_mapping, slots):
    n = slots.numel()
    idx_mapping[:n] = slots
    free = [s for s in range(len(idx_mapping)) if s not in slots.tolist()]
    if free:
        idx_mapping[n:] = free[0]


@pytest.mark.parametrize("learner,fragments", [
    (fill_zero, ["At step 1", "padded row 7 holds 0", "request slot 0", "draft_logits[0, 0 and 1]",
                 "the q of live row 0"]),
    (fill_one_row, ["At step 2", "padded row 6 still holds slot 7", "the q of live row 4"]),
    (fill_off_by_one, ["At step 1", "padded row 7 still holds slot 7", "the q of live row 6"]),
    (make_fill_only_when_shrinking(), ["On a fresh speculator", "holds slot 0 (the buffer starts as zeros",
                                       "the q of live row 0"]),
    (fill_new_tensor, ["did not change at all", "returned a tensor", "the argument's name"]),
    (fill_past_the_slots, ["holds 8, which is no slot at all", "stopped before the launch"]),
    (fill_wrong_size, ["raised RuntimeError at line 4 of `fill_wrong_size`", "torch.full((3,), -1"]),
    (fill_sorted, ["At step 3", "Row 0 is a live row, whose request holds slot 6, but it maps to 1"]),
    (fill_with_a_free_slot, ["At step 1", "padded row 7 ran through the kernel holding slot 3",
                             "no live request owns this step"]),
])
def test_wrong_fills_are_rejected_with_a_true_reason(learner, fragments):
    assert_rejected(ex.check_mapping(learner), *fragments)


def test_the_untouched_exercise_first_names_the_symptom_not_the_fix():
    result = ex.check_mapping(fill_nothing)
    assert_rejected(result, "At step 1 of the timeline", "padded row 7 still holds slot 7",
                    "draft_logits[7, 0 and 1]: the q of live row 6")
    assert "-1" not in result.message  # the fix appears only in the last hint
    assert "-1" in repr(ex.hint("a", 3)) and "-1" not in repr(ex.hint("a", 1))


def test_the_claims_of_the_message_are_what_the_speculator_did():
    """Step 1 of the timeline with the skeleton: row 7 really wrote slot 7's q, and it is not eager's."""
    spec = fill_speculator(fill_nothing)
    for step, slots in enumerate(SCHEDULE[:2]):
        spec.propose(*propose_inputs(spec, slots, step=step))
    record = spec.last_record
    assert record.mapping.tolist() == [0, 1, 2, 4, 5, 6, 7, 7]
    assert record.writes[7].tolist() == [2, 2]  # rows 6 and 7 both stored slot 7's q, at both draft steps
    # Which store landed last is a race on a GPU; in the interpreter and the torch backend, row 7's.
    assert {(slot, w, live) for slot, _, w, live in record.collisions()} <= {(7, 7, 6)}
    assert FILL.buffer == "idx_mapping"


def test_missing_or_odd_names_are_not_solved_yet_and_do_not_raise():
    assert_rejected(ex.check_mapping({}), "`copy_idx_mapping` is not defined yet")
    assert_rejected(ex.check_mapping(None), "not defined yet")
    assert_rejected(ex.check_mapping({"copy_idx_mapping": 3}), "should be a function")


def fill_shifted(idx_mapping, slots):  # a live row ends up with a negative slot
    idx_mapping[: slots.numel()] = slots - 1
    idx_mapping[slots.numel():] = -1


@pytest.mark.parametrize("learner", [fill_nothing, fill_zero, fill_past_the_slots, fill_with_a_free_slot,
                                     fill_new_tensor, make_fill_only_when_shrinking()])
def test_failure_texts_do_not_name_the_fill(learner):
    """Until (a) is solved its verdict shows the symptom only (learners who wrote -1 themselves see theirs)."""
    result = ex.check_mapping({"copy_idx_mapping": learner})
    assert_rejected(result)
    assert "-1" not in repr(result) and "fill" not in repr(result).lower()
    assert result.reveal is None and result.launch is None


def test_a_negative_live_slot_is_explained_without_exercise_bs_answer():
    result = ex.check_mapping(fill_shifted)
    assert_rejected(result, "Row 0 is a live row", "the kernel took it for a padded row")
    assert "mask" not in result.message


def test_a_solved_fill_shows_the_prs_fix_beside_your_fill_and_keeps_it():
    kept = answers_folder()  # this test's own folder: workshop_helpers.kept_answers
    result = ex.check_mapping({"copy_idx_mapping": fill_first_then_copy})
    assert_solved(result)
    shown = repr(result)
    assert "Speculator.copy_idx_mapping" in shown and "self.idx_mapping[num_reqs:].fill_(-1)" in shown
    assert "def fill_first_then_copy(" in shown and "idx_mapping.fill_(-1)" in shown
    page = result._repr_html_()
    assert "The PR's fix" in page
    assert page.count("<td") == 2
    text = (kept / "a.py").read_text()
    assert text.splitlines()[0] == ("# labkit answer: exercise=a name=copy_idx_mapping variant=torch "
                                    "verdict=solved")
    assert "def fill_first_then_copy(" in text
