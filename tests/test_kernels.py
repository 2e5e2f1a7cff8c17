"""Kernels against their torch references on randomized inputs, in whichever backend is active.

Run under two Triton versions in CI (the pinned one and 3.9) to catch interpreter differences such
as 3.9's stricter mask dtypes.
"""

from __future__ import annotations

import pytest
import torch
from kernel_cases import DEVICE, KERNEL_BACKEND, ORDERED, Q_TOL, assert_q_from_rows, launch_case, scaled_rows

from labkit import backends
from labkit.errors import PaddedSlotOutOfBoundsError
from labkit.kernels import (
    SamplingState,
    WriteTrace,
    gumbel_sample,
    gumbel_sample_torch,
    prepare_dflash_sample_mapping,
    rejection_sample,
    rejection_sample_torch,
)
from labkit.kernels.noise import MASK32, MIX_MUL_1, MIX_MUL_2, row_key_torch, uniform_torch


@pytest.mark.parametrize("vocab", [31, 1000, 1500, 2049])
@pytest.mark.parametrize("padded,stale", [(0, False), (3, False), (3, True)])
@pytest.mark.parametrize("seed", [0, 1])
def test_gumbel_kernel_matches_torch_reference(vocab, padded, stale, seed):
    num_rows, M, k = 7, 12, 3
    logits, mapping, temperature, seeds, positions = launch_case(seed, num_rows, vocab, M, padded, stale,
                                                                 greedy_slots=(0, 5))
    # An unmasked launch may only meet stale (>= 0) slots; otherwise try both variants.
    masked = True if padded and not stale else (seed == 0)
    outs = []
    for backend in (KERNEL_BACKEND, "torch"):
        q = torch.full((M, k, vocab), 7.0, device=DEVICE)
        trace = WriteTrace.empty(M, k, DEVICE)
        tokens = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=1,
                               masked=masked, trace=trace, block_v=512 if vocab > 512 else None, backend=backend)
        outs.append((tokens.cpu(), q.cpu(), trace.writer.cpu(), trace.writes.cpu()))
    (t_k, q_k, w_k, n_k), (t_t, q_t, w_t, n_t) = outs
    assert torch.equal(t_k, t_t)
    assert torch.equal(n_k, n_t), "how many rows stored where does not depend on order"
    rows_of = {}
    for row, slot in enumerate(mapping.tolist()):
        if slot >= 0:
            rows_of.setdefault(slot, []).append(row)
    for slot, rows in rows_of.items():
        if ORDERED or len(rows) == 1:
            torch.testing.assert_close(q_k[slot], q_t[slot], **Q_TOL)
            assert torch.equal(w_k[slot], w_t[slot])
        else:  # rows raced for this slot on the GPU: either may have won
            assert_q_from_rows(q_k[slot, 1], scaled_rows(logits, mapping, temperature, rows))
            assert int(w_k[slot, 1]) in rows
    # Untouched q entries keep their value: nothing stored outside the rows' own slots and step.
    for slot in range(M):
        if slot not in rows_of:
            assert torch.all(q_k[slot] == 7.0)
    assert torch.all(q_k[:, 0] == 7.0) and torch.all(q_k[:, 2] == 7.0)


@pytest.mark.parametrize("vocab,block_v", [(31, None), (1500, 512)])
# Early exit takes rows from both ends of the batch in turn: an odd and an even number of rows.
@pytest.mark.parametrize("num_rows,samples_per_req", [(7, 1), (8, 1), (8, 2)])
def test_early_exit_kernel_matches_the_reference_and_skips_padded_rows(vocab, block_v, samples_per_req, num_rows):
    M, k = 12, 3
    logits, mapping, temperature, seeds, positions = launch_case(2, num_rows, vocab, M, padded=4)
    if samples_per_req == 2:
        mapping = mapping[::2].repeat_interleave(2).contiguous()  # one request per pair of sample rows
    outs = []
    for backend, early in ((KERNEL_BACKEND, True), ("torch", True), (KERNEL_BACKEND, False)):
        q = torch.full((M, k, vocab), 7.0, device=DEVICE)
        trace = WriteTrace.empty(M, k, DEVICE)
        tokens = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=1,
                               early_exit=early, samples_per_req=samples_per_req, trace=trace, block_v=block_v,
                               backend=backend)
        outs.append((tokens.cpu(), q.cpu(), trace.writes.cpu()))
    (t_e, q_e, n_e), (t_t, q_t, n_t), (t_m, q_m, n_m) = outs
    live = mapping.cpu() >= 0
    assert torch.equal(t_e, t_t) and torch.equal(n_e, n_t)
    torch.testing.assert_close(q_e, q_t, **Q_TOL)
    # Early exit changes nothing for live rows (same tokens and q as the plain masked kernel) ...
    assert torch.equal(t_e[live], t_m[live]) and torch.equal(n_e, n_m)
    torch.testing.assert_close(q_e, q_m, **Q_TOL)
    # ... and the live rows did run: each stored its own q, none is left at the fill value.
    for row in live.nonzero().flatten().tolist():
        slot, step = int(mapping[row]), 1 + row % samples_per_req
        assert int(n_e[slot, step]) == 1
        torch.testing.assert_close(q_e[slot, step], scaled_rows(logits, mapping, temperature, [row])[0], **Q_TOL)
    assert torch.all(t_e[~live] == 0), "a skipped row reduces to token 0"


@pytest.mark.parametrize("early_exit,samples_per_req", [(False, 1), (False, 2), (True, 1), (True, 2)])
def test_a_batch_launched_in_parts_samples_as_one_launch(monkeypatch, early_exit, samples_per_req):
    """A batch with more rows than a grid's second axis holds launches in parts (each from its first
    row): the same tokens, q and write trace as the torch reference. Parts of 3 rows here, so a part
    can start on an odd row (the draft step comes from the row's place in the whole batch) and the
    last part is shorter."""
    from labkit.kernels import gumbel_tuning

    monkeypatch.setattr(gumbel_tuning, "MAX_GRID_ROWS", 3)
    assert gumbel_tuning.grid_parts(8) == [(0, 3), (3, 3), (6, 2)]
    num_rows, vocab, M, k = 8, 1500, 12, 3
    logits, mapping, temperature, seeds, positions = launch_case(4, num_rows, vocab, M, padded=2)
    outs = []
    for backend in (KERNEL_BACKEND, "torch"):
        q = torch.full((M, k, vocab), 7.0, device=DEVICE)
        trace = WriteTrace.empty(M, k, DEVICE)
        tokens = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=0,
                               samples_per_req=samples_per_req, early_exit=early_exit, trace=trace, block_v=512,
                               backend=backend)
        outs.append((tokens.cpu(), q.cpu(), trace.writer.cpu(), trace.writes.cpu()))
    (t_k, q_k, w_k, n_k), (t_t, q_t, w_t, n_t) = outs
    assert torch.equal(t_k, t_t) and torch.equal(w_k, w_t) and torch.equal(n_k, n_t)
    torch.testing.assert_close(q_k, q_t, **Q_TOL)
    assert int((n_k == 1).sum()) == num_rows - 2  # every live row stored once, in its own (slot, step)


def test_gumbel_greedy_rows_take_the_argmax_and_store_unscaled_logits():
    logits, mapping, temperature, seeds, positions = launch_case(3, 5, 300, greedy_slots=range(12))
    q = torch.zeros(12, 1, 300, device=DEVICE)
    tokens = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=0)
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
    tokens = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, None), backend="torch")
    freq = torch.bincount(tokens.cpu(), minlength=vocab).float() / n
    p = torch.softmax(logits[0].cpu() / 0.7, dim=0)
    assert 0.5 * (freq - p).abs().sum() < 0.03


def test_a_stale_padded_row_collides_with_the_live_row_and_the_mask_does_not_help():
    """Row 3 is padding holding slot 7, which live row 2 owns: both store to q[7] (the mask cannot tell)."""
    logits, _, temperature, seeds, positions = launch_case(4, 4, 50)
    mapping = torch.tensor([1, 4, 7, 7], dtype=torch.int32, device=DEVICE)
    padded_q, live_q = scaled_rows(logits, mapping, temperature, [3, 2])
    assert not torch.equal(padded_q, live_q)
    for masked in (False, True):
        q = torch.zeros(12, 1, 50, device=DEVICE)
        trace = WriteTrace.empty(12, 1, DEVICE)
        gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), masked=masked, trace=trace)
        assert int(trace.writes[7, 0]) == 2, "two rows stored to one q, on every backend"
        if ORDERED:
            # Rows run in grid order: the padded row stores last and the live row's q is lost.
            torch.testing.assert_close(q[7, 0].cpu(), padded_q, **Q_TOL)
            assert int(trace.writer[7, 0]) == 3
        else:
            # On a GPU the two stores race; q holds, element by element, what one of them computed.
            assert_q_from_rows(q[7, 0], [padded_q, live_q])
            assert int(trace.writer[7, 0]) in (2, 3)


def test_before_the_fix_the_live_q_is_lost_and_after_it_never_is():
    """docs/MECHANICS.md's second step, launched with fresh logits: rows 6 (live) and 7 hold slot 7.

    Before the fix (stale row 7) the padded row's store lands last in every launch where rows run in
    order, and in about 65% of launches on an H200 (labkit/data/gpu/runs.json, "race"): losing none
    of 40 would take odds below 1e-18. After the fix (row 7 holds -1) slot 7 keeps row 6's q always.
    """
    launches = 4 if ORDERED else 40  # in program order every launch is the same story
    lost = {}
    for fixed in (False, True):
        mapping = torch.tensor([0, 1, 2, 4, 5, 6, 7, -1 if fixed else 7], dtype=torch.int32, device=DEVICE)
        lost[fixed] = 0
        for launch in range(launches):
            logits, _, temperature, seeds, positions = launch_case(100 + launch, 8, 30, max_num_reqs=8)
            q = torch.zeros(8, 1, 30, device=DEVICE)
            gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q))
            live_q = scaled_rows(logits, mapping, temperature, [6])[0]
            right = torch.allclose(q[7, 0].cpu(), live_q, **Q_TOL)
            lost[fixed] += not right
            if ORDERED and not fixed:
                torch.testing.assert_close(q[7, 0].cpu(), scaled_rows(logits, mapping, temperature, [7])[0], **Q_TOL)
    assert lost[True] == 0, "after the fix a live row's q was overwritten"
    assert lost[False] == launches if ORDERED else lost[False] > 0


def test_unmasked_kernel_refuses_slot_minus_one_with_an_explanation():
    logits, mapping, temperature, seeds, positions = launch_case(5, 6, 40, padded=2)
    q = torch.zeros(12, 3, 40, device=DEVICE)
    for backend in (KERNEL_BACKEND, "torch"):
        with pytest.raises(PaddedSlotOutOfBoundsError, match=r"rows \[4, 5\].*out-of-bounds.*mask"):
            gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), masked=False,
                          backend=backend)
    with pytest.raises(PaddedSlotOutOfBoundsError):
        gumbel_sample_torch(logits, SamplingState(mapping, temperature, seeds, positions, q), masked=False)
    assert torch.all(q == 0), "nothing may be written before refusing"


def test_unmasked_refusal_names_the_slot_each_padded_row_holds():
    logits, mapping, temperature, seeds, positions = launch_case(5, 6, 40, padded=1)
    mapping[5] = -5
    for backend in (KERNEL_BACKEND, "torch"):
        with pytest.raises(PaddedSlotOutOfBoundsError, match=r"rows \[5\] hold slot -5 .*temperature\[-5\]"):
            gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions), masked=False, backend=backend)


NAN = float("nan")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NumPy, inside the interpreter
@pytest.mark.parametrize("case", ["negative temperature", "NaN temperature", "all-NaN rows", "one NaN per row",
                                  "all -inf rows", "+inf temperature", "+inf, then NaN"])
def test_no_input_makes_the_kernel_return_a_token_outside_the_vocabulary(case):
    """validate=False lets bad values through to the kernel; it still answers inside [0, vocab), like torch."""
    vocab = 37  # not a power of two: the last block has lanes past the vocabulary
    logits, mapping, temperature, seeds, positions = launch_case(6, 6, vocab, padded=2)
    if case == "negative temperature":
        temperature = -temperature
    elif case == "NaN temperature":
        temperature = torch.full_like(temperature, NAN)
    elif case == "+inf temperature":
        temperature = torch.full_like(temperature, float("inf"))
    elif case == "all-NaN rows":
        logits[:] = NAN
    elif case == "one NaN per row":
        logits[torch.arange(6), torch.arange(6) * 5] = NAN
    elif case == "+inf, then NaN":
        logits[:, 3], logits[:, 9] = float("inf"), NAN
    else:
        logits[:] = float("-inf")
    state = SamplingState(mapping, temperature, seeds, positions)
    tokens = {backend: gumbel_sample(logits, state, block_v=16, validate=False, backend=backend).cpu()
              for backend in (KERNEL_BACKEND, "torch")}
    for t in tokens.values():
        assert bool(((t >= 0) & (t < vocab)).all()), f"{case}: tokens {t.tolist()}"
    assert torch.equal(tokens[KERNEL_BACKEND], tokens["torch"])
    if case == "one NaN per row":
        assert tokens["torch"][:4].tolist() == [0, 5, 10, 15], "a NaN counts as +inf on every backend"
    if case == "+inf, then NaN":
        assert tokens["torch"].tolist() == [3] * 6, "NaN ties with +inf, and the first index wins"


@pytest.mark.skipif(KERNEL_BACKEND == "torch", reason="the Triton kernel's reduction (torch has no kernel)")
# Vocabularies of one block, of many small blocks, and of three blocks of the CPU's and GPU's 1024
# with a one-element tail (the interpreter runs each block's argmax lane by lane: 1024-lane blocks
# are its slowest, so three of them, not more).
@pytest.mark.parametrize("vocab,block_v", [(37, 16), (1000, 64), (2049, 1024)])
@pytest.mark.parametrize("early_exit", [False, True])
def test_the_single_pass_picks_the_two_passes_token_ties_included_launch_after_launch(vocab, block_v, early_exit):
    """Each program leaves its block's best as one packed word and a small launch
    reduces each row's words: the same token as the reduction in torch, ties (the first index of the
    maximum) and +inf/NaN included, launch after launch; with early exit too (a skipped program packs
    a -inf partial). Rows 0-2 hold the ties, row 3 is a sampled live row, rows 4-5 are padding."""
    from labkit.kernels.gumbel import kernel_launcher

    logits, mapping, temperature, seeds, positions = launch_case(3, 6, vocab, padded=2)
    temperature[mapping[:3].long()] = 0.0  # rows 0-2 greedy: their scores are their logits
    logits[0] = 1.0  # a greedy row of equal scores in every block: token 0
    logits[1, [vocab // 2, vocab - 1]] = 50.0  # the same maximum in two blocks: the first wins
    # NaN counts as +inf and ties with it: index 5 wins
    logits[2, [vocab - 1, 5]] = torch.tensor([float("inf"), NAN], device=DEVICE)
    state = SamplingState(mapping, temperature, seeds, positions)
    want = gumbel_sample(logits, state, validate=False, early_exit=early_exit, backend="torch")
    for launch_no in range(2):  # the second launch meets whatever the first left behind
        got = {}
        for single in (True, False):
            launch, finish = kernel_launcher(logits, state, block_v=block_v, single_pass=single, early_exit=early_exit)
            launch()
            got[single] = finish().cpu()
        assert torch.equal(got[True], got[False]) and torch.equal(got[True], want.cpu()), launch_no
        assert got[True][:3].tolist() == [0, vocab // 2, 5]


@pytest.mark.skipif(KERNEL_BACKEND == "torch", reason="the Triton kernel's reduction (torch has no kernel)")
def test_a_single_pass_launch_whose_tokens_nobody_reads_leaves_no_state_for_the_next_call():
    """A benchmark times launch() alone and never calls finish(): the next call must still get its own
    tokens, not words an unread launch left behind (on the H200, when the single pass kept its rows'
    words in one buffer per device, such stale words once won rows of a later test)."""
    from labkit.kernels.gumbel import kernel_launcher

    hot = launch_case(0, 6, 300)
    hot[0][:] = 40.0  # scores far above the next launch's: stale words would win its rows
    unread, _ = kernel_launcher(hot[0], SamplingState(*hot[1:]), block_v=64, single_pass=True)
    unread()
    logits, mapping, temperature, seeds, positions = launch_case(1, 6, 300)
    state = SamplingState(mapping, temperature, seeds, positions)
    launch, finish = kernel_launcher(logits, state, block_v=64, single_pass=True)
    launch()
    assert torch.equal(finish().cpu(), gumbel_sample(logits, state, validate=False, backend="torch").cpu())


def test_masked_kernel_skips_padded_rows_entirely():
    logits, mapping, temperature, seeds, positions = launch_case(6, 6, 40, padded=3)
    q = torch.full((12, 3, 40), 5.0, device=DEVICE)
    gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=2)
    live = mapping[:3].long()
    assert torch.all(q[live, 2] != 5.0)
    untouched = torch.ones(12, dtype=torch.bool)
    untouched[live.cpu()] = False
    assert torch.all(q.cpu()[untouched] == 5.0)


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
        prepare_dflash_sample_mapping(mapping, positions, sm, sp, num_reqs=num_reqs, k=k, pad_value=pad_value,
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
    state = SamplingState(mapping, temperature, seeds, positions, q_arg)
    a = rejection_sample(target, drafts, state, backend=KERNEL_BACKEND)
    b = rejection_sample_torch(target, drafts, state)
    assert torch.equal(a.tokens.cpu(), b.tokens.cpu())
    assert torch.equal(a.num_accepted.cpu(), b.num_accepted.cpu())


def test_rejection_accepts_everything_when_q_equals_p_and_drafts_are_likely():
    target, q, drafts, mapping, temperature, seeds, positions = _verify_case(11, q_equals_p_rows=range(6))
    # u < p/q = 1 always: every draft is accepted and a bonus token follows.
    v = rejection_sample_torch(target, drafts, SamplingState(mapping, temperature, seeds, positions, q))
    assert v.num_accepted.tolist() == [3] * 6
    assert torch.all(v.tokens[:, :3] == drafts)
    assert torch.all(v.tokens[:, 3] >= 0)


def test_rejection_rejects_a_draft_the_target_rules_out():
    target, q, drafts, mapping, temperature, seeds, positions = _verify_case(12)
    target[:, 0, :] = 0.0
    target[torch.arange(6), 0, drafts[:, 0]] = -1e9  # p(draft) = 0
    v = rejection_sample_torch(target, drafts, SamplingState(mapping, temperature, seeds, positions, q))
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


def _unmix32(h: torch.Tensor) -> torch.Tensor:
    """The inverse of lowbias32 (int64 tensors holding uint32 values): which input hashes to h."""
    h = h ^ (h >> 16)
    h = (h * pow(MIX_MUL_2, -1, 1 << 32)) & MASK32
    h = h ^ (h >> 15) ^ (h >> 30)
    h = (h * pow(MIX_MUL_1, -1, 1 << 32)) & MASK32
    return h ^ (h >> 16)


if KERNEL_BACKEND != "torch":
    from labkit.kernels.fast_math import log_uniform, log_unit_interval
    from labkit.kernels.noise import uniform
    from labkit.kernels.triton_import import tl, triton

    @triton.jit
    def _uniform_and_log_kernel(key_ptr, u_ptr, log_ptr, fused_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        key = tl.load(key_ptr + offs, mask=offs < n, other=0).to(tl.uint32)
        u = uniform(key, offs * 0)  # index 0: the hash input is the key itself
        tl.store(u_ptr + offs, u, mask=offs < n)
        tl.store(log_ptr + offs, log_unit_interval(u), mask=offs < n)
        tl.store(fused_ptr + offs, log_uniform(key, offs * 0), mask=offs < n)


@pytest.mark.skipif(KERNEL_BACKEND == "torch", reason="the Triton noise (torch has no kernel)")
def test_every_24_bit_draw_gives_the_reference_uniform_and_an_accurate_log(monkeypatch):
    """uniform turns the hash's top 24 bits into a float with bit tricks (and the fast log's exponent
    likewise): every one of the 2**24 values must round exactly as uniform_torch does, and
    log_unit_interval must stay within 1.5 ulp of the true log of each (libdevice's logf, which it
    follows, is documented to 1 ulp; a wrong exponent would be off by ln 2). log_uniform, the compiled
    kernel's shortcut from the hash to log(u) through one conversion of 2m + 1, must give the same bits.
    Inverting the hash picks keys whose hash has each top-24-bit value m (low bits varied). In the
    interpreter uniform runs its Triton source here, not the torch twin it otherwise runs as
    (labkit.interpreter.interpret_helper_as): the source is what this checks."""
    if backends.KERNELS_INTERPRETED:
        from triton.runtime import interpreter

        call = interpreter.InterpretedFunction.__call__
        monkeypatch.setattr(interpreter.InterpretedFunction, "__call__", getattr(call, "__wrapped__", call))
    m = torch.arange(1 << 24, dtype=torch.int64)
    h = (m << 8) | ((m * 0x9E) & 0xFF)
    keys = _unmix32(h)
    want = uniform_torch(keys, torch.zeros_like(keys))  # the reference, computed once for both checks
    assert torch.equal(want, ((m.to(torch.float32) + 0.5) / (1 << 24)).clamp(
        max=1 - 2.0**-24)), "the inverse hash really gives each m"
    n, block = keys.numel(), 1 << 16
    u, log, fused = (torch.empty(n, device=DEVICE) for _ in range(3))
    _uniform_and_log_kernel[(n // block,)](keys.to(DEVICE), u, log, fused, n, BLOCK=block)
    assert torch.equal(u.cpu(), want), "uniform differs from uniform_torch"
    exact = torch.log(want.double())
    ulp = (torch.nextafter(want.log(), torch.tensor(0.0)) - want.log()).abs().double()  # float32 spacing at the log
    assert float(((log.cpu().double() - exact).abs() / ulp).max()) <= 1.5
    assert torch.equal(fused.cpu(), log.cpu()), "log_uniform differs from log_unit_interval(uniform)"
