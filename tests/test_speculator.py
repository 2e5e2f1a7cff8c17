"""The padded speculator on docs/MECHANICS.md's timeline: 8 live requests, then slot 3 finishes.

Runs on the kit's default device (real CUDA graphs under compiled Triton). Where two rows store to
one q the winner is a GPU race, so those tests assert the strict "last row wins" form only where
rows run in order (ORDERED) and otherwise what holds on both: how many rows stored there, and that
q holds values one of them computed. After the fix every live q is stored exactly once, by its own
row, on every backend.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from kernel_cases import DEVICE, ORDERED, Q_TOL, assert_q_from_rows

from labkit import backends
from labkit.config import DrafterConfig, FixSwitches
from labkit.errors import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.kernels.gumbel import gumbel_sample_torch
from labkit.models import encode_context, load_toy_models
from labkit.speculator import DFlashSpeculator, Speculator

M, K = 8, 2
TIMELINE = (tuple(range(8)), (0, 1, 2, 4, 5, 6, 7))
# 8 live, then 5: three padded rows, two of them (6 and 7) keeping slots that live rows 3 and 4 own.
SHRINK = (tuple(range(8)), (0, 1, 3, 6, 7))


@pytest.fixture(scope="module")
def models(models):
    return models if DEVICE.type == "cpu" else load_toy_models(DEVICE)


def _inputs(models, slots, step, m=M):
    g = torch.Generator().manual_seed(100 + step)
    n = len(slots)
    histories = [torch.randint(1, models.draft.vocab_size, (20,), generator=g).tolist() for _ in slots]
    contexts = encode_context(histories, models.draft.context_len)
    temperature = torch.linspace(0.6, 1.0, m)
    seeds = torch.arange(m, dtype=torch.int64) * 1000 + 7
    positions = torch.full((n,), 20, dtype=torch.int64)
    slots = torch.tensor(slots, dtype=torch.int32)
    return tuple(t.to(DEVICE) for t in (slots, temperature, seeds, contexts, positions))


def _config(cls=Speculator, **changes):
    return DrafterConfig(drafter=cls.drafter, k=K, max_num_reqs=M, capture_sizes=(1, 2, 4, 8), **changes)


def _timeline(models, fix, cls=Speculator, schedule=TIMELINE, sampler=None, **changes):
    spec = cls(models.draft, _config(cls, fix=fix, **changes), record=True, sampler=sampler)
    for step, slots in enumerate(schedule):
        spec.propose(*_inputs(models, list(slots), step))
    return spec


def _own_q(rec, row, step):
    """The q live row `row` drew its step-`step` draft from: its own logits over its slot's temperature.

    The record keeps each sample row's logits as row_logits[row, step] for both drafters (DFlash's
    sample row row * k + step included).
    """
    return rec.row_logits[row, step] / float(rec.temperature[rec.live_slots[row]])


def _assert_every_live_q_is_its_own(rec):
    for row, slot in enumerate(rec.live_slots):
        for step in range(K):
            assert int(rec.writes[slot, step]) == 1, f"slot {slot} step {step}: {int(rec.writes[slot, step])} stores"
            torch.testing.assert_close(rec.draft_logits[slot, step], _own_q(rec, row, step), **Q_TOL)
    assert rec.collisions() == []


def test_buggy_timeline_leaves_slot_7_in_padded_row_7_which_collides_with_row_6(models):
    rec = _timeline(models, FixSwitches.before()).last_record
    assert (rec.num_reqs, rec.rows) == (7, 8)
    assert rec.mapping.tolist() == [0, 1, 2, 4, 5, 6, 7, 7]
    assert [int(rec.writes[7, j]) for j in range(K)] == [2, 2], "rows 6 and 7 both stored q[7] at every step"
    t7 = float(rec.temperature[7])
    if ORDERED:
        # Row 7 runs after row 6: slot 7's q is the padded row's logits, not those row 6 drew from.
        assert rec.collisions() == [(7, 0, 7, 6), (7, 1, 7, 6)]
        torch.testing.assert_close(rec.draft_logits[7, 0], rec.row_logits[7, 0] / t7, **Q_TOL)
        assert not torch.equal(rec.draft_logits[7, 0], rec.row_logits[6, 0] / t7)
    else:
        for j in range(K):
            assert_q_from_rows(rec.draft_logits[7, j], [rec.row_logits[6, j] / t7, rec.row_logits[7, j] / t7])
        assert rec.collisions() == [(7, j, 7, 6) for j in range(K) if int(rec.writer[7, j]) == 7]


def test_fixed_timeline_marks_padding_minus_one_and_keeps_every_q(models):
    rec = _timeline(models, FixSwitches.after()).last_record
    assert rec.mapping.tolist() == [0, 1, 2, 4, 5, 6, 7, -1]
    _assert_every_live_q_is_its_own(rec)


@pytest.mark.parametrize("fix,collided", [(FixSwitches.before(), [6, 7]), (FixSwitches.after(), [])])
def test_every_padded_row_is_filled_when_the_batch_shrinks_by_three(models, fix, collided):
    rec = _timeline(models, fix, schedule=SHRINK).last_record
    assert rec.mapping[5:].tolist() == ([5, 6, 7] if collided else [-1, -1, -1])
    for slot in (6, 7):
        assert [int(rec.writes[slot, j]) for j in range(K)] == [2 if collided else 1] * K
    if not collided:
        _assert_every_live_q_is_its_own(rec)
    elif ORDERED:
        assert rec.collisions() == [(slot, j, slot, rec.live_slots.index(slot)) for slot in (6, 7) for j in range(K)]


def test_mask_without_fill_still_corrupts(models):
    rec = _timeline(models, FixSwitches(host=False, kernel=True)).last_record
    assert [int(rec.writes[7, j]) for j in range(K)] == [2, 2]
    if ORDERED:
        assert rec.collisions() == [(7, 0, 7, 6), (7, 1, 7, 6)]


def test_fill_without_mask_is_refused_before_the_launch(models):
    with pytest.raises(PaddedSlotOutOfBoundsError, match=r"rows \[7\].*slot -1.*mask"):
        _timeline(models, FixSwitches(host=True, kernel=False))


def test_eager_mode_has_no_padded_rows(models):
    rec = _timeline(models, FixSwitches.before(), use_graphs=False).last_record
    assert rec.rows == 7
    _assert_every_live_q_is_its_own(rec)


def test_greedy_drafting_keeps_no_q(models):
    spec = _timeline(models, FixSwitches.before(), probabilistic=False)
    assert spec.draft_logits is None
    assert spec.last_record.collisions() == []


@pytest.mark.parametrize("pad", [0, -1])
def test_dflash_pad_value(models, pad):
    spec = _timeline(models, FixSwitches(host=True, kernel=True, dflash=pad == -1), cls=DFlashSpeculator)
    rec = spec.last_record
    assert rec.mapping[7 * K:].tolist() == [pad] * K
    if pad == -1:
        _assert_every_live_q_is_its_own(rec)
        return
    # Padded sample row 7 * K + j is step j of the padded request; it maps to slot 0, which row 0 owns.
    assert [int(rec.writes[0, j]) for j in range(K)] == [2] * K
    if ORDERED:
        assert [c for c in rec.collisions() if c[0] == 0] == [(0, j, 7 * K + j, 0) for j in range(K)]


def test_dflash_fixed_by_default(models):
    rec = _timeline(models, FixSwitches.after(), cls=DFlashSpeculator).last_record
    _assert_every_live_q_is_its_own(rec)
    assert rec.mapping[7 * K:].tolist() == [-1] * K


def test_unsigned_mapping_buffer_is_refused_with_the_reason(models):
    with pytest.raises(LabkitInputError, match="unsigned.*4294967295"):
        Speculator(models.draft, DrafterConfig(max_num_reqs=M), mapping_dtype=torch.uint32)


def test_too_many_requests_and_bad_slots_are_refused(models):
    spec = Speculator(models.draft, DrafterConfig(max_num_reqs=4, k=K, capture_sizes=(1, 2, 4)))
    with pytest.raises(LabkitInputError, match="above max_num_reqs=4"):
        spec.propose(*_inputs(models, list(range(5)), 0, m=4))
    with pytest.raises(LabkitInputError, match=r"live slots must lie in \[0, 4\); row 1 holds slot 9"):
        spec.propose(*_inputs(models, [0, 9], 0, m=4))
    with pytest.raises(LabkitInputError, match="future-token heads"):
        DFlashSpeculator(models.draft, DrafterConfig(drafter="dflash", k=models.draft.num_future + 1))
    slots, temperature, seeds, contexts, positions = _inputs(models, [0, 1], 0, m=4)
    with pytest.raises(LabkitInputError, match="different devices"):
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

    # The torch reference reads values back row by row, which a real CUDA graph cannot capture:
    # on a GPU both runs use the torch backend (graphs emulated), elsewhere the kit's kernel runs.
    with backends.using_backend("torch") if DEVICE.type == "cuda" else contextlib.nullcontext():
        plain = _timeline(models, FixSwitches.after(), cls=cls)
        plugged = _timeline(models, FixSwitches.after(), cls=cls, sampler=reference)
    assert calls and all(c == ["draft_step", "masked", "samples_per_req", "trace"] for c in calls)
    assert torch.equal(plain.draft_tokens, plugged.draft_tokens)
    with pytest.raises(LabkitInputError, match="sampler"):
        cls(models.draft, _config(cls), sampler="gumbel")


def test_run_rows_is_the_captured_work(models):
    spec = _timeline(models, FixSwitches.after())
    before = spec.draft_tokens.clone()
    spec.draft_tokens.zero_()
    spec.input_tokens[:7].copy_(_inputs(models, list(TIMELINE[1]), 1)[3])
    spec.positions[:7].fill_(20)
    spec.run_rows(8)
    assert torch.equal(spec.draft_tokens[:7], before[:7]), "one more run of the step drafts the same tokens"
    graph = spec.runner.graph_for(8, spec.run_rows)
    spec.draft_tokens.zero_()
    spec.input_tokens[:7].copy_(_inputs(models, list(TIMELINE[1]), 1)[3])
    spec.positions[:7].fill_(20)
    graph.replay()
    assert torch.equal(spec.draft_tokens[:7], before[:7]), "a replay of the captured graph drafts them too"


@pytest.mark.parametrize("cls", [Speculator, DFlashSpeculator])
def test_fill_without_mask_is_refused_on_the_host_before_any_launch(models, cls):
    """Under a real CUDA graph the kernel's own checks never run (nothing is read back during a
    replay), so the speculator must refuse -1 padding with an unmasked kernel before launching."""
    launches = []

    def counting(*args, **kwargs):
        launches.append(kwargs["draft_step"])
        return gumbel_sample_torch(*args, **kwargs)

    fill_only = FixSwitches(host=True, kernel=False, dflash=True)
    with backends.using_backend("torch"):  # host logic under test; the reference sampler is not capturable
        spec = cls(models.draft, _config(cls, fix=fill_only), sampler=counting)
        spec.propose(*_inputs(models, list(TIMELINE[0]), 0))  # 8 live rows: no padding, nothing to refuse
        launches.clear()
        with pytest.raises(PaddedSlotOutOfBoundsError):
            spec.propose(*_inputs(models, list(TIMELINE[1]), 1))  # 7 live rows padded to 8
    assert launches == [], "the unmasked kernel was launched on a -1 row before anything refused"


@pytest.mark.parametrize("cls", [Speculator, DFlashSpeculator])
@pytest.mark.parametrize("use_graphs", [False, True])
def test_drafting_reads_no_value_back_inside_the_k_launches(models, monkeypatch, cls, use_graphs):
    """The inputs are checked once per step where they enter (copy-in), the weights
    once when the speculator is built; none of the k sampling launches checks values, and nothing
    is checked after drafting (on a GPU each would be a host sync). tests/test_gpu.py runs the same
    step on a GPU with synchronisation turned into an error."""
    import labkit.checks as checks
    import labkit.kernels.gumbel as gumbel

    value_checks, nan_checks = [], []
    real_values, real_nan = gumbel.check_values, checks.check_no_nan
    monkeypatch.setattr(gumbel, "check_values", lambda *a, **kw: value_checks.append(1) or real_values(*a, **kw))
    monkeypatch.setattr(checks, "check_no_nan", lambda *a, **kw: nan_checks.append(1) or real_nan(*a, **kw))
    k = 2 if cls is DFlashSpeculator else 4
    config = DrafterConfig(drafter=cls.drafter, k=k, max_num_reqs=M, capture_sizes=(1, 2, 4, 8),
                           use_graphs=use_graphs)
    spec = cls(models.draft, config)
    for step, slots in enumerate(TIMELINE):
        spec.propose(*_inputs(models, list(slots), step))
    assert value_checks == [] and nan_checks == []
