"""The rejection sampler: verify k draft tokens against the target model, outside the graph.

For draft step j of a request with draft token x (Leviathan et al. 2023, arXiv 2211.17192):

    p = softmax(target_logits[row, j] / T)      the target distribution
    q = softmax(draft_logits[slot, j])           the draft distribution, read *by slot*
    accept x if  u < p(x) / q(x),  u ~ U(0, 1)
    at the first rejection emit a token from the residual norm(max(0, p - q)) and stop;
    if all k are accepted, emit a bonus token from p = softmax(target_logits[row, k] / T).

The emitted tokens are distributed exactly as p -- *if* q is the distribution x was drawn from.
This is why the stale-slot bug matters: the drafter drew x from the right logits, but a padded row
then overwrote `draft_logits[slot, j]`, so the test here uses a wrong q.

Greedy drafting keeps no q: the draft is deterministic given the context, so q is one-hot at x
(accept with probability p(x); the residual is p without x). A request with temperature 0 is
verified greedily (accept iff x is the target's argmax).

The kernel computes, per (row, j), the accept flag and the token to emit if j is the first
rejection (j = k: the bonus token) -- all independent, one program each. `combine_verdicts`
turns them into the emitted tokens in torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit import checks
from labkit.checks import FLOAT_DTYPES
from labkit.errors import LabkitInputError
from labkit.kernels.noise import (
    SALT_ACCEPT,
    SALT_BONUS,
    SALT_RESIDUAL,
    gumbel_torch,
    row_key,
    row_key_torch,
    uniform,
    uniform_at_zero,
    uniform_torch,
)
from labkit.kernels.sampling_state import SamplingState
from labkit.kernels.triton_import import tl, triton


@triton.jit
def rejection_sample_kernel(
    target_ptr, t_stride_row, t_stride_step,  # [num_reqs, k + 1, V], row-indexed, unscaled
    q_ptr, q_stride_slot, q_stride_step,  # draft_logits [max_num_reqs, k, V], slot-indexed, scaled
    draft_tokens_ptr, dt_stride,  # [num_reqs, k] int64, row-indexed
    mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr,
    accepted_ptr, emit_ptr,  # outputs: [num_reqs, k] int32 and [num_reqs, k + 1] int64
    vocab_size, accept_salt, residual_salt, bonus_salt,
    K: tl.constexpr,  # k, the draft tokens per row
    PROBABILISTIC_DRAFT: tl.constexpr,
    BLOCK_V: tl.constexpr,
    NUM_BLOCKS: tl.constexpr,  # a compile-time loop bound: the interpreters of Triton 3.5/3.6
    # cannot iterate `range` over a runtime scalar with NumPy >= 2.4
):
    row = tl.program_id(0)
    j = tl.program_id(1)
    slot = tl.load(mapping_ptr + row)
    temp = tl.load(temperature_ptr + slot)
    seed = tl.load(seeds_ptr + slot)
    pos = tl.load(pos_ptr + row) + j
    greedy = temp == 0.0
    temp_safe = tl.where(greedy, 1.0, temp)
    t_row = target_ptr + row * t_stride_row + j * t_stride_step
    m_p, s_p = _softmax_stats(t_row, vocab_size, temp_safe, BLOCK_V, NUM_BLOCKS)
    if j < K:
        x = tl.load(draft_tokens_ptr + row * dt_stride + j)
        p_x = tl.exp(tl.load(t_row + x) / temp_safe - m_p) / s_p
        q_row = q_ptr + slot.to(tl.int64) * q_stride_slot + j * q_stride_step
        if PROBABILISTIC_DRAFT:
            m_q, s_q = _softmax_stats(q_row, vocab_size, 1.0, BLOCK_V, NUM_BLOCKS)
            q_x = tl.exp(tl.load(q_row + x) - m_q) / s_q
        else:
            m_q = 0.0
            s_q = 1.0
            q_x = 1.0
        u = uniform_at_zero(row_key(seed, pos, accept_salt))
        # Residual norm(max(0, p - q)) by Gumbel-max on log(residual); if p == q everywhere
        # the residual is empty and we fall back to p.
        key = row_key(seed, pos, residual_salt)
        res_val = tl.full([BLOCK_V], float("-inf"), tl.float32)
        res_idx = tl.zeros([BLOCK_V], tl.int32)
        p_val = tl.full([BLOCK_V], float("-inf"), tl.float32)
        p_idx = tl.zeros([BLOCK_V], tl.int32)
        for block in range(NUM_BLOCKS):
            offs, in_vocab, scaled = _target_block(t_row, block, vocab_size, temp_safe, BLOCK_V)
            p = tl.exp(scaled - m_p) / s_p
            if PROBABILISTIC_DRAFT:
                q = tl.exp(tl.load(q_row + offs, mask=in_vocab, other=float("-inf")) - m_q) / s_q
            else:
                q = tl.where(offs == x, 1.0, 0.0)
            residual = tl.maximum(p - q, 0.0)
            g = -tl.log(-tl.log(uniform(key, offs)))
            score_r = tl.where(residual > 0.0, tl.log(tl.where(residual > 0.0, residual, 1.0)) + g,
                               float("-inf"))
            score_p = tl.where(in_vocab, scaled + g, float("-inf"))
            if greedy:
                score_p = scaled
            better_r = score_r > res_val
            res_idx = tl.where(better_r, offs, res_idx)
            res_val = tl.where(better_r, score_r, res_val)
            better_p = score_p > p_val
            p_idx = tl.where(better_p, offs, p_idx)
            p_val = tl.where(better_p, score_p, p_val)
        target_choice = _first_argmax(p_val, p_idx)
        residual_choice = _first_argmax(res_val, res_idx)
        if greedy:
            accept = x == target_choice
            emit = target_choice
        else:
            accept = u * q_x < p_x
            emit = tl.where(tl.max(res_val, axis=0) > float("-inf"), residual_choice, target_choice)
        tl.store(accepted_ptr + row * K + j, accept.to(tl.int32))
        tl.store(emit_ptr + row * (K + 1) + j, emit.to(tl.int64))
    else:
        key = row_key(seed, pos, bonus_salt)
        p_val = tl.full([BLOCK_V], float("-inf"), tl.float32)
        p_idx = tl.zeros([BLOCK_V], tl.int32)
        for block in range(NUM_BLOCKS):
            offs, in_vocab, scaled = _target_block(t_row, block, vocab_size, temp_safe, BLOCK_V)
            score = scaled
            if temp != 0.0:
                score = tl.where(in_vocab, scaled - tl.log(-tl.log(uniform(key, offs))), float("-inf"))
            better = score > p_val
            p_idx = tl.where(better, offs, p_idx)
            p_val = tl.where(better, score, p_val)
        tl.store(emit_ptr + row * (K + 1) + j, _first_argmax(p_val, p_idx).to(tl.int64))


# The kernel's helpers.

@triton.jit
def _softmax_stats(row_ptr, vocab_size, temp, BLOCK_V: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """Max and sum of exp(x / temp - max) over one vocab row (temp 1 for pre-scaled rows)."""
    m_vec = tl.full([BLOCK_V], float("-inf"), tl.float32)
    for block in range(NUM_BLOCKS):
        offs = block * BLOCK_V + tl.arange(0, BLOCK_V)
        x = tl.load(row_ptr + offs, mask=offs < vocab_size, other=float("-inf")) / temp
        m_vec = tl.maximum(m_vec, x)
    m = tl.max(m_vec, axis=0)
    s_vec = tl.zeros([BLOCK_V], tl.float32)
    for block in range(NUM_BLOCKS):
        offs = block * BLOCK_V + tl.arange(0, BLOCK_V)
        x = tl.load(row_ptr + offs, mask=offs < vocab_size, other=float("-inf")) / temp
        s_vec += tl.exp(x - m)
    return m, tl.sum(s_vec, axis=0)


@triton.jit
def _target_block(t_row, block, vocab_size, temp_safe, BLOCK_V: tl.constexpr):
    """One vocab block of the target's temperature-scaled logits (-inf past the vocabulary)."""
    offs = block * BLOCK_V + tl.arange(0, BLOCK_V)
    in_vocab = offs < vocab_size
    return offs, in_vocab, tl.load(t_row + offs, mask=in_vocab, other=float("-inf")) / temp_safe


@triton.jit
def _first_argmax(best_val, best_idx):
    top = tl.max(best_val, axis=0)
    return tl.min(tl.where(best_val == top, best_idx, 2147483647), axis=0)


@dataclass
class Verdict:
    """What verification decided for each live row."""

    tokens: torch.Tensor  # [num_reqs, k + 1] int64 emitted tokens, -1 past the last one
    num_emitted: torch.Tensor  # [num_reqs] int64, 1..k+1
    num_accepted: torch.Tensor  # [num_reqs] int64, 0..k draft tokens accepted




def _check_layout(target_logits, draft_tokens, state: SamplingState):
    idx_mapping, temperature, seeds, positions, draft_logits = (
        state.idx_mapping, state.temperature, state.seeds, state.positions, state.draft_logits)
    checks.check_tensor("target_logits", target_logits, dim=3, dtypes=FLOAT_DTYPES, what=" [num_reqs, k + 1, vocab]")
    num_reqs, k1, vocab = target_logits.shape
    if vocab < 1 or k1 < 1:
        raise LabkitInputError(
            f"target_logits must be [num_reqs, k + 1 >= 1, vocab >= 1], got {tuple(target_logits.shape)}")
    checks.check_tensor("draft_tokens", draft_tokens, dim=2, dtypes=(torch.int32, torch.int64),
                        what=" [num_reqs, k] tokens")
    if tuple(draft_tokens.shape) != (num_reqs, k1 - 1):
        raise LabkitInputError(
            f"draft_tokens has shape {tuple(draft_tokens.shape)}, expected ({num_reqs}, {k1 - 1}) "
            "to match target_logits' [num_reqs, k + 1, V]"
        )
    checks.check_tensor("idx_mapping", idx_mapping, dim=1, what=" [>= num_reqs]: one slot per live row")
    checks.check_mapping_dtype(idx_mapping)
    checks.check_tensor("temperature", temperature, dim=1, dtypes=(torch.float32,), what=" [max_num_reqs]")
    checks.check_tensor("seeds", seeds, dim=1, dtypes=(torch.int64,), what=" [max_num_reqs]")
    checks.check_tensor("positions", positions, dim=1, dtypes=(torch.int32, torch.int64), what=" [>= num_reqs]")
    if seeds.shape != temperature.shape:
        raise LabkitInputError(f"temperature and seeds hold one entry per slot: got {temperature.shape[0]} and "
                               f"{seeds.shape[0]} entries")
    if idx_mapping.shape[0] < num_reqs or positions.shape[0] < num_reqs:
        raise LabkitInputError(f"idx_mapping and positions need at least num_reqs={num_reqs} entries")
    if draft_logits is not None:
        checks.check_tensor("draft_logits", draft_logits, dim=3, dtypes=(torch.float32,),
                            what=" [max_num_reqs, k, vocab]")
        if (draft_logits.shape[0] != temperature.shape[0] or draft_logits.shape[1] < k1 - 1
                or draft_logits.shape[2] != vocab):
            raise LabkitInputError(
                f"draft_logits {tuple(draft_logits.shape)} does not match max_num_reqs={temperature.shape[0]}, "
                f"k={k1 - 1} and vocab={vocab}: the draft and target models must share one vocabulary"
            )
    checks.check_same_device(target_logits=target_logits, draft_logits=draft_logits, draft_tokens=draft_tokens,
                      idx_mapping=idx_mapping, temperature=temperature, seeds=seeds, positions=positions)


def _validate(target_logits, draft_tokens, state: SamplingState):
    _check_layout(target_logits, draft_tokens, state)
    idx_mapping, temperature, draft_logits = state.idx_mapping, state.temperature, state.draft_logits
    num_reqs, k1, vocab = target_logits.shape
    if num_reqs == 0:
        return
    slots = idx_mapping[:num_reqs].to(torch.int64)
    checks.check_slot_values("idx_mapping", slots, temperature.shape[0], allow_negative=False)
    checks.check_temperatures(temperature, slots)
    outside = (draft_tokens < 0) | (draft_tokens >= vocab)
    if bool(outside.any()):
        row, j = (int(i) for i in outside.nonzero()[0])
        raise LabkitInputError(
            f"draft_tokens[{row}, {j}] is {int(draft_tokens[row, j])}: every draft token must be in "
            f"[0, vocab={vocab}); verification reads p and q at that index"
        )
    checks.check_no_nan("target_logits", target_logits)
    if draft_logits is not None:
        checks.check_no_nan("draft_logits (q of the live slots)", draft_logits[slots, : k1 - 1])


def rejection_sample(
    target_logits: torch.Tensor,
    draft_tokens: torch.Tensor,
    state: SamplingState,
    *,
    validate: bool = True,
    backend: str | None = None,
) -> Verdict:
    """Verify `draft_tokens` [num_reqs, k] against `target_logits` [num_reqs, k + 1, V] for the live rows.

    `state` holds what the draft launches read and wrote (:class:`~labkit.kernels.SamplingState`):
    the row -> slot mapping, the slots' temperatures and seeds, each row's position of its first
    draft token, and q (`draft_logits`, read by slot; None means greedy drafting).

    With `validate` (the default) the inputs are checked first, values too (slots of live rows in
    [0, max_num_reqs), draft tokens in [0, vocab), temperatures >= 0 and not NaN, no NaN logits).
    Any strides are accepted: everything here is only read.
    """
    which = checks.check_backend(backend)
    if validate:
        _validate(target_logits, draft_tokens, state)
    if which == "torch":
        return rejection_sample_torch(target_logits, draft_tokens, state)
    num_reqs, k1, vocab = target_logits.shape
    k = k1 - 1
    accepted = torch.empty((num_reqs, k), dtype=torch.int32, device=target_logits.device)
    emit = torch.empty((num_reqs, k1), dtype=torch.int64, device=target_logits.device)
    if num_reqs:
        # The kernel reads with unit stride along the vocabulary and the 1-D inputs; every input
        # is read-only, so packed copies are the same inputs.
        target_logits, draft_tokens = target_logits.contiguous(), draft_tokens.contiguous()
        packed, draft_logits = state.packed(), state.draft_logits
        q = draft_logits if draft_logits is not None else target_logits
        if q.stride(2) != 1:
            q = q.contiguous()
        block_v = min(1024, triton.next_power_of_2(vocab))
        rejection_sample_kernel[(num_reqs, k1)](
            target_logits, target_logits.stride(0), target_logits.stride(1),
            q, q.stride(0), q.stride(1),
            draft_tokens, draft_tokens.stride(0),
            packed.idx_mapping, packed.temperature, packed.seeds, packed.positions,
            accepted, emit, vocab, SALT_ACCEPT, SALT_RESIDUAL, SALT_BONUS,
            K=k, PROBABILISTIC_DRAFT=draft_logits is not None,
            BLOCK_V=block_v, NUM_BLOCKS=triton.cdiv(vocab, block_v),
        )
    return combine_verdicts(draft_tokens, accepted.bool(), emit)


def rejection_verdicts_torch(target_logits, draft_tokens, state: SamplingState):
    """Per (row, j): accept flag [n, k] and the token to emit at a first rejection there [n, k + 1]."""
    idx_mapping, temperature, seeds, positions, draft_logits = (
        state.idx_mapping, state.temperature, state.seeds, state.positions, state.draft_logits)
    num_reqs, k1, vocab = target_logits.shape
    k = k1 - 1
    device = target_logits.device
    slots = idx_mapping[:num_reqs].to(torch.int64)
    temp = temperature[slots]
    seed = seeds[slots][:, None]
    greedy = (temp == 0)[:, None]
    temp_safe = torch.where(temp == 0, 1.0, temp)[:, None, None]
    scaled = target_logits.to(torch.float32) / temp_safe  # [n, k+1, V]
    p = torch.softmax(scaled, dim=-1)
    pos = positions[:num_reqs].to(torch.int64)[:, None] + torch.arange(k1, device=device)[None, :]
    vocab_index = torch.arange(vocab, device=device)

    x = draft_tokens.to(torch.int64)
    p_x = p[:, :k].gather(2, x[:, :, None]).squeeze(2)
    if draft_logits is not None:
        q = torch.softmax(draft_logits[slots, :k].to(torch.float32), dim=-1)
    else:
        q = torch.nn.functional.one_hot(x, vocab).to(torch.float32)
    q_x = q.gather(2, x[:, :, None]).squeeze(2)
    u = uniform_torch(row_key_torch(seed, pos[:, :k], SALT_ACCEPT), torch.zeros((), dtype=torch.int64))
    target_greedy = scaled.argmax(dim=-1)  # [n, k+1]
    accepted = torch.where(greedy, x == target_greedy[:, :k], u * q_x < p_x)

    g_res = gumbel_torch(row_key_torch(seed, pos[:, :k], SALT_RESIDUAL)[..., None], vocab_index)
    residual = (p[:, :k] - q).clamp(min=0.0)
    score_r = torch.where(residual > 0, torch.log(torch.where(residual > 0, residual, 1.0)) + g_res,
                          float("-inf"))
    from_p = (scaled[:, :k] + g_res).argmax(dim=-1)
    has_residual = residual.gt(0).any(dim=-1)
    emit_steps = torch.where(has_residual, score_r.argmax(dim=-1), from_p)
    emit_steps = torch.where(greedy, target_greedy[:, :k], emit_steps)

    g_bonus = gumbel_torch(row_key_torch(seed[:, 0], pos[:, k], SALT_BONUS)[:, None], vocab_index)
    bonus = torch.where(greedy[:, 0], target_greedy[:, k], (scaled[:, k] + g_bonus).argmax(dim=-1))
    return accepted, torch.cat([emit_steps, bonus[:, None]], dim=1)


def combine_verdicts(draft_tokens: torch.Tensor, accepted: torch.Tensor, emit: torch.Tensor) -> Verdict:
    """Accepted drafts up to the first rejection, then that step's emitted token (or the bonus)."""
    num_reqs, k = draft_tokens.shape
    device = draft_tokens.device
    steps = torch.arange(k + 1, device=device)
    rejected = torch.cat([~accepted.bool(), torch.ones((num_reqs, 1), dtype=torch.bool, device=device)], dim=1)
    first_reject = rejected.int().argmax(dim=1)  # index of the first True; k if all accepted
    padded_drafts = torch.cat([draft_tokens.to(torch.int64), emit[:, k:]], dim=1)
    tokens = torch.where(steps[None, :] < first_reject[:, None], padded_drafts, emit)
    tokens = torch.where(steps[None, :] <= first_reject[:, None], tokens, torch.full_like(tokens, -1))
    return Verdict(tokens=tokens, num_emitted=first_reject + 1, num_accepted=first_reject)


def rejection_sample_torch(target_logits, draft_tokens, state: SamplingState) -> Verdict:
    """Pure-torch reference of :func:`rejection_sample` (no checks)."""
    accepted, emit = rejection_verdicts_torch(target_logits, draft_tokens, state)
    return combine_verdicts(draft_tokens, accepted, emit)
