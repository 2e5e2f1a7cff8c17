"""On a CUDA GPU: compiled kernels against their torch references, the sampling distribution, the
race between colliding rows, the toy models' batch invariance, and the bug end to end under real
CUDA graphs. Skipped without CUDA (tests/conftest.py); run with ``pytest -m gpu``.

What differs from the CPU interpreter, and how the checks allow for it:

* programs run concurrently, so when two rows store to one slot the winner is a race: where rows
  collide, each element of q must equal one candidate's value, not a fixed one;
* the compiled kernel scales by a correctly rounded reciprocal and takes its outer log from the
  hardware lg2 unit (``fast_math``), so stored q agrees with ``logits / T`` to 1e-6 relative and
  sampled tokens agree with the reference except at float-rounding ties (none in these cases).
"""

from __future__ import annotations

import math

import pytest
import torch

triton = pytest.importorskip("triton")

from labkit import backends  # noqa: E402  (labkit chooses the backend before kernels are defined)
from labkit.kernels import (  # noqa: E402
    WriteTrace,
    gumbel_sample,
    gumbel_sample_torch,
    prepare_dflash_sample_mapping,
    rejection_sample,
    rejection_sample_torch,
)
from labkit.kernels.gumbel import launch_config  # noqa: E402
from labkit.kernels.noise import U_MAX, row_key_torch, uniform_torch  # noqa: E402

pytestmark = pytest.mark.gpu
DEVICE = "cuda"
needs_compiled = pytest.mark.skipif(backends.backend() != "triton",
                                    reason="needs the compiled Triton backend (LABKIT_BACKEND=triton)")

if backends.HAS_TRITON:
    import triton.language as tl

    from labkit.kernels.noise import row_key, uniform

    @triton.jit
    def _uniform_kernel(seed_ptr, pos_ptr, out_ptr, base, n, salt, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        key = row_key(tl.load(seed_ptr + row), tl.load(pos_ptr + row), salt)
        tl.store(out_ptr + row * n + offs, uniform(key, base + offs), mask=offs < n)


def _case(seed, rows, vocab, M=16, padded=0, stale=False, greedy_slots=()):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    live = rows - padded
    slots = torch.randperm(M, device=DEVICE, generator=g)[:live].to(torch.int32)
    if stale and live:
        pad = slots[torch.randint(0, live, (padded,), device=DEVICE, generator=g)]
    else:
        pad = torch.full((padded,), -1, dtype=torch.int32, device=DEVICE)
    mapping = torch.cat([slots, pad])
    temperature = 0.5 + torch.rand(M, device=DEVICE, generator=g)
    temperature[list(greedy_slots)] = 0.0
    seeds = torch.randint(0, 2**62, (M,), device=DEVICE, generator=g)
    logits = 3 * torch.randn(rows, vocab, device=DEVICE, generator=g)
    positions = torch.randint(0, 5000, (rows,), device=DEVICE, generator=g)
    return logits, mapping, temperature, seeds, positions


# -- kernels against references ----------------------------------------------------------------------

@needs_compiled
@pytest.mark.parametrize("vocab", [30, 1000, 4097, 32000, 151936])
@pytest.mark.parametrize("padded,stale", [(0, False), (3, False), (3, True)])
@pytest.mark.parametrize("fast_math", [0, 2])
def test_compiled_gumbel_kernel_matches_torch_reference(vocab, padded, stale, fast_math):
    rows, M, k = 9, 16, 3
    logits, mapping, temperature, seeds, positions = _case(vocab + padded, rows, vocab, M, padded, stale,
                                                           greedy_slots=(0, 5))
    masked = True if (padded and not stale) else fast_math == 0
    q_k = torch.full((M, k, vocab), 7.0, device=DEVICE)
    q_t = q_k.clone()
    tr_k, tr_t = WriteTrace.empty(M, k, DEVICE), WriteTrace.empty(M, k, DEVICE)
    t_k = gumbel_sample(logits, mapping, temperature, seeds, positions, q_k, 1, masked=masked,
                        trace=tr_k, fast_math=fast_math)
    t_t = gumbel_sample_torch(logits, mapping, temperature, seeds, positions, q_t, 1, masked=masked,
                              trace=tr_t)
    assert torch.equal(t_k, t_t)
    assert torch.equal(tr_k.writes, tr_t.writes)
    slots = mapping.tolist()
    collided = {s for s in slots if s >= 0 and slots.count(s) > 1}
    for slot in range(M):
        if slot in collided:
            rows_here = [r for r, s in enumerate(slots) if s == slot]
            assert int(tr_k.writer[slot, 1]) in rows_here
            t = temperature[slot]
            cands = torch.stack([logits[r] / t if float(t) != 0.0 else logits[r] for r in rows_here])
            close = torch.isclose(q_k[slot, 1][None, :], cands, rtol=1e-6, atol=0).any(dim=0)
            assert bool(close.all()), "a collided q element matches no candidate row"
        else:
            torch.testing.assert_close(q_k[slot], q_t[slot], rtol=1e-6, atol=0)
            assert torch.equal(tr_k.writer[slot], tr_t.writer[slot])
    assert torch.all(q_k[:, 0] == 7.0) and torch.all(q_k[:, 2] == 7.0)


@needs_compiled
@pytest.mark.parametrize("block_v,num_warps", [(None, None), (1024, 4), (2048, 4), (8192, 16)])
@pytest.mark.parametrize("samples_per_req", [1, 4])
def test_block_configurations_and_dflash_rows_agree(block_v, num_warps, samples_per_req):
    rows, vocab, M, k = 16, 128256, 8, 4
    logits, mapping, temperature, seeds, positions = _case(3, rows, vocab, M=M * 4)
    mapping = torch.arange(rows // samples_per_req, dtype=torch.int32, device=DEVICE)
    mapping = mapping.repeat_interleave(samples_per_req)
    q_k = torch.zeros(M * 4, k, vocab, device=DEVICE)
    q_t = q_k.clone()
    t_k = gumbel_sample(logits, mapping, temperature, seeds, positions, q_k, 0,
                        samples_per_req=samples_per_req, block_v=block_v, num_warps=num_warps)
    t_t = gumbel_sample_torch(logits, mapping, temperature, seeds, positions, q_t, 0,
                              samples_per_req=samples_per_req)
    assert torch.equal(t_k, t_t)
    torch.testing.assert_close(q_k, q_t, rtol=1e-6, atol=0)  # no two rows share a (slot, step)


@needs_compiled
def test_early_exit_keeps_live_rows_and_skips_padded_ones():
    logits, mapping, temperature, seeds, positions = _case(4, 64, 151936, M=64, padded=30)
    outs = []
    for early in (False, True):
        q = torch.full((64, 1, 151936), 5.0, device=DEVICE)
        outs.append((gumbel_sample(logits, mapping, temperature, seeds, positions, q, 0, early_exit=early), q))
    (t0, q0), (t1, q1) = outs
    assert torch.equal(t0[:34], t1[:34]) and torch.equal(q0, q1)
    untouched = torch.ones(64, dtype=torch.bool, device=DEVICE)
    untouched[mapping[:34].long()] = False
    assert torch.all(q1[untouched] == 5.0)


@needs_compiled
def test_noise_is_bit_identical_and_never_reaches_one():
    """Triton's hash and torch's agree bit for bit on the GPU; and the 24-bit value that used to
    round to u = 1.0 (an infinite Gumbel noise) gives the largest float below 1 in both."""
    from labkit.kernels.noise import GOLDEN, MASK32, mix32_torch

    n, salt = 1 << 22, 0x2545F491
    seed = torch.tensor([123456789012345, 7, 2**61 + 3], device=DEVICE)
    pos = torch.tensor([0, 40, 99999], device=DEVICE)
    out = torch.empty(3, n, device=DEVICE)
    _uniform_kernel[(3, n // 1024)](seed, pos, out, 0, n, salt, BLOCK=1024)
    keys = row_key_torch(seed, pos, salt)
    ref = uniform_torch(keys[:, None], torch.arange(n, device=DEVICE)[None, :])
    assert torch.equal(out, ref)
    assert 0.0 < float(out.min()) and float(out.max()) <= U_MAX < 1.0
    # Search indices of key 0 for a hash whose top 24 bits are all ones (1 in 2**24 draws).
    key = keys[:1]
    for base in range(0, 1 << 28, n):
        idx = torch.arange(base, base + n, device=DEVICE)
        top = mix32_torch(key ^ ((idx * GOLDEN) & MASK32)) >> 8
        hits = (top == (1 << 24) - 1).nonzero().flatten()
        if len(hits):
            break
    assert len(hits), "no all-ones draw in 2**28 indices (expected about 16)"
    raw = ((top[hits[0]]).to(torch.float32) + 0.5) * (1.0 / (1 << 24))
    assert float(raw) == 1.0, "without the clamp float32 rounding gives exactly 1.0"
    _uniform_kernel[(1, n // 1024)](seed[:1], pos[:1], out, base, n, salt, BLOCK=1024)
    assert float(out[0, hits[0]]) == U_MAX
    assert float(uniform_torch(key, idx[hits[0]])) == U_MAX


@needs_compiled
@pytest.mark.parametrize("fast_math", [0, 2])
def test_sampling_is_distributed_as_softmax_small_vocab(fast_math):
    """Token frequencies over 2**20 seeds against softmax(logits / T): a chi-square test."""
    n, vocab, temp = 1 << 20, 64, 0.7
    g = torch.Generator(device=DEVICE).manual_seed(5)
    row = 2.0 * torch.randn(vocab, device=DEVICE, generator=g)
    logits = row.expand(n, vocab).contiguous()
    mapping = torch.arange(n, dtype=torch.int32, device=DEVICE)
    temperature = torch.full((n,), temp, device=DEVICE)
    seeds = torch.arange(n, device=DEVICE) * 7919 + 1
    positions = torch.zeros(n, dtype=torch.int64, device=DEVICE)
    tokens = gumbel_sample(logits, mapping, temperature, seeds, positions, None, fast_math=fast_math)
    counts = torch.bincount(tokens, minlength=vocab).double()
    expected = torch.softmax(row.double() / temp, dim=0) * n
    keep = expected >= 5
    chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
    dof = int(keep.sum()) - 1
    z = (chi2 - dof) / math.sqrt(2 * dof)
    assert z < 4.5, f"chi-square {chi2:.1f} on {dof} dof (z = {z:.1f}): not distributed as softmax"


@needs_compiled
def test_sampling_tail_at_a_real_vocabulary_and_fast_math_agrees_with_exact():
    """At vocab 151936 the winning Gumbel values come from u within ~1e-5 of 1, where the inner log
    needs relative accuracy. Tokens fall in 4 classes (index % 4) with logits 0, .5, 1, 1.5: class
    frequencies over 65536 draws against softmax; and fast math picks the same tokens as exact math."""
    rows, vocab, launches = 2048, 151936, 32
    cls_logit = torch.tensor([0.0, 0.5, 1.0, 1.5], device=DEVICE)
    logits = cls_logit[torch.arange(vocab, device=DEVICE) % 4].expand(rows, vocab).contiguous()
    mapping = torch.arange(rows, dtype=torch.int32, device=DEVICE)
    temperature = torch.ones(rows, device=DEVICE)
    positions = torch.zeros(rows, dtype=torch.int64, device=DEVICE)
    counts = torch.zeros(4, dtype=torch.float64, device=DEVICE)
    agree = 0
    for i in range(launches):
        seeds = torch.arange(rows, device=DEVICE) + i * rows + 11
        fast = gumbel_sample(logits, mapping, temperature, seeds, positions, None, fast_math=2)
        exact = gumbel_sample(logits, mapping, temperature, seeds, positions, None, fast_math=0)
        agree += int((fast == exact).sum())
        counts += torch.bincount(fast % 4, minlength=4).double()
    n = rows * launches
    assert agree >= n - 2, f"fast math changed {n - agree} of {n} tokens"
    p = torch.softmax(cls_logit.double(), dim=0)  # each class holds vocab / 4 tokens
    expected = p * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 20.0, f"class frequencies {counts.tolist()} vs {expected.tolist()}: chi-square {chi2:.1f} (3 dof)"


@needs_compiled
@pytest.mark.parametrize("pad_value", [0, -1])
@pytest.mark.parametrize("num_reqs", [0, 3, 16])
def test_compiled_dflash_prepare_matches_reference(pad_value, num_reqs):
    M, k = 16, 4
    mapping = torch.randperm(M, device=DEVICE).to(torch.int32)
    positions = torch.randint(0, 100, (M,), device=DEVICE)
    outs = []
    for backend in ("triton", "torch"):
        sm = torch.full((M * k,), 99, dtype=torch.int32, device=DEVICE)
        sp = torch.full((M * k,), 99, dtype=torch.int64, device=DEVICE)
        prepare_dflash_sample_mapping(mapping, positions, num_reqs, k, sm, sp, pad_value=pad_value, backend=backend)
        outs.append((sm, sp))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@needs_compiled
@pytest.mark.parametrize("vocab", [30, 1030, 32000])
@pytest.mark.parametrize("probabilistic", [True, False])
def test_compiled_rejection_kernel_matches_reference(vocab, probabilistic):
    g = torch.Generator(device=DEVICE).manual_seed(vocab)
    n, k, M = 12, 3, 16
    target = 2 * torch.randn(n, k + 1, vocab, device=DEVICE, generator=g)
    mapping = torch.randperm(M, device=DEVICE, generator=g)[:n].to(torch.int32)
    temperature = 0.5 + torch.rand(M, device=DEVICE, generator=g)
    temperature[int(mapping[0])] = 0.0
    seeds = torch.randint(0, 2**62, (M,), device=DEVICE, generator=g)
    positions = torch.randint(0, 500, (n,), device=DEVICE, generator=g)
    q = 2 * torch.randn(M, k, vocab, device=DEVICE, generator=g) if probabilistic else None
    drafts = torch.randint(0, vocab, (n, k), device=DEVICE, generator=g)
    a = rejection_sample(target, q, drafts, mapping, temperature, seeds, positions, backend="triton")
    b = rejection_sample_torch(target, q, drafts, mapping, temperature, seeds, positions)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.num_accepted, b.num_accepted)


def test_launch_config_keeps_the_interpreters_teaching_configuration():
    assert launch_config(7, 2049, interpreted=True) == dict(block_v=1024, num_warps=4, fast_math=0)
    big = launch_config(512, 151936, interpreted=False)
    assert big["block_v"] >= 1024 and big["fast_math"] >= 1
    small = launch_config(1, 151936, interpreted=False)
    assert small["block_v"] == 1024  # one row: small blocks keep the GPU busy


# -- the race -------------------------------------------------------------------------------------------

@needs_compiled
@pytest.mark.parametrize("vocab,graph", [(30, False), (30, True), (151936, False)])
def test_colliding_rows_race_and_q_is_always_one_rows_values(vocab, graph):
    """MECHANICS' timeline: rows 6 (live) and 7 (padded) both hold slot 7. On the GPU either may
    store last; q[7] is always made of the two candidates' values (never anything else)."""
    from labkit.gpu.sections import race_stats

    stats = race_stats(launches=300 if vocab < 1000 else 40, vocab=vocab, graph=graph)
    print(stats)
    assert stats["padded_row_won"] + stats["live_row_won"] + stats["mixed"] == stats["launches"]
    assert stats["padded_row_won"] + stats["mixed"] > 0, "the padded row should win at least sometimes"


# -- the toy models on the GPU ----------------------------------------------------------------------------

def _invariant(result: dict) -> bool:
    return not any(r["mismatched_sizes_eager"] or r["mismatched_sizes_graph"] for r in result.values())


@pytest.fixture(scope="module")
def gpu_models():
    """The toy models on the GPU (their linear layers use the row-wise Triton kernel there)."""
    from labkit.models import load_toy_models

    if backends.backend() != "triton":
        pytest.skip("needs the compiled Triton backend")
    return load_toy_models(DEVICE)


@needs_compiled
def test_toy_models_are_batch_invariant_on_the_gpu_eager_and_in_graphs():
    """Eager runs use num_reqs rows, graphs the padded size: a row's logits must not depend on it.
    (cuBLAS alone is not invariant: that is why RowwiseLinear uses labkit.kernels.rowwise_linear.)"""
    from labkit.gpu.sections import batch_invariance, layer_invariance

    result = batch_invariance()
    print(result, layer_invariance())
    assert _invariant(result), result


# -- end to end under real CUDA graphs ------------------------------------------------------------------

@needs_compiled
def test_graph_runner_applies_a_step_once_on_the_call_that_captures():
    """GraphRunner warms a new graph's step up eagerly before capturing it (Triton compiles outside
    the capture); replaying it on that call as well would apply the step twice, and the drafter,
    which shifts its context and positions in place, would draft from a context one step ahead."""
    from labkit.gpu.sections import graph_step_applications

    assert graph_step_applications() == 1


@pytest.fixture(scope="module")
def gpu_bench(gpu_models):
    from labkit.modes import ALL_MODES
    from labkit.repro import BenchConfig, run_bench

    return run_bench(BenchConfig(), ALL_MODES, progress=False, device=DEVICE, models=gpu_models).to_json()["modes"]


def test_gpu_bench_buggy_graphs_corrupt_and_the_fix_matches_gpu_eager(gpu_bench):
    m = gpu_bench
    print({name: (r["identical_to_eager"], r["corrupted"], r["tokens_per_s"]) for name, r in m.items()})
    assert m["graph-fixed"]["identical_to_eager"] == m["graph-fixed"]["responses"] == 50
    assert m["graph-buggy"]["corrupted"] >= 5
    assert m["graph-buggy"]["mean_target_nll"] > m["eager"]["mean_target_nll"]
    assert m["graph-mask-only"]["corrupted"] >= 1
    assert m["graph-fill-only"]["error"] and "mask" in m["graph-fill-only"]["error"]


def test_gpu_bench_greedy_drafting_is_unaffected(gpu_bench):
    assert gpu_bench["greedy-graph-buggy"]["corrupted"] == 0
    assert gpu_bench["greedy-graph-buggy"]["identical_to_eager"] == 50


def test_gpu_bench_dflash_pad_zero_corrupts_and_minus_one_does_not(gpu_bench):
    assert gpu_bench["dflash-buggy"]["corrupted"] >= 1
    assert gpu_bench["dflash-fixed"]["corrupted"] == 0
    assert gpu_bench["dflash-fixed"]["identical_to_eager"] == 50


@needs_compiled
@pytest.mark.parametrize("capture_sizes", [(1, 2, 4, 8), (1, 2, 4, 8, 16)])
def test_every_capture_size_is_a_real_cuda_graph_and_the_buggy_run_collides(capture_sizes, gpu_models):
    from labkit.corpus import sample_prompts
    from labkit.engine import Engine, EngineConfig, make_requests
    from labkit.speculator import FixSwitches

    models = gpu_models
    cfg = dict(num_steps=3, max_num_reqs=capture_sizes[-1], capture_sizes=capture_sizes)
    reqs = lambda: make_requests(models.tokenizer, sample_prompts(24, 3), 3, min_new_tokens=12,  # noqa: E731
                                 max_new_tokens=40, arrivals_per_step=0.7)
    eager = Engine(models, EngineConfig(**cfg, use_graphs=False)).generate(reqs())
    engine = Engine(models, EngineConfig(**cfg, fix=FixSwitches.before(), record=True))
    buggy = engine.generate(reqs())
    fixed = Engine(models, EngineConfig(**cfg, fix=FixSwitches.after())).generate(reqs())
    runner = engine.speculator.runner
    used = {rec.launch.rows for rec in buggy.records}
    assert runner.real_graphs and set(runner._graphs) == used
    assert all(isinstance(g, torch.cuda.CUDAGraph) for g in runner._graphs.values())
    assert any(rec.launch.collisions() for rec in buggy.records)
    assert fixed.outputs == eager.outputs
    greedy_eager = Engine(models, EngineConfig(**cfg, use_graphs=False, probabilistic=False)).generate(reqs())
    greedy_buggy = Engine(models, EngineConfig(**cfg, fix=FixSwitches.before(),
                                               probabilistic=False)).generate(reqs())
    assert greedy_buggy.outputs == greedy_eager.outputs
    assert any(eager.outputs[r] != buggy.outputs[r] for r in eager.outputs)
