"""The speed-ups of Triton's CPU interpreter (labkit.interpreter): each installed, each changing no bit
of any launch, and all of them off under LABKIT_INTERPRETER_SPEEDUPS=0."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from labkit import backends


@pytest.mark.skipif(not backends.KERNELS_INTERPRETED, reason="a speed-up of Triton's CPU interpreter")
@pytest.mark.parametrize("masked", [True, False])
def test_the_interpreters_speed_ups_change_no_bit(monkeypatch, masked):
    """labkit.interpreter skips Triton's re-patching of triton.language at helper calls inside a
    launch, keeps each dtype's numpy dtype instead of asking again, and runs the noise helpers as
    their torch twins; the kit's kernel (noise helpers, tl.max, tl.argmax, uint32 and float casts,
    pointers) must give the same bits without all three."""
    import triton.language as tl
    from kernel_cases import launch_case
    from triton.runtime import interpreter

    from labkit.kernels.gumbel import SamplingState, gumbel_sample

    def launches():
        out = []
        for seed in range(3):
            logits, mapping, temperature, seeds, positions = launch_case(seed, 6, 300, padded=2, stale=not masked)
            q = torch.zeros(12, 2, 300)
            tokens = [gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=step,
                                    masked=masked, backend="interpreter") for step in range(2)]
            out.append((torch.stack(tokens), q))
        return out

    patch = interpreter._patch_lang
    np_dtype = interpreter._get_np_dtype
    assert getattr(patch, "labkit_once_per_launch", False), "the speed-up is not installed"
    assert getattr(np_dtype, "labkit_remembered", False), "the numpy dtypes are not remembered"
    twins = interpreter.InterpretedFunction.__call__
    assert getattr(twins, "labkit_twins", False), "the helpers' twins are not installed"
    skipped, twinned = patch.skipped, twins.twinned
    fast = launches()
    assert patch.skipped > skipped, "no helper call inside a launch skipped the re-patching"
    assert twins.twinned > twinned, "no noise helper ran as its twin"
    assert {tl.float32, tl.int64} <= set(np_dtype.known), "the launches looked up no dtype kept"
    monkeypatch.setattr(interpreter.InterpretedFunction, "__call__", twins.__wrapped__)
    monkeypatch.setattr(interpreter, "_get_np_dtype", np_dtype.__wrapped__)
    monkeypatch.setattr(interpreter, "_patch_lang", patch.__wrapped__)
    monkeypatch.setattr(interpreter.GridExecutor, "__call__", interpreter.GridExecutor.__call__.__wrapped__)
    slow = launches()
    for (tokens_fast, q_fast), (tokens_slow, q_slow) in zip(fast, slow, strict=True):
        assert torch.equal(tokens_fast, tokens_slow)
        assert torch.equal(q_fast, q_slow)


if backends.HAS_TRITON:  # at module level: the interpreter finds a kernel's names in its module
    from labkit.kernels.noise import row_key, uniform
    from labkit.kernels.triton_import import tl, triton

    @triton.jit
    def _noise_kernel(seed_ptr, pos_ptr, index_ptr, key_ptr, u_ptr, grid_ptr, salt, BLOCK: tl.constexpr):
        """Per program: a row's key (scalars), its uniforms over a block of indices, and over a 2-D
        block of (key, index) pairs where the key is a column."""
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        key = row_key(tl.load(seed_ptr + row), tl.load(pos_ptr + row), salt)
        tl.store(key_ptr + row, key)
        index = tl.load(index_ptr + row * BLOCK + offs)
        tl.store(u_ptr + row * BLOCK + offs, uniform(key, index))
        keys = (key + offs.to(tl.uint32))[:, None]  # [BLOCK, 1] against [1, BLOCK]
        tl.store(grid_ptr + row * BLOCK * BLOCK + offs[:, None] * BLOCK + offs[None, :], uniform(keys, offs[None, :]))


@pytest.mark.skipif(not backends.KERNELS_INTERPRETED, reason="a speed-up of Triton's CPU interpreter")
@pytest.mark.parametrize("salt", [0x2545F491, 0x7FFFFFFF, -5])
def test_the_noise_helpers_twins_give_the_bits_of_their_triton_source(monkeypatch, salt):
    """row_key and uniform run as their torch twins in the interpreter: the same keys and uniforms as
    Triton's own run of their source, for seeds of every sign and with high bits, positions past
    2**32, negative and large indices, scalar, 1-D and broadcast 2-D calls, and any int32 salt."""
    from triton.runtime import interpreter

    g = torch.Generator().manual_seed(1)
    seed = torch.tensor([0, 1, -1, 2**62 + 12345, -(2**40) - 7, 2**31, 123456789012, -2**63], dtype=torch.int64)
    pos = torch.tensor([0, 5, 2**32 + 3, 2**33 - 1, 17, 2**31, 2**40, 7], dtype=torch.int64)
    block = 16
    index = torch.randint(-2**31, 2**31 - 1, (len(seed), block), generator=g, dtype=torch.int32)
    index[0] = torch.arange(block)

    def run():
        key = torch.zeros(len(seed), dtype=torch.int64)  # uint32 stored into int64 slots: no sign to lose
        u, grid = torch.zeros(len(seed), block), torch.zeros(len(seed), block, block)
        _noise_kernel[(len(seed),)](seed, pos, index, key, u, grid, salt, BLOCK=block)
        return key, u, grid

    twins = interpreter.InterpretedFunction.__call__
    assert getattr(twins, "labkit_twins", False), "the helpers' twins are not installed"
    before = twins.twinned
    fast = run()
    assert twins.twinned >= before + 3 * len(seed), "the helpers did not run as their twins"
    monkeypatch.setattr(interpreter.InterpretedFunction, "__call__", twins.__wrapped__)
    for got, want in zip(fast, run(), strict=True):  # against the Triton source's own run
        assert torch.equal(got, want)
    assert len(set(fast[0].tolist())) == len(seed)  # distinct keys: the comparison is not of zeros


if backends.HAS_TRITON:  # at module level: the interpreter finds a kernel's names in its module
    from labkit.kernels.gumbel_tuning import _max_nan_first
    from labkit.kernels.triton_import import tl, triton

    @triton.jit
    def _block_max_kernel(x_ptr, out_ptr, col_ptr, BLOCK: tl.constexpr):
        """Each row's max, over the row and over each group of 4 kept as a column (keep_dims)."""
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + row, tl.reduce(tl.load(x_ptr + row * BLOCK + offs), 0, _max_nan_first))
        group = tl.arange(0, BLOCK // 4)
        tile = tl.load(x_ptr + row * BLOCK + group[:, None] * 4 + tl.arange(0, 4)[None, :])
        col = tl.reduce(tile, 1, _max_nan_first, keep_dims=True)  # [BLOCK // 4, 1]
        tl.store(col_ptr + row * (BLOCK // 4) + group[:, None] + tl.arange(0, 1)[None, :], col)


@pytest.mark.skipif(not backends.KERNELS_INTERPRETED, reason="a speed-up of Triton's CPU interpreter")
def test_the_sampling_kernels_max_reduces_in_numpy_to_the_interpreters_own_fold():
    """The block max of the sampling kernel (tl.reduce with a NaN-propagating combine) runs in numpy in
    the interpreter: the same bits as Triton's element-by-element fold, on blocks with NaN, +-inf, ties,
    -0.0 beside +0.0, in one axis and along the second axis of a 2-D block kept as a column."""
    from triton.runtime import interpreter

    nan, inf = float("nan"), float("inf")
    g = torch.Generator().manual_seed(0)
    rows = [torch.randn(16, generator=g) for _ in range(3)] + [
        torch.tensor([1.0, 3.0, 3.0, -2.0] * 4),  # a tie
        torch.tensor([-1.0, nan, 2.0, nan] + [0.0] * 12),  # NaNs: the fold's own
        torch.tensor([-0.0, 0.0, -1.0, -0.0] + [-inf] * 12),  # a maximum of zero: the fold's own
        torch.tensor([-inf] * 15 + [inf]), torch.full((16,), -inf)]
    x = torch.stack(rows)

    def run():
        out, col = torch.full((len(rows),), 7.0), torch.full((len(rows), 4), 7.0)
        _block_max_kernel[(len(rows),)](x, out, col, BLOCK=16)
        return out, col

    fast = run()
    patched = interpreter.ReduceOps.apply_impl
    assert getattr(patched, "labkit_numpy_folds", False), "the numpy folds are not installed"
    interpreter.ReduceOps.apply_impl = patched.__wrapped__
    try:
        slow = run()
    finally:
        interpreter.ReduceOps.apply_impl = patched
    for a, b in zip(fast, slow, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes(), (a, b)
    assert fast[0][3] == 3.0 and torch.isnan(fast[0][4]) and fast[0][6] == inf


@pytest.mark.skipif(not backends.HAS_TRITON, reason="the interpreter is Triton's")
def test_the_off_switch_leaves_tritons_interpreter_as_triton_ships_it():
    """With LABKIT_INTERPRETER_SPEEDUPS=0 none of the five patches is installed and a launch of the
    kit's kernel gives the bits the patched interpreter gives; with it unset all five are."""
    code = textwrap.dedent("""
        import json, torch
        from labkit.kernels.gumbel import SamplingState, gumbel_sample  # first: it sets TRITON_INTERPRET
        from triton.runtime import interpreter
        mapping = torch.tensor([2, 0, 1, 2], dtype=torch.int32)
        logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(3))
        q = torch.zeros(3, 1, 50)
        state = SamplingState(mapping, torch.ones(3), torch.arange(3, dtype=torch.int64), torch.arange(4), q)
        tokens = gumbel_sample(logits, state, masked=True, backend="interpreter")
        installed = [getattr(interpreter._patch_lang, "labkit_once_per_launch", False),
                     getattr(interpreter._get_np_dtype, "labkit_remembered", False),
                     getattr(interpreter.ReduceOps.apply_impl, "labkit_numpy_folds", False),
                     getattr(interpreter.InterpretedFunction.__call__, "labkit_twins", False),
                     not interpreter.interpreter_builder.options.sanitize_overflow]
        print(json.dumps({"installed": installed, "tokens": tokens.tolist(), "q": q.flatten().tolist()}))
    """)

    def run(switch):
        env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
        env.update({"LABKIT_BACKEND": "interpreter"} if switch is None else
                   {"LABKIT_BACKEND": "interpreter", "LABKIT_INTERPRETER_SPEEDUPS": switch})
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        import json
        return json.loads(out.stdout.strip().splitlines()[-1])

    fast, plain = run(None), run("0")
    assert fast["installed"] == [True] * 5
    assert plain["installed"] == [False] * 5
    assert fast["tokens"] == plain["tokens"] and fast["q"] == plain["q"]
