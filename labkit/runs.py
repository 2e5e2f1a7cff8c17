"""Recorded runs: the scenario timeline, the step inputs it feeds the speculator, and engine runs.

    timeline_run(schedule, fix, drafter)   -> RecordedRun   a hand-built batch schedule (fast)
    engine_run(drafter, fill, mask, pad)   -> RecordedRun   the toy engine with record=True (cached)

The notebooks, the explorer widget, the CLI's figures and the tests all draw from these, so the
scenario of docs/MECHANICS.md is written down once, here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable

import torch

from labkit.backends import using_backend
from labkit.checks import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.modes import Mode, engine_config_for, speculator_for
from labkit.speculator import FixSwitches, LaunchRecord

# MECHANICS.md's timeline: 8 live requests in slots 0..7, then slot 3 finishes (capture sizes 1, 2, 4, 8).
MECHANICS_SCHEDULE: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7))
# Its second step: 7 live rows padded to a graph of 8, row 7 keeping slot 7 unless the fix fills it.
MECHANICS_BATCH: tuple[int, ...] = MECHANICS_SCHEDULE[1]
# A longer schedule for tests and demos: the batch grows, shrinks, a freed slot is reused.
LONG_SCHEDULE: tuple[tuple[int, ...], ...] = (
    (0, 1, 2), (0, 1, 2, 3, 4), (0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7), (1, 2, 4, 5, 6, 7),
    (1, 2, 4, 5, 6, 7, 0), (1, 2, 5, 6, 7, 0), (2, 5, 7, 0), (2, 5, 0), (5, 0, 1), (5, 0, 1, 3, 4),
)


@dataclass
class RecordedRun:
    """The launches of one run (one per engine step), or why the run was refused."""

    launches: list[LaunchRecord]
    steps: list[int]
    label: str
    error: str | None = None


@functools.lru_cache(maxsize=1)
def _cached_models():
    from labkit.backends import default_device
    from labkit.models import load_toy_models

    return load_toy_models(default_device())


# Each step moves every request on by one character of this walk, so contexts change step to step.
_WALK = "and the way home "
_PROMPT_SEED = 7


@functools.lru_cache(maxsize=16)
def _slot_prompts(max_num_reqs: int, seed: int) -> tuple[str, ...]:
    from labkit.corpus import sample_prompts

    return tuple(sample_prompts(max_num_reqs, seed=_PROMPT_SEED + seed))


def propose_inputs(spec, slots, *, step: int = 0, seed: int = 0):
    """The inputs of one speculator step for live `slots` (in batch-row order), deterministic.

    Returns (slots int32, temperature, seeds, contexts, positions) on the speculator's device,
    ready for ``spec.propose(*...)``. Per slot s: a fixed corpus prompt (chosen by `seed`) plus
    the first `step` characters of a fixed walk as its history, temperature 1.0 (even s) or 0.8
    (odd s), sampling seed ``s * 1_000_003 + 17 + seed``. Slot-indexed tensors (temperature,
    seeds) cover all ``spec.max_num_reqs`` slots, row-indexed ones (contexts, positions) the live
    rows only, as the speculator expects.
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
    return (
        torch.tensor(slots, dtype=torch.int32, device=device),
        torch.tensor([0.8 if s % 2 else 1.0 for s in range(M)], dtype=torch.float32, device=device),
        torch.arange(M, dtype=torch.int64, device=device) * 1_000_003 + 17 + seed,
        encode_context(histories, spec.window, tokenizer.pad_id).to(device),
        torch.tensor([len(h) for h in histories], dtype=torch.int64, device=device),
    )


def timeline_run(schedule=MECHANICS_SCHEDULE, fix: FixSwitches = FixSwitches.before(), drafter: str = "autoregressive",
                 *, num_steps: int = 2, capture_sizes=(1, 2, 4, 8), use_graphs: bool = True) -> RecordedRun:
    """Drive a Speculator directly through `schedule` (live slots per step, in batch-row order)."""
    label = f"{drafter}, {_fix_words(fix, drafter)}"
    mode = Mode("timeline", label, drafter=drafter, use_graphs=use_graphs, fix=fix)
    spec = speculator_for(mode, _cached_models().draft, max_num_reqs=capture_sizes[-1], num_steps=num_steps,
                          capture_sizes=capture_sizes, record=True)
    launches = []
    try:
        for step, slots in enumerate(schedule):
            spec.propose(*propose_inputs(spec, slots, step=step))
            launches.append(spec.last_record)
    except PaddedSlotOutOfBoundsError as err:
        return RecordedRun(launches, list(range(len(launches))), label, error=str(err))
    return RecordedRun(launches, list(range(len(launches))), label)


def _fix_words(fix: FixSwitches, drafter: str) -> str:
    # The two settings a learner meets before the exercises are named without naming the fix's
    # parts (a label ends up in figure titles and captions, which the student edition must not spoil).
    # The pad is the DFlash drafter's alone: an autoregressive run is "before" with any pad.
    pad = {} if drafter == "dflash" else {"dflash_pad": fix.dflash_pad}
    if fix == replace(FixSwitches.before(), **pad):
        return "before the fix"
    if fix == replace(FixSwitches.after(), **pad):
        return "with the PR's fix"
    parts = [f"fill {'on' if fix.fill_padding else 'off'}", f"mask {'on' if fix.mask_kernel else 'off'}"]
    if drafter == "dflash":
        parts.append(f"DFlash pad {fix.dflash_pad}")
    return ", ".join(parts)


def switches(fill: bool, mask: bool, dflash_pad: int = -1) -> FixSwitches:
    """The fix switches of an explorer setting (plain bools and an int, as widgets give them)."""
    return FixSwitches(fill_padding=bool(fill), mask_kernel=bool(mask), dflash_pad=int(dflash_pad))


@functools.lru_cache(maxsize=32)
def engine_run(drafter: str = "autoregressive", fill: bool = False, mask: bool = False, dflash_pad: int = 0,
               prompts: int = 10, seed: int = 0, backend: str | None = None) -> RecordedRun:
    """The toy engine over a small bench workload with record=True (cached per argument set).

    `backend`: run on this backend (the notebooks use "torch" where the kernel is not the point);
    None runs on the one in use.
    """
    if backend is not None:
        with using_backend(backend):
            return engine_run(drafter, fill, mask, dflash_pad, prompts, seed)
    from labkit.engine import Engine
    from labkit.repro import BenchConfig, bench_requests

    models = _cached_models()
    cfg = BenchConfig(prompts=prompts, seed=seed)
    fix = switches(fill, mask, dflash_pad)
    label = f"engine, {prompts} prompts, {drafter}, {_fix_words(fix, drafter)}"
    config = engine_config_for(Mode("explorer", label, drafter=drafter, fix=fix), max_num_reqs=cfg.max_num_reqs,
                               num_steps=cfg.num_steps, capture_sizes=cfg.capture_sizes, record=True)
    try:
        run = Engine(models, config).generate(bench_requests(cfg, models.tokenizer))
    except PaddedSlotOutOfBoundsError as err:
        return RecordedRun([], [], label, error=str(err))
    return RecordedRun([r.launch for r in run.records], [r.step for r in run.records], label)


Source = Callable[[str, bool, bool, int], RecordedRun]


def engine_source(prompts: int = 10, seed: int = 0, backend: str | None = None) -> Source:
    """Engine runs of one workload, one per fix setting: ``source(drafter, fill, mask, dflash_pad)``,
    or ``source(drafter, fix=FixSwitches.before())``. `backend` as in :func:`engine_run`."""
    def source(drafter, fill=False, mask=False, dflash_pad=0, *, fix: FixSwitches | None = None):
        if fix is not None:
            fill, mask, dflash_pad = fix.fill_padding, fix.mask_kernel, fix.dflash_pad
        # The pad only matters to the DFlash drafter: one cache entry per distinct run.
        pad = int(dflash_pad) if drafter == "dflash" else -1
        return engine_run(drafter, bool(fill), bool(mask), pad, prompts, seed, backend)
    return source


def timeline_source(schedule=LONG_SCHEDULE, num_steps: int = 2) -> Source:
    cache: dict = {}

    def source(drafter, fill, mask, dflash_pad):
        pad = int(dflash_pad) if drafter == "dflash" else -1
        key = (drafter, bool(fill), bool(mask), pad)
        if key not in cache:
            cache[key] = timeline_run(schedule, switches(fill, mask, pad), drafter, num_steps=num_steps)
        return cache[key]
    return source
