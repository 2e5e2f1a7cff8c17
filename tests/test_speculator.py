"""The padded speculator on MECHANICS.md's timeline: 8 live requests, then slot 3 finishes."""

from __future__ import annotations

import pytest
import torch

from labkit.checks import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.kernels.gumbel import gumbel_sample_torch
from labkit.models import encode_context
from labkit.speculator import DFlashSpeculator, FixSwitches, Speculator

M, K = 8, 2


def _inputs(models, slots, step):
    g = torch.Generator().manual_seed(100 + step)
    n = len(slots)
    histories = [torch.randint(1, models.draft.vocab_size, (20,), generator=g).tolist() for _ in slots]
    contexts = encode_context(histories, models.draft.context_len)
    temperature = torch.linspace(0.6, 1.0, M)
    seeds = torch.arange(M, dtype=torch.int64) * 1000 + 7
    positions = torch.full((n,), 20, dtype=torch.int64)
    return torch.tensor(slots, dtype=torch.int32), temperature, seeds, contexts, positions


def _timeline(models, fix, cls=Speculator, **kw):
    spec = cls(models.draft, max_num_reqs=M, num_steps=K, capture_sizes=(1, 2, 4, 8), fix=fix,
               record=True, **kw)
    spec.propose(*_inputs(models, list(range(8)), 0))
    spec.propose(*_inputs(models, [0, 1, 2, 4, 5, 6, 7], 1))
    return spec


def test_buggy_timeline_leaves_slot_7_in_padded_row_7_which_overwrites_row_6s_q(models):
    spec = _timeline(models, FixSwitches.before())
    rec = spec.last_record
    assert (rec.num_reqs, rec.rows) == (7, 8)
    assert rec.mapping.tolist() == [0, 1, 2, 4, 5, 6, 7, 7]
    assert rec.collisions() == [(7, 0, 7, 6), (7, 1, 7, 6)]
    assert int(rec.writes[7, 0]) == 2
    # q of slot 7 is padded row 7's logits, not those row 6 sampled its draft from.
    t7 = float(rec.temperature[7])
    torch.testing.assert_close(rec.draft_logits[7, 0], rec.row_logits[7, 0] / t7, rtol=0, atol=0)
    assert not torch.equal(rec.draft_logits[7, 0], rec.row_logits[6, 0] / t7)


def test_fixed_timeline_marks_padding_minus_one_and_keeps_every_q(models):
    spec = _timeline(models, FixSwitches.after())
    rec = spec.last_record
    assert rec.mapping.tolist() == [0, 1, 2, 4, 5, 6, 7, -1]
    assert rec.collisions() == []
    for row, slot in enumerate(rec.live_slots):
        t = float(rec.temperature[slot])
        torch.testing.assert_close(rec.draft_logits[slot, 1], rec.row_logits[row, 1] / t, rtol=0, atol=0)


def test_mask_without_fill_still_corrupts(models):
    spec = _timeline(models, FixSwitches(fill_padding=False, mask_kernel=True))
    assert spec.last_record.collisions() == [(7, 0, 7, 6), (7, 1, 7, 6)]


def test_fill_without_mask_is_refused_before_the_launch(models):
    with pytest.raises(PaddedSlotOutOfBoundsError, match=r"rows \[7\].*slot -1.*mask"):
        _timeline(models, FixSwitches(fill_padding=True, mask_kernel=False))


def test_eager_mode_has_no_padded_rows(models):
    spec = _timeline(models, FixSwitches.before(), use_graphs=False)
    assert spec.last_record.rows == 7 and spec.last_record.collisions() == []


def test_greedy_drafting_keeps_no_q(models):
    spec = _timeline(models, FixSwitches.before(), probabilistic=False)
    assert spec.draft_logits is None
    assert spec.last_record.collisions() == []


@pytest.mark.parametrize("pad,expect_collision", [(0, True), (-1, False)])
def test_dflash_pad_value(models, pad, expect_collision):
    spec = _timeline(models, FixSwitches(fill_padding=True, mask_kernel=True, dflash_pad=pad), cls=DFlashSpeculator)
    rec = spec.last_record
    assert rec.mapping[7 * K:].tolist() == [pad] * K
    slot0 = [c for c in rec.collisions() if c[0] == 0]
    assert bool(slot0) == expect_collision
    if expect_collision:
        # Padded sample row 7 * K + j is step j of the padded request; it maps to slot 0.
        assert slot0 == [(0, j, 7 * K + j, 0) for j in range(K)]


def test_unsigned_mapping_buffer_is_refused_with_the_reason(models):
    with pytest.raises(LabkitInputError, match="unsigned.*4294967295"):
        Speculator(models.draft, max_num_reqs=M, mapping_dtype=torch.uint32)


def test_too_many_requests_and_bad_slots_are_refused(models):
    spec = Speculator(models.draft, max_num_reqs=4, num_steps=K, capture_sizes=(1, 2, 4))
    with pytest.raises(LabkitInputError, match="above max_num_reqs=4"):
        spec.propose(*_inputs(models, list(range(5)), 0))
    with pytest.raises(LabkitInputError, match="live slots"):
        spec.propose(*_inputs(models, [0, 9], 0))
    with pytest.raises(LabkitInputError, match="future-token heads"):
        DFlashSpeculator(models.draft, num_steps=models.draft.num_future + 1)
    with pytest.raises(LabkitInputError, match="different devices"):
        slots, temperature, seeds, contexts, positions = _inputs(models, [0, 1], 0)
        spec.propose(slots, temperature, seeds, contexts.to("meta"), positions)


def test_own_sample_row_is_the_live_row_or_its_dflash_sample_row(models):
    ar = _timeline(models, FixSwitches.after()).last_record
    assert [ar.own_sample_row(6, step) for step in range(K)] == [6, 6]
    dflash = _timeline(models, FixSwitches.after(), cls=DFlashSpeculator).last_record
    assert [dflash.own_sample_row(6, step) for step in range(K)] == [6 * K, 6 * K + 1]


@pytest.mark.parametrize("cls", [Speculator, DFlashSpeculator])
def test_a_sampler_replaces_gumbel_sample_with_the_same_keywords(models, cls):
    calls = []

    def reference(*args, **kwargs):
        calls.append(sorted(kwargs))
        return gumbel_sample_torch(*args, **kwargs)

    plain = _timeline(models, FixSwitches.after(), cls=cls)
    plugged = _timeline(models, FixSwitches.after(), cls=cls, sampler=reference)
    assert calls and all(c == ["draft_step", "masked", "samples_per_req", "trace"] for c in calls)
    assert torch.equal(plain.draft_tokens, plugged.draft_tokens)
    with pytest.raises(LabkitInputError, match="sampler"):
        cls(models.draft, max_num_reqs=M, num_steps=K, sampler="gumbel")


def test_run_rows_is_the_captured_work(models):
    spec = _timeline(models, FixSwitches.after())
    before = spec.draft_tokens.clone()
    spec.draft_tokens.zero_()
    spec.input_tokens[:7].copy_(_inputs(models, [0, 1, 2, 4, 5, 6, 7], 1)[3])
    spec.positions[:7].fill_(20)
    spec.run_rows(8)
    assert torch.equal(spec.draft_tokens[:7], before[:7]), "one more run of the step drafts the same tokens"
