"""The Gumbel sampling kernel of the drafter: where the bug lives, and where half of the fix goes.

One program per (batch row, vocab block). A program

1. loads its row's request-state slot from the row -> slot mapping (`idx_mapping`),
2. loads the slot's temperature and seed,
3. scales its block of logits by the temperature and stores them, *indexed by slot*, into
   `draft_logits[slot, step, block]` -- this is q, the draft distribution the rejection sampler
   will verify against,
4. adds Gumbel noise keyed by (seed, position, vocab index) and writes the block's max and argmax;
   a reduction over blocks (in torch, or with `single_pass` by the row's last program) picks the
   token. argmax(logits / T + Gumbel) is an exact sample from softmax(logits / T).

Under a padded CUDA graph the grid has `num_reqs_padded` rows. Rows past `num_reqs` read whatever
the mapping buffer holds there. Before the fix that was a stale slot, often one that a live row
also holds, so two programs stored to the same `draft_logits[slot, step]` and the padded one, which
runs on garbage input, could win. `masked=True` is the kernel after the fix: rows with slot < 0
load temperature and seed with `other=0` (a noiseless argmax that is thrown away) and do not store.

`samples_per_req` > 1 serves DFlash-style drafters, whose sample row r proposes draft step
`draft_step + r % samples_per_req` of its request.

The inputs besides the logits travel as one :class:`~labkit.kernels.sampling_state.SamplingState`.
Every public entry point checks them on the host first (:mod:`labkit.kernels.gumbel_inputs`:
dtypes, devices, shapes, strides, and the values the launch reads -- slots, temperatures, NaN);
reading values synchronises with a GPU, so callers that checked them where they entered (the
Speculator, benchmarks) pass ``validate=False``, and the launchers behind trust them. Whatever gets
through, the token is inside the vocabulary: a NaN score counts as +inf (the first of the largest
scores wins, on every backend) and lanes past the vocabulary never win.

Compiled for a GPU, the same kernel runs with bigger blocks and ``FAST_MATH`` (see
:func:`launch_config`): the outer log of the Gumbel transform on the hardware lg2 unit and the inner
one without libdevice's special cases, with the same tokens (what that buys on an H200, against a
same-bytes copy: the ``sweep`` and ``kernel`` sections of labkit/data/gpu/h200.json, which the
README renders); the interpreter keeps the plain form, bit for bit as before.

Upstream this is ``gumbel_block_argmax`` / ``_gumbel_sample_kernel`` in
``vllm/v1/worker/gpu/sample/gumbel.py``; docs/VLLM_MAP.md says how the two differ (noise, q, blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit import backends as _backend
from labkit.checks import check_backend, check_int, check_power_of_two
from labkit.errors import LabkitInputError, padded_slot_error
from labkit.kernels.gumbel_inputs import check_launchable, check_layout, check_state, check_switches, check_values
from labkit.kernels.noise import SALT_DRAFT, gumbel_torch, row_key_torch
from labkit.kernels.sampling_state import SamplingState

DEFAULT_BLOCK_V = 1024
MIN_BLOCK_V, MAX_BLOCK_V = 16, 65536  # the block sizes a caller may ask for (powers of two)

if _backend.HAS_TRITON:
    import triton
    import triton.language as tl

    from labkit.kernels.noise import row_key, uniform

    @triton.jit
    def _record_write(writer_ptr, writes_ptr, offset, row):
        tl.store(writer_ptr + offset, row)
        tl.atomic_add(writes_ptr + offset, 1)

    @triton.jit
    def _lg2_approx(x):
        # One MUFU.LG2 instruction. Its absolute error is about 2**-22 near x = 1, so it serves
        # only where an absolute error that small is harmless (the outer log of the Gumbel
        # transform). Compiled kernels only: the interpreter cannot run inline PTX.
        return tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=f,f", [x],
                                         dtype=tl.float32, is_pure=True, pack=1)

    @triton.jit
    def _log_unit_interval(u):
        """log(u) for normal floats u in (0, 1]: libdevice's logf without its special cases.

        The same range reduction, polynomial and fused multiply-adds as `__nv_logf`, so the value
        is the same for every input the noise can produce (u >= 2**-24: no zero, denormal,
        negative, inf or NaN to handle). Dropping those checks saves about a third of the
        function's instructions. Compiled kernels only (tl.fma with bit casts).
        """
        bits = u.to(tl.int32, bitcast=True)
        e_bits = (bits - 0x3F2AAAAB) & -8388608  # 0xFF800000: the exponent of u / (2/3 .. 4/3)
        t = (bits - e_bits).to(tl.float32, bitcast=True) - 1.0
        p = tl.fma(t, -0.13018856942653656, 0.14084610342979431)
        p = tl.fma(t, p, -0.12148627638816834)
        p = tl.fma(t, p, 0.13980610668659210)
        p = tl.fma(t, p, -0.16684235632419586)
        p = tl.fma(t, p, 0.20012299716472626)
        p = tl.fma(t, p, -0.24999669194221497)
        p = tl.fma(t, p, 0.33333182334899902)
        p = tl.fma(t, p, -0.5)
        r = tl.fma(t, t * p, t)
        return tl.fma(e_bits.to(tl.float32) * 1.1920928955078125e-07, 0.69314718246459961, r)

    @triton.jit
    def gumbel_sample_kernel(
        logits_ptr, logits_stride,  # [num_rows, V], row-indexed
        mapping_ptr,  # [num_rows] int32: row -> slot
        temperature_ptr, seeds_ptr,  # [max_num_reqs], slot-indexed
        pos_ptr,  # [num_rows] int64, row-indexed
        q_ptr, q_stride_slot, q_stride_step,  # draft_logits [max_num_reqs, k, V], slot-indexed
        block_max_ptr, block_idx_ptr, num_blocks, counter_ptr, token_ptr,  # partials [num_rows, num_blocks]; [num_rows]
        writer_ptr, writes_ptr, trace_stride_slot,  # [max_num_reqs, k] int32 write trace
        vocab_size, draft_step, salt,
        BLOCK_V: tl.constexpr,
        SAMPLES_PER_REQ: tl.constexpr,
        STORE_Q: tl.constexpr,
        MASK_PADDING: tl.constexpr,
        EARLY_EXIT: tl.constexpr,
        TRACE: tl.constexpr,
        FAST_MATH: tl.constexpr = 0, SINGLE_PASS: tl.constexpr = 0, MAX_BLOCKS: tl.constexpr = 1,
    ):
        row = tl.program_id(0)
        blk = tl.program_id(1)
        slot = tl.load(mapping_ptr + row)
        offs = blk * BLOCK_V + tl.arange(0, BLOCK_V)
        in_vocab = offs < vocab_size
        step = draft_step + row % SAMPLES_PER_REQ
        if EARLY_EXIT and slot < 0:
            # A padded row's result is discarded: skip its memory traffic entirely, and leave a
            # -inf partial so the reduction still has a defined (unused) answer.
            tl.store(block_max_ptr + row * num_blocks + blk, float("-inf"))
            tl.store(block_idx_ptr + row * num_blocks + blk, blk * BLOCK_V)
        else:
            # Row bases in int64 (scalar work, once per program); per-element offsets stay int32.
            row_logits = logits_ptr + row.to(tl.int64) * logits_stride
            logits = tl.load(row_logits + offs, mask=in_vocab, other=float("-inf")).to(tl.float32)
            if MASK_PADDING:
                is_valid = slot >= 0
                temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
                seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
                # Broadcast the scalar before combining: Triton 3.9's interpreter rejects
                # `block_mask & scalar` when the scalar came from tl.load.
                store_mask = in_vocab & ((offs * 0 + slot) >= 0)
            else:
                temp = tl.load(temperature_ptr + slot)
                seed = tl.load(seeds_ptr + slot)
                store_mask = in_vocab
            scaled = logits
            if temp != 0.0:
                if FAST_MATH:
                    # One correctly rounded reciprocal per program, a multiply per element: within
                    # 1.5 ulp of logits / temp (the compiled `/` is itself a 2-ulp division).
                    scaled = logits * tl.math.div_rn(1.0, temp)
                else:
                    scaled = logits / temp
            if STORE_Q:
                # int64 before the multiply: slot * stride overflows int32 for big buffers
                # (vLLM #46560 is that bug in another sampler kernel).
                q_row = q_ptr + (slot.to(tl.int64) * q_stride_slot + step * q_stride_step)
                tl.store(q_row + offs, scaled, mask=store_mask)
            scores = scaled
            if temp != 0.0:
                key = row_key(seed, tl.load(pos_ptr + row), salt)
                # E = -log(u) must be accurate *relative* to E: the largest Gumbel values (the
                # likely winners) come from u near 1, where E is tiny. So the inner log stays the
                # accurate one everywhere; the outer log may be the fast hardware one.
                if FAST_MATH >= 2:
                    expo = -_log_unit_interval(uniform(key, offs))
                else:
                    expo = -tl.log(uniform(key, offs))
                if FAST_MATH >= 1:
                    scores = scaled - 0.6931471805599453 * _lg2_approx(expo)
                else:
                    scores = scaled - tl.log(expo)
            # A NaN score (NaN logits or temperature) counts as +inf, as in the torch reference, and
            # a lane past the vocabulary never wins (a negative temperature would turn its -inf
            # into +inf): whatever the inputs, the token is inside the vocabulary.
            scores = tl.where(scores != scores, float("inf"), scores)
            scores = tl.where(in_vocab, scores, float("-inf"))
            # Max, then the first index holding it: the same answer as tl.argmax (first index of
            # the maximum) with cheaper per-element work (no (value, index) pair reduction).
            best = tl.max(scores, axis=0)
            best_idx = tl.min(tl.where(scores == best, offs, 2147483647), axis=0)
            tl.store(block_max_ptr + row * num_blocks + blk, best)
            tl.store(block_idx_ptr + row * num_blocks + blk, best_idx.to(tl.int64))
            if TRACE:
                if blk == 0:
                    t_off = slot.to(tl.int64) * trace_stride_slot + step
                    if MASK_PADDING:
                        if slot >= 0:
                            _record_write(writer_ptr, writes_ptr, t_off, row)
                    else:
                        _record_write(writer_ptr, writes_ptr, t_off, row)
        if SINGLE_PASS:
            # No second pass: the row's last program to finish reduces the partials to the token.
            _last_program_reduces(block_max_ptr, block_idx_ptr, counter_ptr, token_ptr, row, num_blocks, MAX_BLOCKS)

    @triton.jit
    def _last_program_reduces(block_max_ptr, block_idx_ptr, counter_ptr, token_ptr, row, num_blocks,
                              MAX_BLOCKS: tl.constexpr):
        """The reduction over a row's blocks, done by the row's last program to finish (one pass).

        Every program has stored its block's (max, first index of the max); an atomic counts them,
        with release/acquire order, so the program that counts last sees all of its row's partials.
        It takes the largest max and, among equal ones, the smallest index -- the first index of the
        row's maximum, as torch.argmax and the two-pass reduction pick -- and sets the counter back
        to 0 for the next launch (a CUDA graph replays with the same counters)."""
        tl.debug_barrier()  # this program's partial stores are issued before it counts itself done
        done = tl.atomic_add(counter_ptr + row, 1, sem="acq_rel")
        if done == num_blocks - 1:
            blocks = tl.arange(0, MAX_BLOCKS)
            valid = blocks < num_blocks
            part = row * num_blocks + blocks
            maxes = tl.load(block_max_ptr + part, mask=valid, other=float("-inf"), cache_modifier=".cg")
            idxs = tl.load(block_idx_ptr + part, mask=valid, other=0, cache_modifier=".cg")
            best = tl.max(maxes, axis=0)
            tl.store(token_ptr + row, tl.min(tl.where(valid & (maxes == best), idxs, 1 << 62), axis=0))
            tl.store(counter_ptr + row, 0)


@dataclass
class WriteTrace:
    """Who stored to `draft_logits[slot, step]` in one launch.

    writer[slot, step]: the row whose store landed last (-1: nobody stored);
    writes[slot, step]: how many rows stored there (> 1 means rows collided).
    On the CPU, programs run in grid order, so the last row wins every collision; on a GPU the
    order is a race, and `writer` records the race's winner for the trace store.
    """

    writer: torch.Tensor
    writes: torch.Tensor

    @classmethod
    def empty(cls, max_num_reqs: int, num_steps: int, device) -> "WriteTrace":
        return cls(
            writer=torch.full((max_num_reqs, num_steps), -1, dtype=torch.int32, device=device),
            writes=torch.zeros((max_num_reqs, num_steps), dtype=torch.int32, device=device),
        )

    def reset(self) -> None:
        self.writer.fill_(-1)
        self.writes.zero_()


def gumbel_sample(
    logits: torch.Tensor,
    state: SamplingState,
    *,
    draft_step: int = 0,
    samples_per_req: int = 1,
    masked: bool = True,
    early_exit: bool = False,
    trace: WriteTrace | None = None,
    block_v: int | None = None,
    num_warps: int | None = None,
    fast_math: int | None = None,
    validate: bool = True,
    backend: str | None = None,
) -> torch.Tensor:
    """Sample one token per row; store each row's scaled logits into `state.draft_logits[slot, step]`.

    Returns int64 tokens [num_rows], always inside the vocabulary. `state` holds what the launch
    reads by row and by slot (:class:`~labkit.kernels.sampling_state.SamplingState`); its
    `draft_logits=None` is greedy drafting's case when no q is kept (nothing slot-indexed is
    written). `masked` selects the kernel after the fix. `early_exit` (masked only) skips padded
    rows' loads as well as their stores; a padded row then returns token 0.

    Inputs: logits [num_rows, V] (any float dtype, any strides), state.idx_mapping [>= num_rows]
    signed int, temperature float32 and seeds int64 [max_num_reqs], positions [>= num_rows]
    int32/int64, draft_logits float32 [max_num_reqs, k, V] (any strides whose elements do not
    overlap). With `validate` (the default) every input is checked first, values too: slots <
    max_num_reqs, temperatures of the slots read >= 0 and not NaN, no NaN in live rows' logits (a padded
    row, slot -1, may hold NaN or inf: it changes no live row's token or q) -- a
    LabkitInputError says which argument is wrong. Reading values synchronises with a GPU, so
    callers that checked their inputs where they entered (the Speculator, benchmarks) pass
    ``validate=False`` and the launch trusts them. (Should NaN logits reach the kernel anyway, NaN
    counts as +inf on every backend.)

    `block_v`, `num_warps` and `fast_math` tune the compiled kernel (see :func:`launch_config`);
    they do not change which token is sampled except at float-rounding ties.
    """
    which = check_backend(backend)
    check_switches(masked, early_exit)
    _check_tuning(block_v, num_warps, fast_math)
    if validate:
        check_layout(logits, state, trace, draft_step=draft_step, samples_per_req=samples_per_req, backend=which)
        check_values(logits, state, masked)
    if which == "torch":
        return _sample_torch(logits, state, draft_step=draft_step, samples_per_req=samples_per_req,
                             masked=masked, early_exit=early_exit, trace=trace)
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    launch, finish = _launcher(logits, state.packed(), draft_step=draft_step, samples_per_req=samples_per_req,
                               masked=masked, early_exit=early_exit, trace=trace,
                               cfg=_resolve_config(logits.shape[0], logits.shape[1], block_v, num_warps, fast_math))
    launch()
    return finish()


# On a GPU the kernel is bound by its per-element arithmetic (a 32-bit hash and two logs) as much
# as by memory, so it wants many elements per thread: the block-wide reductions, the per-row key
# and the scalar loads are paid once per program. Measured on an H200 (labkit/data/gpu/): see
# labkit/gpu/kernel.py (bench_sweep), which records the sweep that chose these.
GPU_BLOCK_V = 4096
GPU_NUM_WARPS = 8
# Fast math levels for compiled kernels (the interpreter always runs level 0):
#   0  libdevice logf for both logs of -log(-log(u)), division per element
#   1  the outer log on the hardware lg2 unit (MUFU), a reciprocal per program
#   2  as 1, and the inner log without libdevice's special cases (same values for u >= 2**-24)
GPU_FAST_MATH = 2
# The reduction over a row's blocks: after the kernel, in torch (False: an argmax and a gather, two
# more launches), or in the kernel by the row's last program (True: one launch). The same tokens
# either way. Measured on an H200 (issue 17; labkit/data/gpu/h200.json, section kernel, at vocab
# 128256 and 151936): the single pass makes the whole call faster up to 128 rows (0.63-0.77 of a
# same-bytes copy against 0.42-0.73; 64 rows: 0.74-0.75 against 0.65-0.66) and no faster from 256
# rows (0.79-0.81 against 0.77-0.82: its counting slows the kernel as much as it saves), short of
# the targets either way (0.80 at 64 rows, 0.88 at 256-512), so the default stays two passes.
SINGLE_PASS = False


def launch_config(num_rows: int, vocab: int, *, interpreted: bool | None = None) -> dict:
    """Block size, warps and fast-math level the launcher picks for a launch of this shape.

    In the interpreter (and for the torch backend's reference semantics) the kernel keeps its
    teaching configuration: blocks of 1024, exact libdevice math. Compiled, it takes big blocks
    unless that would leave most of the GPU idle (few rows, small vocabularies).
    """
    if interpreted is None:
        interpreted = _backend.KERNELS_INTERPRETED
    pow2 = max(MIN_BLOCK_V, 1 << max(0, (vocab - 1).bit_length()))
    if interpreted:
        return dict(block_v=min(DEFAULT_BLOCK_V, pow2), num_warps=4, fast_math=0, single_pass=SINGLE_PASS)
    block_v = min(GPU_BLOCK_V, pow2)
    # Fewer, bigger programs only pay off when they still fill the machine.
    while block_v > DEFAULT_BLOCK_V and num_rows * -(-vocab // block_v) < 264:
        block_v //= 2
    num_warps = max(1, min(GPU_NUM_WARPS, block_v // 256))
    return dict(block_v=block_v, num_warps=num_warps, fast_math=GPU_FAST_MATH, single_pass=SINGLE_PASS)


def _check_tuning(block_v, num_warps, fast_math) -> None:
    """The tuning switches, checked on every backend (the torch reference ignores valid ones)."""
    if block_v is not None:
        check_power_of_two("block_v", block_v, MIN_BLOCK_V, MAX_BLOCK_V)
    if num_warps is not None:
        check_power_of_two("num_warps", num_warps, 1, 32)
    if fast_math is not None:
        check_int("fast_math", fast_math, low=0, high=2)


def _resolve_config(num_rows, vocab, block_v=None, num_warps=None, fast_math=None, single_pass=None) -> dict:
    """launch_config with the caller's (checked) overrides."""
    cfg = launch_config(num_rows, vocab)
    if single_pass is not None:
        cfg["single_pass"] = bool(single_pass)
    if block_v is not None:
        cfg["block_v"] = int(block_v)
        if num_warps is None:
            cfg["num_warps"] = max(1, min(GPU_NUM_WARPS, block_v // 256))
    if num_warps is not None:
        cfg["num_warps"] = int(num_warps)
    if fast_math is not None:
        if fast_math and _backend.KERNELS_INTERPRETED:
            raise LabkitInputError("fast_math uses inline PTX, which Triton's interpreter cannot run; "
                                   "use fast_math=0 on the CPU")
        cfg["fast_math"] = int(fast_math)
    return cfg


def kernel_launcher(logits, state: SamplingState, *, draft_step=0, samples_per_req=1, masked=True, early_exit=False,
                    trace=None, block_v=None, num_warps=None, fast_math=None, single_pass=None):
    """A function that launches the sampling kernel alone, with its partial-result buffers made once.

    Returns ``(launch, finish)``: ``launch()`` runs the kernel (no allocation, no checks),
    ``finish()`` returns the tokens (reducing the partial results if the kernel did not). Benchmarks time
    ``launch`` to count the kernel's own bytes; :func:`gumbel_sample` is both plus the checks.
    `single_pass` (default :data:`SINGLE_PASS`): the kernel reduces each row's blocks itself, and
    ``finish()`` only hands its tokens back; False leaves that to ``finish()`` (two torch launches).
    Here only the layout is checked (unit stride along the vocabulary and the 1-D inputs);
    the values are the caller's to vouch for.
    """
    check_switches(masked, early_exit)
    _check_tuning(block_v, num_warps, fast_math)
    check_launchable(logits, state, draft_step, samples_per_req)
    return _launcher(logits, state, draft_step=draft_step, samples_per_req=samples_per_req, masked=masked,
                     early_exit=early_exit, trace=trace,
                     cfg=_resolve_config(logits.shape[0], logits.shape[1], block_v, num_warps, fast_math,
                                         single_pass))


def _launcher(logits, state: SamplingState, *, draft_step, samples_per_req, masked, early_exit, trace, cfg):
    """(launch, finish) for inputs already checked and laid out as the kernel reads them."""
    num_rows, vocab = logits.shape
    block_v = cfg["block_v"]
    num_blocks = triton.cdiv(vocab, block_v)
    device = logits.device
    block_max = torch.empty((num_rows, num_blocks), dtype=torch.float32, device=device)
    block_idx = torch.empty((num_rows, num_blocks), dtype=torch.int64, device=device)
    draft_logits = state.draft_logits
    store_q = draft_logits is not None
    q = draft_logits if store_q else block_max  # a placeholder pointer, never written
    q_strides = (draft_logits.stride(0), draft_logits.stride(1)) if store_q else (0, 0)
    writer = trace.writer if trace is not None else block_idx
    writes = trace.writes if trace is not None else block_idx
    # One block per row needs no reduction (its partial is the token); more reduce in the kernel
    # (single pass) or in torch after it (two passes: an argmax and a gather, two more launches).
    single_pass = bool(cfg.get("single_pass")) and num_blocks > 1
    tokens = torch.empty(num_rows, dtype=torch.int64, device=device) if single_pass else block_idx
    counters = row_counters(device, num_rows) if single_pass else block_idx
    kernel = gumbel_sample_kernel[(num_rows, num_blocks)]

    def launch() -> None:
        if num_rows == 0:
            return
        kernel(
            logits, logits.stride(0),
            state.idx_mapping, state.temperature, state.seeds, state.positions,
            q, q_strides[0], q_strides[1],
            block_max, block_idx, num_blocks, counters, tokens,
            writer, writes, writer.stride(0),
            vocab, draft_step, SALT_DRAFT,
            BLOCK_V=block_v,
            SAMPLES_PER_REQ=samples_per_req,
            STORE_Q=store_q,
            MASK_PADDING=masked,
            EARLY_EXIT=early_exit,
            TRACE=trace is not None,
            FAST_MATH=cfg["fast_math"],
            SINGLE_PASS=single_pass,
            MAX_BLOCKS=max(1, 1 << (num_blocks - 1).bit_length()),
            num_warps=cfg["num_warps"],
        )

    def finish() -> torch.Tensor:
        if single_pass:
            return tokens
        if num_blocks == 1:
            return block_idx[:, 0]
        best = block_max.argmax(dim=1, keepdim=True)
        return block_idx.gather(1, best).squeeze(1)

    return launch, finish


_ROW_COUNTERS: dict[tuple[str, int | None], list[torch.Tensor]] = {}


def row_counters(device, num_rows: int) -> torch.Tensor:
    """The single pass's per-row counters on `device` (int32, at least `num_rows`), zero between launches.

    Each launch leaves them at zero (a row's last program resets its counter), so they are made
    once per device and reused, with no fill launched before each call. Keyed by the device; never
    freed, because a captured CUDA graph keeps the address it was captured with (a bigger set is
    added when a launch needs more rows). Launches that run concurrently on several streams of one
    device would share them: the kit launches on one stream."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    made = _ROW_COUNTERS.setdefault((device.type, device.index), [])
    if not made or made[-1].numel() < num_rows:
        made.append(torch.zeros(max(num_rows, 4096, 2 * (made[-1].numel() if made else 0)), dtype=torch.int32,
                                device=device))
    return made[-1]


def gumbel_sample_torch(logits, state: SamplingState, *, draft_step=0, samples_per_req=1, masked=True,
                        early_exit=False, trace=None) -> torch.Tensor:
    """Pure-torch reference with the kernel's semantics, store order included.

    Rows store one after another in row order, as the interpreter runs programs, so a later row
    overwrites an earlier one that holds the same slot. (A vectorised `q[slots] = x` with repeated
    slots leaves the winner undefined, which would hide exactly the effect this kit teaches.)
    With `early_exit`, a padded row returns token 0, as the kernel's -inf partial results reduce to.
    """
    check_switches(masked, early_exit)
    check_state(state)
    return _sample_torch(logits, state, draft_step=draft_step, samples_per_req=samples_per_req, masked=masked,
                         early_exit=early_exit, trace=trace)


def _sample_torch(logits, state: SamplingState, *, draft_step, samples_per_req, masked, early_exit, trace):
    idx_mapping, temperature, seeds, positions, draft_logits = (
        state.idx_mapping, state.temperature, state.seeds, state.positions, state.draft_logits)
    num_rows, vocab = logits.shape
    slots = idx_mapping[:num_rows].to(torch.int64)
    if not masked and bool((slots < 0).any()):
        # Python indexing would wrap -1 to the last slot: a silent wrong write, not the crash
        # the kernel would cause. Refuse, as the launcher does.
        raise padded_slot_error("gumbel_sample_torch", (slots < 0).nonzero().flatten().tolist())
    valid = slots >= 0 if masked else torch.ones_like(slots, dtype=torch.bool)
    safe = slots.clamp(min=0)
    temp = torch.where(valid, temperature[safe], torch.zeros((), dtype=temperature.dtype, device=logits.device))
    seed = torch.where(valid, seeds[safe], torch.zeros((), dtype=seeds.dtype, device=logits.device))
    logits = logits.to(torch.float32)
    hot = temp != 0
    scaled = torch.where(hot[:, None], logits / torch.where(hot, temp, 1.0)[:, None], logits)
    key = row_key_torch(seed, positions[:num_rows], SALT_DRAFT)
    vocab_index = torch.arange(vocab, device=logits.device)
    noise = gumbel_torch(key[:, None], vocab_index[None, :])
    scores = torch.where(hot[:, None], scaled + noise, scaled)
    scores = torch.where(scores.isnan(), float("inf"), scores)  # NaN counts as +inf, as in the kernel
    steps = draft_step + torch.arange(num_rows, device=logits.device) % samples_per_req
    for row in range(num_rows):
        if not bool(valid[row]):
            continue
        slot, step = int(slots[row]), int(steps[row])
        if draft_logits is not None:
            draft_logits[slot, step] = scaled[row]
        if trace is not None:
            trace.writer[slot, step] = row
            trace.writes[slot, step] += 1
    tokens = scores.argmax(dim=1)
    if early_exit:
        tokens = torch.where(valid, tokens, torch.zeros_like(tokens))
    return tokens
