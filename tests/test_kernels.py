"""Kernels against their torch references on randomized inputs, in whichever backend is active.

Run under two Triton versions in CI (the pinned one and 3.9) to catch interpreter differences such
as 3.9's stricter mask dtypes.
"""

from __future__ import annotations

import pytest
import torch

from labkit import backends
from labkit.checks import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.kernels import (
    WriteTrace,
    gumbel_sample,
    gumbel_sample_torch,
    prepare_dflash_sample_mapping,
    rejection_sample,
    rejection_sample_torch,
)
from labkit.kernels.noise import row_key_torch, uniform_torch

KERNEL_BACKEND = "interpreter" if backends.KERNELS_INTERPRETED else backends.backend()
DEVICE = "cuda" if KERNEL_BACKEND == "triton" else "cpu"


def _case(seed, num_rows, vocab, max_num_reqs=12, k=3, padded=0, stale=False, greedy_slots=()):
    """Random launch inputs; the last `padded` rows are padding (-1, or a stale live slot)."""
    g = torch.Generator().manual_seed(seed)
    live = num_rows - padded
    slots = torch.randperm(max_num_reqs, generator=g)[:live].to(torch.int32)
    if stale and live:
        pad = slots[torch.randint(0, live, (padded,), generator=g)]
    else:
        pad = torch.full((padded,), -1, dtype=torch.int32)
    mapping = torch.cat([slots, pad]).to(DEVICE)
    temperature = (0.5 + torch.rand(max_num_reqs, generator=g)).to(DEVICE)
    for s in greedy_slots:
        temperature[s] = 0.0
    seeds = torch.randint(0, 2**62, (max_num_reqs,), generator=g).to(DEVICE)
    logits = (3 * torch.randn(num_rows, vocab, generator=g)).to(DEVICE)
    positions = torch.randint(0, 5000, (num_rows,), generator=g).to(DEVICE)
    return logits, mapping, temperature, seeds, positions


@pytest.mark.parametrize("vocab", [31, 1000, 1500, 2049])
@pytest.mark.parametrize("padded,stale", [(0, False), (3, False), (3, True)])
@pytest.mark.parametrize("seed", [0, 1])
def test_gumbel_kernel_matches_torch_reference(vocab, padded, stale, seed):
    num_rows, M, k = 7, 12, 3
    logits, mapping, temperature, seeds, positions = _case(seed, num_rows, vocab, M, k, padded, stale,
                                                           greedy_slots=(0, 5))
    # An unmasked launch may only meet stale (>= 0) slots; otherwise try both variants.
    masked = True if padded and not stale else (seed == 0)
    outs = []
    for backend in (KERNEL_BACKEND, "torch"):
        q = torch.full((M, k, vocab), 7.0, device=DEVICE)
        trace = WriteTrace.empty(M, k, DEVICE)
        tokens = gumbel_sample(logits, mapping, temperature, seeds, positions, q, draft_step=1, masked=masked,
                               trace=trace, block_v=512 if vocab > 512 else None, backend=backend)
        outs.append((tokens.cpu(), q.cpu(), trace.writer.cpu(), trace.writes.cpu()))
    (t_k, q_k, w_k, n_k), (t_t, q_t, w_t, n_t) = outs
    assert torch.equal(t_k, t_t)
    torch.testing.assert_close(q_k, q_t, rtol=1e-6, atol=0)
    assert torch.equal(w_k, w_t) and torch.equal(n_k, n_t)
    # Untouched q entries keep their value: nothing stored outside the rows' own slots and step.
    stored = set(int(s) for s in mapping.tolist() if s >= 0)
    for slot in range(M):
        if slot not in stored:
            assert torch.all(q_k[slot] == 7.0)
    assert torch.all(q_k[:, 0] == 7.0) and torch.all(q_k[:, 2] == 7.0)


def test_gumbel_greedy_rows_take_the_argmax_and_store_unscaled_logits():
    logits, mapping, temperature, seeds, positions = _case(3, 5, 300, greedy_slots=range(12))
    q = torch.zeros(12, 1, 300, device=DEVICE)
    tokens = gumbel_sample(logits, mapping, temperature, seeds, positions, q, draft_step=0)
    assert torch.equal(tokens.cpu(), logits.argmax(dim=1).cpu())
    torch.testing.assert_close(q[mapping.long(), 0].cpu(), logits.cpu(), rtol=0, atol=0)


def test_gumbel_sample_is_distributed_as_softmax():
    """Gumbel-max over many seeds reproduces softmax(logits / T) (chi-square-free, a loose TV bound)."""
    vocab, n = 6, 4000
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]]).repeat(n, 1).to(DEVICE)
    temperature = torch.tensor([0.7], device=DEVICE).repeat(n)
    seeds = torch.arange(n, device=DEVICE)
    mapping = torch.arange(n, dtype=torch.int32, device=DEVICE)
    positions = torch.zeros(n, dtype=torch.int64, device=DEVICE)
    tokens = gumbel_sample(logits, mapping, temperature, seeds, positions, None, backend="torch")
    freq = torch.bincount(tokens.cpu(), minlength=vocab).float() / n
    p = torch.softmax(logits[0].cpu() / 0.7, dim=0)
    assert 0.5 * (freq - p).abs().sum() < 0.03


def test_stale_padded_row_overwrites_the_live_rows_q_and_the_mask_does_not_help():
    """Row 3 is padding holding slot 7, which live row 2 owns: the later row's logits win."""
    logits, _, temperature, seeds, positions = _case(4, 4, 50)
    mapping = torch.tensor([1, 4, 7, 7], dtype=torch.int32, device=DEVICE)
    for masked in (False, True):
        q = torch.zeros(12, 1, 50, device=DEVICE)
        trace = WriteTrace.empty(12, 1, DEVICE)
        gumbel_sample(logits, mapping, temperature, seeds, positions, q, masked=masked, trace=trace)
        torch.testing.assert_close(q[7, 0].cpu(), (logits[3] / temperature[7]).cpu(), rtol=0, atol=0)
        assert int(trace.writer[7, 0]) == 3 and int(trace.writes[7, 0]) == 2


def test_unmasked_kernel_refuses_slot_minus_one_with_an_explanation():
    logits, mapping, temperature, seeds, positions = _case(5, 6, 40, padded=2)
    q = torch.zeros(12, 3, 40, device=DEVICE)
    for backend in (KERNEL_BACKEND, "torch"):
        with pytest.raises(PaddedSlotOutOfBoundsError, match=r"rows \[4, 5\].*out-of-bounds.*mask"):
            gumbel_sample(logits, mapping, temperature, seeds, positions, q, masked=False, backend=backend)
    with pytest.raises(PaddedSlotOutOfBoundsError):
        gumbel_sample_torch(logits, mapping, temperature, seeds, positions, q, masked=False)
    assert torch.all(q == 0), "nothing may be written before refusing"


def test_masked_kernel_skips_padded_rows_entirely():
    logits, mapping, temperature, seeds, positions = _case(6, 6, 40, padded=3)
    q = torch.full((12, 3, 40), 5.0, device=DEVICE)
    gumbel_sample(logits, mapping, temperature, seeds, positions, q, draft_step=2)
    live = mapping[:3].long()
    assert torch.all(q[live, 2] != 5.0)
    untouched = torch.ones(12, dtype=torch.bool)
    untouched[live.cpu()] = False
    assert torch.all(q.cpu()[untouched] == 5.0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint32, torch.float32])
def test_mapping_dtype_must_be_signed_integer(dtype):
    logits, mapping, temperature, seeds, positions = _case(7, 3, 20)
    with pytest.raises(LabkitInputError, match="signed" if dtype != torch.float32 else "signed integer"):
        gumbel_sample(logits, mapping.to(dtype), temperature, seeds, positions, None)


def test_uint32_message_explains_the_wraparound():
    logits, mapping, temperature, seeds, positions = _case(7, 3, 20)
    with pytest.raises(LabkitInputError, match="4294967295"):
        gumbel_sample(logits, mapping.to(torch.uint32), temperature, seeds, positions, None)


def test_bad_shapes_and_slots_are_refused():
    logits, mapping, temperature, seeds, positions = _case(8, 4, 20)
    with pytest.raises(LabkitInputError, match="vocab"):
        gumbel_sample(logits, mapping, temperature, seeds, positions, torch.zeros(12, 2, 21, device=DEVICE))
    with pytest.raises(LabkitInputError, match="do not fit"):
        gumbel_sample(logits, mapping, temperature, seeds, positions, torch.zeros(12, 2, 20, device=DEVICE),
                      draft_step=2)
    big = mapping.clone()
    big[0] = 12
    with pytest.raises(LabkitInputError, match="max_num_reqs"):
        gumbel_sample(logits, big, temperature, seeds, positions, None)
    with pytest.raises(LabkitInputError, match="early_exit"):
        gumbel_sample(logits, mapping, temperature, seeds, positions, None, masked=False, early_exit=True)


def test_tensors_on_different_devices_are_refused():
    logits, mapping, temperature, seeds, positions = _case(9, 4, 20)
    with pytest.raises(LabkitInputError, match="different devices"):
        gumbel_sample(logits, mapping, temperature, seeds, positions.to("meta"), None)


@pytest.mark.parametrize("pad_value", [0, -1])
@pytest.mark.parametrize("num_reqs", [0, 1, 5, 8])
def test_dflash_prepare_matches_reference(pad_value, num_reqs):
    M, k = 8, 3
    g = torch.Generator().manual_seed(num_reqs)
    mapping = torch.randperm(M, generator=g).to(torch.int32).to(DEVICE)
    positions = torch.randint(0, 100, (M,), generator=g).to(DEVICE)
    outs = []
    for backend in (KERNEL_BACKEND, "torch"):
        sm = torch.full((M * k,), 99, dtype=torch.int32, device=DEVICE)
        sp = torch.full((M * k,), 99, dtype=torch.int64, device=DEVICE)
        prepare_dflash_sample_mapping(mapping, positions, sm, sp, num_reqs=num_reqs, num_steps=k, pad_value=pad_value,
                                      backend=backend)
        outs.append((sm.cpu(), sp.cpu()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    sm, sp = outs[0]
    assert sm[: num_reqs * k].tolist() == [int(mapping[r // k]) for r in range(num_reqs * k)]
    assert sp[: num_reqs * k].tolist() == [int(positions[r // k]) + r % k for r in range(num_reqs * k)]
    assert torch.all(sm[num_reqs * k:] == pad_value)


def _verify_case(seed, num_reqs=6, k=3, vocab=300, M=10, greedy_slots=(), q_equals_p_rows=()):
    g = torch.Generator().manual_seed(seed)
    target = (2 * torch.randn(num_reqs, k + 1, vocab, generator=g)).to(DEVICE)
    mapping = torch.randperm(M, generator=g)[:num_reqs].to(torch.int32).to(DEVICE)
    temperature = (0.5 + torch.rand(M, generator=g)).to(DEVICE)
    for s in greedy_slots:
        temperature[s] = 0.0
    seeds = torch.randint(0, 2**62, (M,), generator=g).to(DEVICE)
    positions = torch.randint(0, 500, (num_reqs,), generator=g).to(DEVICE)
    q = (2 * torch.randn(M, k, vocab, generator=g)).to(DEVICE)
    drafts = torch.randint(0, vocab, (num_reqs, k), generator=g).to(DEVICE)
    for r in q_equals_p_rows:
        s = int(mapping[r])
        q[s] = target[r, :k] / temperature[s]
    return target, q, drafts, mapping, temperature, seeds, positions


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("probabilistic", [True, False])
@pytest.mark.parametrize("vocab", [37, 1030])
def test_rejection_kernel_matches_reference(seed, probabilistic, vocab):
    target, q, drafts, mapping, temperature, seeds, positions = _verify_case(
        seed, vocab=vocab, greedy_slots=(int(seed),))
    q_arg = q if probabilistic else None
    a = rejection_sample(target, q_arg, drafts, mapping, temperature, seeds, positions, backend=KERNEL_BACKEND)
    b = rejection_sample_torch(target, q_arg, drafts, mapping, temperature, seeds, positions)
    assert torch.equal(a.tokens.cpu(), b.tokens.cpu())
    assert torch.equal(a.num_accepted.cpu(), b.num_accepted.cpu())


def test_rejection_accepts_everything_when_q_equals_p_and_drafts_are_likely():
    target, q, drafts, mapping, temperature, seeds, positions = _verify_case(11, q_equals_p_rows=range(6))
    # u < p/q = 1 always: every draft is accepted and a bonus token follows.
    v = rejection_sample_torch(target, q, drafts, mapping, temperature, seeds, positions)
    assert v.num_accepted.tolist() == [3] * 6
    assert torch.all(v.tokens[:, :3] == drafts)
    assert torch.all(v.tokens[:, 3] >= 0)


def test_rejection_rejects_a_draft_the_target_rules_out():
    target, q, drafts, mapping, temperature, seeds, positions = _verify_case(12)
    target[:, 0, :] = 0.0
    target[torch.arange(6), 0, drafts[:, 0]] = -1e9  # p(draft) = 0
    v = rejection_sample_torch(target, q, drafts, mapping, temperature, seeds, positions)
    assert v.num_accepted.tolist() == [0] * 6
    assert torch.all(v.tokens[:, 0] != drafts[:, 0]) and torch.all(v.tokens[:, 1:] == -1)


def test_noise_is_keyed_by_seed_and_position_not_by_row():
    seed = torch.tensor([123456789012, 5])
    pos = torch.tensor([40, 40])
    u = uniform_torch(row_key_torch(seed, pos, 1)[:, None], torch.arange(1000)[None, :])
    assert not torch.equal(u[0], u[1])
    again = uniform_torch(row_key_torch(seed.flip(0), pos, 1)[:, None], torch.arange(1000)[None, :])
    assert torch.equal(u.flip(0), again)
    assert 0.0 < float(u.min()) and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.02
