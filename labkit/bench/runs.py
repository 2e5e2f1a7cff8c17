"""Recorded runs: the scenario's schedules or the toy engine, run with one drafter configuration.

    timeline_run(schedule, config)             -> RecordedRun   a hand-built batch schedule (fast)
    engine_run(config, prompts, seed, backend) -> RecordedRun   the toy engine with record=True (cached)
    timeline_source(schedule), engine_source(...) -> RunSource  runs of one workload, per configuration

The notebooks, the explorer widget, the CLI's figures and the tests all draw from these; the
scenario itself (schedules, step inputs) is :mod:`labkit.bench.scenario`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import torch

from labkit.backends import using_backend
from labkit.bench.scenario import LONG_SCHEDULE, MECHANICS_SCHEDULE, TIMELINE, propose_inputs
from labkit.checks import resolved_device
from labkit.config import DrafterConfig
from labkit.errors import PaddedSlotOutOfBoundsError
from labkit.speculator import LaunchRecord, build_speculator


@dataclass
class RecordedRun:
    """The launches of one run (one per engine step), or why the run was refused.

    A timeline run also keeps each step's inputs and draft tokens (`inputs`, `drafts`), so that
    what a live row drafted can be read back without running the speculator again.
    """

    launches: list[LaunchRecord]
    steps: list[int]
    label: str
    error: str | None = None
    inputs: list = field(default_factory=list)  # per launch: the StepInputs it ran on (timeline runs)
    drafts: list[torch.Tensor] = field(default_factory=list)  # per launch: [num_reqs, k] tokens, on the CPU

    def __repr__(self) -> str:
        # One line at the prompt (`buggy`), not every launch's tensors.
        refused = f", refused: {self.error}" if self.error else ""
        return f"RecordedRun({self.label!r}: {len(self.launches)} launches over {len(self.steps)} steps{refused})"


def _models():
    from labkit.backends import default_device
    from labkit.models import shared_toy_models

    return shared_toy_models(default_device())


def _where(backend: str | None) -> tuple[str, str]:
    """(backend, device) a run asked for under `backend` happens on: the key of every cache here.

    A run depends on both (the kernels that sample, the device the models and buffers live on), so
    a cached run is reused only where it would come out the same: whichever test or notebook asks
    first does not decide it for the others."""
    from labkit import backends

    name = backend if backend is not None else backends.backend()
    with using_backend(name):
        device = resolved_device(backends.default_device())
    return name, str(device)


def timeline_run(schedule=MECHANICS_SCHEDULE, config: DrafterConfig = TIMELINE.before_fix()) -> RecordedRun:
    """Drive a speculator running `config` directly through `schedule` (live slots per step, in row order)."""
    label = f"{config.drafter}, {config.describe_fix()}"
    spec = build_speculator(_models().draft, config, record=True)
    run = RecordedRun([], [], label)
    try:
        for step, slots in enumerate(schedule):
            inputs = propose_inputs(spec, slots, step=step)
            run.drafts.append(spec.propose(*inputs).cpu())
            run.inputs.append(inputs)
            run.launches.append(spec.last_record)
            run.steps.append(step)
    except PaddedSlotOutOfBoundsError as err:
        run.error = str(err)
    return run


def engine_run(config: DrafterConfig = DrafterConfig(), prompts: int = 10, seed: int = 0,
               backend: str | None = None) -> RecordedRun:
    """The toy engine running `config` over a small bench workload, recording (cached per argument
    set, backend and device).

    `backend`: run on this backend (the notebooks use "torch" where the kernel is not the point);
    None runs on the one in use.
    """
    return _engine_run(config, prompts, seed, *_where(backend))


@functools.lru_cache(maxsize=32)
def _engine_run(config: DrafterConfig, prompts: int, seed: int, backend: str, device: str) -> RecordedRun:
    with using_backend(backend):
        return _engine_run_here(config, prompts, seed)


def _engine_run_here(config: DrafterConfig, prompts: int, seed: int) -> RecordedRun:
    from labkit.bench.repro import BenchConfig, bench_requests
    from labkit.engine import Engine

    models = _models()
    label = f"engine, {prompts} prompts, {config.drafter}, {config.describe_fix()}"
    try:
        run = Engine(models, config, record=True).generate(bench_requests(BenchConfig(prompts, seed), models.tokenizer))
    except PaddedSlotOutOfBoundsError as err:
        return RecordedRun([], [], label, error=str(err))
    return RecordedRun([r.launch for r in run.records], [r.step for r in run.records], label)


@dataclass(frozen=True)
class RunSource:
    """Recorded runs of one workload, one per drafter configuration: ``source(config)``.

    `base` is the configuration the workload is drawn at (its k, slots and capture sizes): the
    explorer changes only its drafter and fix (``source.base.before_fix()``, ...).
    """

    base: DrafterConfig
    run: Callable[[DrafterConfig], RecordedRun]

    def __call__(self, config: DrafterConfig) -> RecordedRun:
        # What the drafter ignores (an autoregressive run's DFlash pad) does not make another run.
        return self.run(config.canonical())


def engine_source(prompts: int = 10, seed: int = 0, backend: str | None = None) -> RunSource:
    """Engine runs of one workload at the bench's shapes. `backend` as in :func:`engine_run`."""
    return RunSource(DrafterConfig(), lambda config: engine_run(config, prompts, seed, backend))


def timeline_source(schedule=LONG_SCHEDULE, base: DrafterConfig = TIMELINE) -> RunSource:
    """Timeline runs of `schedule`, cached per configuration, backend and device (the one in use
    when a run is asked for)."""

    @functools.lru_cache(maxsize=None)
    def cached(config: DrafterConfig, backend: str, device: str) -> RecordedRun:
        with using_backend(backend):
            return timeline_run(schedule, config)

    return RunSource(base, lambda config: cached(config, *_where(None)))
