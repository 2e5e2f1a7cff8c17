"""Exercise (b) for a machine without Triton: the sampling step as a torch function, same checks.

``gumbel_rows(logits, idx_mapping, temperature, seeds, positions, q, salt) -> tokens`` gets
temperature, seeds and q as guarded buffers that index like pointers: index -1 is the memory just
before the buffer, as `ptr + slot` is in the kernel, not Python's last element.
"""

from __future__ import annotations

import pytest
import torch
from workshop_helpers import (
    assert_draws_the_launch,
    assert_rejected,
    assert_solved,
    kept_answers,  # noqa: F401 (autouse)
)

import labkit  # noqa: F401
from labkit import backends
from labkit.kernels.noise import gumbel_torch, row_key_torch
from labkit.workshop import checkers as ex
from labkit.workshop.harness.launches import kernel_case, launch_torch

# ---------------------------------------------------------------------------------------- right


def rows_skip_padded(logits, idx_mapping, temperature, seeds, positions, q, salt):
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    vocab_index = torch.arange(logits.shape[1])
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        if slot < 0:
            continue  # a padded row: its result is thrown away
        temp = float(temperature[slot])
        scaled = logits[row] / temp if temp != 0.0 else logits[row]
        q[slot] = scaled
        scores = scaled
        if temp != 0.0:
            key = row_key_torch(seeds[slot], positions[row], salt)
            scores = scaled + gumbel_torch(key, vocab_index)
        tokens[row] = scores.argmax()
    return tokens


def rows_vectorised(logits, idx_mapping, temperature, seeds, positions, q, salt):
    valid = idx_mapping >= 0
    safe = idx_mapping.clamp(min=0).long()
    temp = torch.where(valid, temperature[safe], 0.0)
    hot = temp != 0
    scaled = torch.where(hot[:, None], logits / torch.where(hot, temp, 1.0)[:, None], logits)
    key = row_key_torch(torch.where(valid, seeds[safe], 0), positions, salt)
    noise = gumbel_torch(key[:, None], torch.arange(logits.shape[1])[None, :])
    q[idx_mapping[valid].long()] = scaled[valid]
    return torch.where(hot[:, None], scaled + noise, scaled).argmax(dim=1)


def rows_guarded(logits, idx_mapping, temperature, seeds, positions, q, salt):
    tokens = []
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        temp = temperature[slot] if slot >= 0 else torch.tensor(1.0)
        seed = seeds[slot] if slot >= 0 else torch.tensor(0)
        scaled = logits[row] / temp if temp != 0 else logits[row]
        if slot >= 0:
            q[slot].copy_(scaled)
        noise = gumbel_torch(row_key_torch(seed, positions[row], salt), torch.arange(logits.shape[1]))
        tokens.append(int((scaled + noise).argmax()) if temp != 0 else int(scaled.argmax()))
    return tokens


@pytest.mark.parametrize("learner", [rows_skip_padded, rows_vectorised, rows_guarded])
def test_every_way_of_skipping_padded_rows_is_accepted(learner):
    assert_solved(ex.check_kernel(learner))


# ---------------------------------------------------------------------------------------- wrong


def rows_untouched(logits, idx_mapping, temperature, seeds, positions, q, salt):  # the torch skeleton
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    vocab_index = torch.arange(logits.shape[1])
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        temp = float(temperature[slot])
        seed = seeds[slot]
        scaled = logits[row] / temp if temp != 0.0 else logits[row]
        q[slot] = scaled  # q, indexed by slot
        scores = scaled
        if temp != 0.0:
            scores = scaled + gumbel_torch(row_key_torch(seed, positions[row], salt), vocab_index)
        tokens[row] = scores.argmax()
    return tokens


def rows_select_after_reading(logits, idx_mapping, temperature, seeds, positions, q, salt):
    valid = idx_mapping >= 0
    temp = torch.where(valid, temperature[idx_mapping.long()], 0.0)  # the read went through -1
    hot = temp != 0
    scaled = torch.where(hot[:, None], logits / torch.where(hot, temp, 1.0)[:, None], logits)
    key = row_key_torch(seeds[idx_mapping.clamp(min=0).long()], positions, salt)
    noise = gumbel_torch(key[:, None], torch.arange(logits.shape[1])[None, :])
    q[idx_mapping[valid].long()] = scaled[valid]
    return torch.where(hot[:, None], scaled + noise, scaled).argmax(dim=1)


def rows_store_guard_only(logits, idx_mapping, temperature, seeds, positions, q, salt):
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        temp = float(temperature[slot])
        scaled = logits[row] / temp if temp != 0.0 else logits[row]
        if slot >= 0:
            q[slot] = scaled
        scores = scaled
        if temp != 0.0 and slot >= 0:
            scores = scaled + gumbel_torch(row_key_torch(seeds[slot], positions[row], salt),
                                           torch.arange(logits.shape[1]))
        tokens[row] = scores.argmax()
    return tokens


def rows_slot_above_zero(logits, idx_mapping, temperature, seeds, positions, q, salt):
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        if slot <= 0:
            continue
        temp = float(temperature[slot])
        scaled = logits[row] / temp if temp != 0.0 else logits[row]
        q[slot] = scaled
        scores = scaled + gumbel_torch(row_key_torch(seeds[slot], positions[row], salt),
                                       torch.arange(logits.shape[1])) if temp != 0.0 else scaled
        tokens[row] = scores.argmax()
    return tokens


def rows_forgets_tokens(logits, idx_mapping, temperature, seeds, positions, q, salt):
    for row in range(logits.shape[0]):
        slot = int(idx_mapping[row])
        if slot >= 0:
            temp = float(temperature[slot])
            q[slot] = logits[row] / temp if temp != 0.0 else logits[row]


def rows_clamp_to_zero(logits, idx_mapping, temperature, seeds, positions, q, salt):
    # In bounds, but a padded row reads and stores as slot 0.
    tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
    vocab_index = torch.arange(logits.shape[1])
    for row in range(logits.shape[0]):
        slot = max(int(idx_mapping[row]), 0)
        temp = float(temperature[slot])
        scaled = logits[row] / temp if temp != 0.0 else logits[row]
        q[slot] = scaled
        scores = scaled
        if temp != 0.0:
            scores = scaled + gumbel_torch(row_key_torch(seeds[slot], positions[row], salt), vocab_index)
        tokens[row] = scores.argmax()
    return tokens


def rows_python_wraparound(logits, idx_mapping, temperature, seeds, positions, q, salt):
    # Index -1 "as Python would": the last slot. The padded row then stores into live slot 7's q.
    slots = idx_mapping.long() % len(temperature)
    temp = temperature[slots]
    hot = temp != 0
    scaled = torch.where(hot[:, None], logits / torch.where(hot, temp, 1.0)[:, None], logits)
    noise = gumbel_torch(row_key_torch(seeds[slots], positions, salt)[:, None], torch.arange(logits.shape[1])[None, :])
    for row in range(logits.shape[0]):
        q[int(slots[row])] = scaled[row]
    return torch.where(hot[:, None], scaled + noise, scaled).argmax(dim=1)


@pytest.mark.parametrize("learner,fragments", [
    (rows_select_after_reading, ["Launch 1", "padded row 7 (slot -1) read temperature[-1]"]),
    (rows_store_guard_only, ["padded row 7 (slot -1) read temperature[-1]"]),
    (rows_slot_above_zero, ["live row 0 holds slot 0, but nothing was stored into draft_logits[0]"]),
    (rows_forgets_tokens, ["live row 0 (slot 0) wrote no token"]),
    (rows_python_wraparound, ["live row 6's q (draft_logits[7]) holds padded row 7's logits"]),
    (rows_clamp_to_zero, ["live row 0's q (draft_logits[0]) holds padded row 7's logits",
                          "padded row 7 (slot -1) stored into draft_logits[0] after live row 0 did"]),
])
def test_wrong_functions_are_rejected_with_a_true_reason(learner, fragments):
    assert_rejected(ex.check_kernel(learner), *fragments)


def test_the_untouched_function_first_names_the_symptom():
    result = ex.check_kernel(rows_untouched)
    assert_rejected(result, "padded row", "(slot -1) read temperature[-1] and seeds[-1] and stored into "
                    "draft_logits[-1]")
    assert "continue" not in result.message and "clamp" not in result.message


def test_a_failed_check_draws_your_function_row_by_row():
    """A torch function has no program id: the replay, one row at a time, tells which row read the guards."""
    result = ex.check_kernel({"gumbel_rows": rows_untouched})
    assert result.launch.hits == ["row 7 (slot -1) read temperature[-1]", "row 7 (slot -1) read seeds[-1]",
                                  "row 7 (slot -1) stored into draft_logits[-1]"]
    assert result.launch.stores[7] == [-1] and result.launch.stores[6] == [7]
    assert_draws_the_launch(result, "Your gumbel_rows, launch 1 of 3", "slot -1 (guard)",
                            "last writer of draft_logits[slot, step]", "row 6", *result.launch.hits)


def test_the_drawn_launch_names_the_overwritten_q():
    # -1 taken as Python's last element: padded row 7 stores into live slot 7's q, after row 6.
    result = ex.check_kernel({"gumbel_rows": rows_python_wraparound})
    assert result.launch.stores[7] == [7] and result.launch.hits == []
    assert_draws_the_launch(result, "draft_logits[7]: OVERWRITTEN by padded row 7",
                            "q of a live request, last written by a padded row")  # the red cell's legend


def test_a_solved_function_shows_the_prs_fix_beside_yours():
    result = ex.check_kernel(rows_vectorised)
    assert_solved(result)
    assert "gumbel_sample_torch" in result.reveal.fix.where and "continue" in result.reveal.fix.text
    assert "def rows_vectorised(" in repr(result)


def test_guarded_buffers_index_like_pointers():
    """temperature[-1] is the guard before the buffer, logged; the buffer's own last slot is untouched."""
    case = kernel_case(0, "cpu")
    seen = {}

    def peek(logits, idx_mapping, temperature, seeds, positions, q, salt):
        seen["minus_one"] = float(temperature[-1])
        seen["last"] = float(temperature[7])
        q[-1] = torch.zeros(logits.shape[1])
        return torch.zeros(logits.shape[0], dtype=torch.int64)

    outcome = launch_torch(peek, case)
    assert seen["minus_one"] != seen["last"] == float(case.temperature[7])
    assert [(a.kind, a.buffer, a.index) for a in outcome.reads] == [("load", "temperature", -1)]
    assert outcome.q_guard_rows_written == [-1]


def test_a_kernel_shaped_function_without_triton_asks_for_the_torch_version(monkeypatch):
    monkeypatch.setattr(backends, "HAS_TRITON", False)

    def gumbel_kernel(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                      vocab_size, salt, BLOCK_V):
        pass

    assert_rejected(ex.check_kernel(gumbel_kernel), "Triton cannot run on this machine", "gumbel_rows")
    assert "torch version" in repr(ex.hint("b", 1))
    # Without Triton the namespace is searched for the torch version first.
    assert_solved(ex.check_kernel({"gumbel_kernel": gumbel_kernel, "gumbel_rows": rows_skip_padded}))
