"""The scenario, written once: batch schedules, the timeline's drafter, and the inputs of a step.

    MECHANICS_SCHEDULE, MECHANICS_BATCH, LONG_SCHEDULE   live slots per step, in batch-row order
    TIMELINE                                             the drafter the schedules are drawn with
    propose_inputs(spec, slots, step=, seed=) -> StepInputs   one step's inputs, deterministic

This floor runs nothing: recorded runs (:mod:`labkit.bench.runs`), the proofs, the GPU sections and
the workshop build on it.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from labkit.config import DrafterConfig
from labkit.errors import LabkitInputError

# MECHANICS.md's timeline: 8 live requests in slots 0..7, then slot 3 finishes (capture sizes 1, 2, 4, 8).
MECHANICS_SCHEDULE: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7))
# Its second step: 7 live rows padded to a graph of 8, row 7 keeping slot 7 unless the fix fills it.
MECHANICS_BATCH: tuple[int, ...] = MECHANICS_SCHEDULE[1]
# A longer schedule for tests and demos: the batch grows, shrinks, a freed slot is reused.
LONG_SCHEDULE: tuple[tuple[int, ...], ...] = (
    (0, 1, 2), (0, 1, 2, 3, 4), (0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7), (1, 2, 4, 5, 6, 7),
    (1, 2, 4, 5, 6, 7, 0), (1, 2, 5, 6, 7, 0), (2, 5, 7, 0), (2, 5, 0), (5, 0, 1), (5, 0, 1, 3, 4),
)
# The timeline's drafter: k = 2 and graphs of 1, 2, 4 and 8 rows keep the pictures small.
TIMELINE = DrafterConfig(k=2, max_num_reqs=8, capture_sizes=(1, 2, 4, 8))


class StepInputs(NamedTuple):
    """One step's inputs, in the order ``Speculator.propose`` takes them (``spec.propose(*inputs)``)."""

    slots: torch.Tensor  # [num_reqs] int32: each live row's slot
    temperature: torch.Tensor  # [max_num_reqs] float32, by slot
    seeds: torch.Tensor  # [max_num_reqs] int64, by slot
    contexts: torch.Tensor  # [num_reqs, window] token ids, by row
    positions: torch.Tensor  # [num_reqs] int64, by row


# Each step moves every request on by one character of this walk, so contexts change step to step.
_WALK = "and the way home "
_PROMPT_SEED = 7


@functools.lru_cache(maxsize=16)
def _slot_prompts(max_num_reqs: int, seed: int) -> tuple[str, ...]:
    from labkit.corpus import sample_prompts

    return tuple(sample_prompts(max_num_reqs, seed=_PROMPT_SEED + seed))


def propose_inputs(spec, slots, *, step: int = 0, seed: int = 0) -> StepInputs:
    """The inputs of one speculator step for live `slots` (in batch-row order), deterministic.

    On the speculator's device. Per slot s: a fixed corpus prompt (chosen by `seed`) plus the
    first `step` characters of a fixed walk as its history, temperature 1.0 (even s) or 0.8 (odd
    s), sampling seed ``s * 1_000_003 + 17 + seed``. Slot-indexed tensors (temperature, seeds)
    cover all ``spec.max_num_reqs`` slots, row-indexed ones (contexts, positions) the live rows
    only, as the speculator expects.
    """
    from labkit.models import CharTokenizer, encode_context

    slots = [int(s) for s in (slots.tolist() if isinstance(slots, torch.Tensor) else slots)]
    M = spec.max_num_reqs
    if any(not 0 <= s < M for s in slots):
        raise LabkitInputError(f"slots must lie in [0, max_num_reqs={M}), got {slots}")
    if step < 0:
        raise LabkitInputError(f"step must be >= 0, got {step}")
    tokenizer = CharTokenizer()
    if spec.vocab_size != tokenizer.vocab_size:
        raise LabkitInputError(f"propose_inputs writes the toy tokenizer's ids (vocab_size "
                               f"{tokenizer.vocab_size}); the speculator's vocab_size is {spec.vocab_size}")
    prompts = _slot_prompts(M, seed)
    walk = (_WALK * (step // len(_WALK) + 1))[:step]
    histories = [tokenizer.encode(prompts[s] + walk) for s in slots]
    device = spec.device  # where its buffers live: the GPU on a GPU box
    return StepInputs(
        slots=torch.tensor(slots, dtype=torch.int32, device=device),
        temperature=torch.tensor([0.8 if s % 2 else 1.0 for s in range(M)], dtype=torch.float32, device=device),
        seeds=torch.arange(M, dtype=torch.int64, device=device) * 1_000_003 + 17 + seed,
        contexts=encode_context(histories, spec.window, tokenizer.pad_id).to(device),
        positions=torch.tensor([len(h) for h in histories], dtype=torch.int64, device=device),
    )
