"""The Gumbel sampling kernel of the drafter: where the bug lives, and where half of the fix goes.

One program per (batch row, vocab block). A program

1. loads its row's request-state slot from the row -> slot mapping (`idx_mapping`),
2. loads the slot's temperature and seed,
3. scales its block of logits by the temperature and stores them, *indexed by slot*, into
   `draft_logits[slot, step, block]` -- this is q, the draft distribution the rejection sampler
   will verify against,
4. adds Gumbel noise keyed by (seed, position, vocab index) and writes the block's max and argmax;
   a reduction over blocks (in torch, or with `single_pass` a small Triton launch over one packed
   word per program) picks the token. argmax(logits / T + Gumbel) is an exact sample from
   softmax(logits / T).

Under a padded CUDA graph the grid has `num_reqs_padded` rows. Rows past `num_reqs` read whatever
the mapping buffer holds there. Before the fix that was a stale slot, often one that a live row
also holds, so two programs stored to the same `draft_logits[slot, step]` and the padded one, which
runs on garbage input, could win. `masked=True` is the kernel after the fix: what it does with a
padded row is exercise (b) of notebook 07, which notebook 03 and docs/MECHANICS.md explain afterwards.

`samples_per_req` > 1 serves DFlash-style drafters, whose sample row r proposes draft step
`draft_step + r % samples_per_req` of its request.

This file reads top down: the kernel, its three slot-indexed accesses (the fix's lines), then the
launchers and the torch reference. How it is tuned for a GPU lives beside it:
:mod:`labkit.kernels.gumbel_tuning` (blocks, warps, the single-pass reduction) and
:mod:`labkit.kernels.fast_math` (the fast logs; the same tokens). Its inputs' checks:
:mod:`labkit.kernels.gumbel_inputs`.

Upstream this is ``gumbel_block_argmax`` / ``_gumbel_sample_kernel`` in
``vllm/v1/worker/gpu/sample/gumbel.py``; docs/VLLM_MAP.md says how the two differ (noise, q, blocks).
"""
# (Kept out of the docstring, which `?` shows before the exercises.) With `masked=True`, rows with
# slot < 0 load temperature and seed with `other=0` (a noiseless argmax that is thrown away) and do
# not store.

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.checks import check_backend
from labkit.errors import padded_slot_error
from labkit.kernels.fast_math import divide_by_temperature, gumbel
from labkit.kernels.gumbel_inputs import check_launchable, check_layout, check_state, check_switches, check_values
from labkit.kernels.gumbel_tuning import (
    block_argmax,
    check_tuning,
    dependent_launch_on,
    grid_parts,
    let_the_read_out_start,
    packed_best,
    program_row_and_block,
    resolve_config,
    row_tokens_kernel,
)
from labkit.kernels.noise import SALT_DRAFT, gumbel_torch, row_key, row_key_torch
from labkit.kernels.sampling_state import SamplingState
from labkit.kernels.triton_import import tl, triton


@triton.jit
def gumbel_sample_kernel(
    logits_ptr, logits_stride,  # [num_rows, V], row-indexed
    mapping_ptr,  # [num_rows] int32: row -> slot
    temperature_ptr, seeds_ptr,  # [max_num_reqs], slot-indexed
    pos_ptr,  # [num_rows] int64, row-indexed
    q_ptr, q_stride_slot, q_stride_step,  # draft_logits [max_num_reqs, k, V], slot-indexed
    block_max_ptr, block_idx_ptr, num_blocks,  # partials [num_rows, num_blocks] (single pass: packed in block_idx)
    writer_ptr, writes_ptr, trace_stride_slot,  # [max_num_reqs, k] int32 write trace
    vocab_size, draft_step, salt, row_start,
    BLOCK_V: tl.constexpr,
    SAMPLES_PER_REQ: tl.constexpr,
    STORE_Q: tl.constexpr,
    MASK_PADDING: tl.constexpr,
    EARLY_EXIT: tl.constexpr,
    TRACE: tl.constexpr,
    FAST_MATH: tl.constexpr = 0, SINGLE_PASS: tl.constexpr = 0, PDL: tl.constexpr = 0,
):
    # The grid is (vocab blocks, rows): a row's blocks are consecutive programs, which a GPU runs side
    # by side. With early exit the rows come alternately from the batch's front and back (see gumbel_tuning).
    row, blk = program_row_and_block(row_start, EARLY_EXIT)
    let_the_read_out_start(PDL)  # compiled single pass only: see gumbel_tuning
    slot = tl.load(mapping_ptr + row)  # whatever the mapping holds in this row: live, stale or -1
    # The row's position is read here, not where the noise needs it: a load placed after the
    # temperature's branch is issued only once the slot and then the temperature have arrived.
    pos = tl.load(pos_ptr + row)
    offs = blk * BLOCK_V + tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    step = draft_step + row % SAMPLES_PER_REQ
    if EARLY_EXIT and slot < 0:
        # A padded row's result is discarded: skip its logits and its store (all but a few bytes
        # of its traffic), and leave a -inf partial so the reduction still has a defined (unused) answer.
        best, best_idx = tl.full([], float("-inf"), tl.float32), blk * BLOCK_V
    else:
        # Row bases in int64 (scalar work, once per program); per-element offsets stay int32.
        row_logits = logits_ptr + row.to(tl.int64) * logits_stride
        logits = tl.load(row_logits + offs, mask=in_vocab, other=float("-inf")).to(tl.float32)
        temp, seed = slot_temperature_and_seed(temperature_ptr, seeds_ptr, slot, MASK_PADDING)
        scaled = logits
        if temp != 0.0:
            scaled = divide_by_temperature(logits, temp, FAST_MATH)
        if STORE_Q:
            # q is stored *by slot*: two rows that hold one slot store to the same place.
            tl.store(q_row_start(q_ptr, slot, step, q_stride_slot, q_stride_step) + offs, scaled,
                     mask=q_store_mask(in_vocab, offs, slot, MASK_PADDING))
        scores = scaled
        if temp != 0.0:
            scores = scaled + gumbel(row_key(seed, pos, salt), offs, FAST_MATH)
        # The block's max and the first index holding it, as torch.argmax picks: a NaN score (NaN
        # logits or temperature) counts as +inf, as in the torch reference, and a lane past the
        # vocabulary never wins (a negative temperature would turn its -inf into +inf): whatever
        # the inputs, the token is inside the vocabulary.
        best, best_idx = block_argmax(scores, offs, in_vocab, (blk + 1) * BLOCK_V > vocab_size)
        if TRACE and blk == 0:
            record_write(writer_ptr, writes_ptr, trace_stride_slot, slot, step, row, MASK_PADDING)
    if SINGLE_PASS:
        # One packed (max, first index) word per program; a small launch reduces each row's words.
        tl.store(block_idx_ptr + row * num_blocks + blk, packed_best(best, best_idx))
    else:
        tl.store(block_max_ptr + row * num_blocks + blk, best)
        tl.store(block_idx_ptr + row * num_blocks + blk, best_idx.to(tl.int64))


# The kernel's three slot-indexed accesses. `MASK_PADDING` is the kernel after the fix: a padded row
# (slot -1) reads neither buffer and stores nothing.

@triton.jit
def slot_temperature_and_seed(temperature_ptr, seeds_ptr, slot, MASK_PADDING: tl.constexpr):
    """The row's temperature and seed, read by its slot."""
    if MASK_PADDING:
        is_valid = slot >= 0
        temp = tl.load(temperature_ptr + slot, mask=is_valid, other=0.0)
        seed = tl.load(seeds_ptr + slot, mask=is_valid, other=0)
    else:
        temp = tl.load(temperature_ptr + slot)
        seed = tl.load(seeds_ptr + slot)
    return temp, seed


@triton.jit
def q_store_mask(in_vocab, offs, slot, MASK_PADDING: tl.constexpr):
    """Which lanes of the block store into q."""
    if MASK_PADDING:
        # Broadcast the scalar before combining: Triton 3.9's interpreter rejects
        # `block_mask & scalar` when the scalar came from tl.load.
        return in_vocab & ((offs * 0 + slot) >= 0)
    return in_vocab


@triton.jit
def q_row_start(q_ptr, slot, step, q_stride_slot, q_stride_step):
    """Where draft_logits[slot, step, :] starts."""
    # int64 before the multiply: slot * stride overflows int32 for big buffers (vLLM #47383 fixed
    # this offset, slot * k * vocab, in its verification kernels).
    return q_ptr + (slot.to(tl.int64) * q_stride_slot + step * q_stride_step)


@triton.jit
def record_write(writer_ptr, writes_ptr, trace_stride_slot, slot, step, row, MASK_PADDING: tl.constexpr):
    """The write trace: this row stored into q[slot, step] (a masked padded row stored nothing)."""
    offset = slot.to(tl.int64) * trace_stride_slot + step
    if MASK_PADDING:
        if slot >= 0:
            tl.store(writer_ptr + offset, row)
            tl.atomic_add(writes_ptr + offset, 1)
    else:
        tl.store(writer_ptr + offset, row)
        tl.atomic_add(writes_ptr + offset, 1)


@dataclass
class WriteTrace:
    """Who stored to `draft_logits[slot, step]` in one launch.

    writer[slot, step]: the row whose store landed last (negative where nobody stored);
    writes[slot, step]: how many rows stored there (> 1 means rows collided).
    On the CPU, programs run in grid order, so the last row wins every collision; on a GPU the
    order is a race, and `writer` records the race's winner for the trace store.
    """

    writer: torch.Tensor
    writes: torch.Tensor

    @classmethod
    def empty(cls, max_num_reqs: int, k: int, device) -> "WriteTrace":
        return cls(
            writer=torch.full((max_num_reqs, k), -1, dtype=torch.int32, device=device),
            writes=torch.zeros((max_num_reqs, k), dtype=torch.int32, device=device),
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
    written). `masked` selects the kernel after the fix. `early_exit` (masked only) is a variant
    of the fixed kernel that does less work for a padded row, which then returns token 0.

    Inputs: logits [num_rows, V] (any float dtype, any strides), state.idx_mapping [>= num_rows]
    signed int, temperature float32 and seeds int64 [max_num_reqs], positions [>= num_rows]
    int32/int64, draft_logits float32 [max_num_reqs, k, V] (any strides whose elements do not
    overlap). With `validate` (the default) every input is checked first, values too: slots <
    max_num_reqs, temperatures of the slots read >= 0 and not NaN, no NaN in live rows' logits (a padded
    row may hold NaN or inf: it changes no live row's token or q) -- a
    LabkitInputError says which argument is wrong. Reading values synchronises with a GPU, so
    callers that checked their inputs where they entered (the Speculator, benchmarks) pass
    ``validate=False`` and the launch trusts them. (Should NaN logits reach the kernel anyway, NaN
    counts as +inf on every backend.)

    `block_v`, `num_warps` and `fast_math` tune the compiled kernel (see
    :func:`labkit.kernels.gumbel_tuning.launch_config`); they do not change which token is
    sampled except at float-rounding ties.
    """
    which = check_backend(backend)
    check_switches(masked, early_exit)
    check_tuning(block_v, num_warps, fast_math)
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
                               cfg=resolve_config(logits.shape[0], logits.shape[1], block_v, num_warps, fast_math))
    launch()
    return finish()


def kernel_launcher(logits, state: SamplingState, *, draft_step=0, samples_per_req=1, masked=True, early_exit=False,
                    trace=None, block_v=None, num_warps=None, fast_math=None, single_pass=None):
    """A function that launches the sampling kernel alone, with its partial-result buffers made once.

    Returns ``(launch, finish)``: ``launch()`` runs the kernel (no allocation, no checks),
    ``finish()`` returns the tokens (reducing the partial results if the kernel did not). Benchmarks time
    ``launch`` to count the kernel's own bytes; :func:`gumbel_sample` is both plus the checks.
    `single_pass` (default :data:`SINGLE_PASS`): each program leaves its block's best as one packed
    word, and ``launch()`` also runs the small kernel that reduces each row's words to its token
    (``finish()`` only hands the tokens back); False leaves the partials to ``finish()`` (an argmax
    and a gather in torch), and ``launch()`` is the sampling kernel alone.
    Here only the layout is checked (unit stride along the vocabulary and the 1-D inputs);
    the values are the caller's to vouch for.
    """
    check_switches(masked, early_exit)
    check_tuning(block_v, num_warps, fast_math)
    check_launchable(logits, state, draft_step, samples_per_req)
    return _launcher(logits, state, draft_step=draft_step, samples_per_req=samples_per_req, masked=masked,
                     early_exit=early_exit, trace=trace,
                     cfg=resolve_config(logits.shape[0], logits.shape[1], block_v, num_warps, fast_math,
                                         single_pass))


def _launcher(logits, state: SamplingState, *, draft_step, samples_per_req, masked, early_exit, trace, cfg):
    """(launch, finish) for inputs already checked and laid out as the kernel reads them."""
    num_rows, vocab = logits.shape
    block_v = cfg["block_v"]
    num_blocks = triton.cdiv(vocab, block_v)
    device = logits.device
    # One block per row needs no reduction (its partial is the token); more are reduced after the
    # kernel, in one small Triton launch over packed words (single pass) or in torch (two passes: an
    # argmax and a gather over the partials).
    single_pass = bool(cfg.get("single_pass")) and num_blocks > 1
    pdl = single_pass and bool(cfg.get("pdl")) and dependent_launch_on(device)
    block_max = torch.empty((1, 1) if single_pass else (num_rows, num_blocks), dtype=torch.float32, device=device)
    block_idx = torch.empty((num_rows, num_blocks), dtype=torch.int64, device=device)  # single pass: packed words
    draft_logits = state.draft_logits
    store_q = draft_logits is not None
    q = draft_logits if store_q else block_max  # a placeholder pointer, never written
    q_strides = (draft_logits.stride(0), draft_logits.stride(1)) if store_q else (0, 0)
    writer = trace.writer if trace is not None else block_idx
    writes = trace.writes if trace is not None else block_idx
    tokens = torch.empty(num_rows, dtype=torch.int64, device=device) if single_pass else block_idx
    parts = [(start, gumbel_sample_kernel[(num_blocks, rows)]) for start, rows in grid_parts(num_rows)]
    read_tokens = row_tokens_kernel[(num_rows,)]
    chunk = min(1024, triton.next_power_of_2(num_blocks))
    early = {"launch_pdl": True} if pdl else {}  # the read-out may start before the kernel ends

    def launch() -> None:
        for row_start, kernel in parts:  # one part, unless the batch has more than MAX_GRID_ROWS rows
            kernel(
                logits, logits.stride(0),
                state.idx_mapping, state.temperature, state.seeds, state.positions,
                q, q_strides[0], q_strides[1],
                block_max, block_idx, num_blocks,
                writer, writes, writer.stride(0),
                vocab, draft_step, SALT_DRAFT, row_start,
                BLOCK_V=block_v,
                SAMPLES_PER_REQ=samples_per_req,
                STORE_Q=store_q,
                MASK_PADDING=masked,
                EARLY_EXIT=early_exit,
                TRACE=trace is not None,
                FAST_MATH=cfg["fast_math"],
                SINGLE_PASS=single_pass,
                PDL=pdl,
                num_warps=cfg["num_warps"],
            )
        if single_pass and num_rows:
            read_tokens(block_idx, tokens, num_blocks, CHUNK=chunk, PDL=pdl, num_warps=1, **early)

    def finish() -> torch.Tensor:
        if single_pass:
            return tokens
        if num_blocks == 1:
            return block_idx[:, 0]
        best = block_max.argmax(dim=1, keepdim=True)
        return block_idx.gather(1, best).squeeze(1)

    return launch, finish


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
    valid, temp, seed = _slot_temperature_and_seed_torch(slots, temperature, seeds, masked)
    logits = logits.to(torch.float32)
    hot = temp != 0
    scaled = torch.where(hot[:, None], logits / torch.where(hot, temp, 1.0)[:, None], logits)
    key = row_key_torch(seed, positions[:num_rows], SALT_DRAFT)
    vocab_index = torch.arange(vocab, device=logits.device)
    noise = gumbel_torch(key[:, None], vocab_index[None, :])
    scores = torch.where(hot[:, None], scaled + noise, scaled)
    scores = torch.where(scores.isnan(), float("inf"), scores)  # NaN counts as +inf, as in the kernel
    steps = draft_step + torch.arange(num_rows, device=logits.device) % samples_per_req
    _store_q_torch(scaled, slots, steps, valid, draft_logits, trace)
    tokens = scores.argmax(dim=1)
    if early_exit:
        tokens = torch.where(valid, tokens, torch.zeros_like(tokens))
    return tokens


# The torch reference's slot-indexed accesses, as the kernel's above: with `masked` (after the
# fix) a padded row (slot -1) reads temperature 0 and seed 0 and stores nothing.

def _slot_temperature_and_seed_torch(slots, temperature, seeds, masked):
    """Which rows are live, and each row's temperature and seed, read by its slot."""
    valid = slots >= 0 if masked else torch.ones_like(slots, dtype=torch.bool)
    safe = slots.clamp(min=0)
    temp = torch.where(valid, temperature[safe], torch.zeros((), dtype=temperature.dtype, device=slots.device))
    seed = torch.where(valid, seeds[safe], torch.zeros((), dtype=seeds.dtype, device=slots.device))
    return valid, temp, seed


def _store_q_torch(scaled, slots, steps, valid, draft_logits, trace):
    """Each row's store into q[slot, step], one row after another (a later row wins a shared slot)."""
    # The rows' slots and steps as Python numbers first: reading them from the tensors one element per
    # row cost more than the stores themselves (run_proof launches 16384 rows).
    rows = zip(valid.tolist(), slots.tolist(), steps.tolist(), strict=True)
    for row, (live, slot, step) in enumerate(rows):
        if not live:
            continue
        if draft_logits is not None:
            draft_logits[slot, step] = scaled[row]
        if trace is not None:
            trace.writer[slot, step] = row
            trace.writes[slot, step] += 1
