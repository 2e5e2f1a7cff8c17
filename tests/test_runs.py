"""The one builder of a speculator step's inputs, and the scenario timeline it drives."""

from __future__ import annotations

import pytest
import torch

from labkit import backends
from labkit.bench.runs import timeline_run
from labkit.bench.scenario import LONG_SCHEDULE, MECHANICS_BATCH, MECHANICS_SCHEDULE, TIMELINE, propose_inputs
from labkit.errors import LabkitInputError
from labkit.speculator import build_speculator


@pytest.fixture(scope="module")
def spec(models):
    return build_speculator(models.draft, TIMELINE)


def test_propose_inputs_shapes_dtypes_and_device(spec):
    slots, temperature, seeds, contexts, positions = propose_inputs(spec, MECHANICS_BATCH)
    assert slots.dtype == torch.int32 and slots.tolist() == list(MECHANICS_BATCH)
    # Slot-indexed inputs cover every slot; row-indexed ones the live rows.
    assert temperature.shape == (8,) and seeds.shape == (8,) and seeds.dtype == torch.int64
    assert contexts.shape == (7, spec.window) and positions.shape == (7,)
    assert {t.device for t in (slots, temperature, seeds, contexts, positions)} == {spec.device}
    assert len(set(seeds.tolist())) == 8
    # Each row's position is the length of its history, whose tail is the context's last token.
    assert bool((positions > 0).all()) and bool((contexts[:, -1] != 0).all())


def test_propose_inputs_is_deterministic_and_moves_with_step_and_seed(spec):
    def same(a, b):
        return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    first = propose_inputs(spec, [0, 3, 5])
    assert same(first, propose_inputs(spec, torch.tensor([0, 3, 5])))
    stepped = propose_inputs(spec, [0, 3, 5], step=1)
    assert torch.equal(stepped[4], first[4] + 1) and not torch.equal(stepped[3], first[3])
    # A slot's inputs do not depend on which other slots are live, or on its row.
    alone = propose_inputs(spec, [5])
    assert torch.equal(alone[3][0], first[3][2]) and torch.equal(alone[4][0], first[4][2])
    reseeded = propose_inputs(spec, [0, 3, 5], seed=1)
    assert not torch.equal(reseeded[2], first[2]) and not torch.equal(reseeded[3], first[3])
    # Steps past the walk's length keep moving every request on by one character.
    late = [propose_inputs(spec, [0], step=s)[4].item() for s in (30, 31)]
    assert late[1] == late[0] + 1


@pytest.mark.parametrize("slots,step,message", [
    ([0, 8], 0, "slots must lie in"), ([-1], 0, "slots must lie in"), ([0], -1, "step must be"),
])
def test_propose_inputs_refuses_bad_arguments(spec, slots, step, message):
    with pytest.raises(LabkitInputError, match=message):
        propose_inputs(spec, slots, step=step)


def test_the_speculator_accepts_them_for_every_step_of_the_long_schedule(spec):
    for step, slots in enumerate(LONG_SCHEDULE):
        tokens = spec.propose(*propose_inputs(spec, slots, step=step))
        assert tokens.shape == (len(slots), spec.k)


def test_the_timeline_shows_the_stale_row_before_the_fix_and_none_after():
    assert MECHANICS_BATCH == MECHANICS_SCHEDULE[1] and len(MECHANICS_BATCH) == 7
    with backends.using_backend("torch"):
        before = timeline_run(MECHANICS_SCHEDULE, TIMELINE.before_fix())
        after = timeline_run(MECHANICS_SCHEDULE, TIMELINE.with_pr_fix())
    assert before.error is None and after.error is None
    assert [launch.collisions() for launch in (before.launches[0], after.launches[0], after.launches[1])] == [[]] * 3
    # Padded row 7 keeps slot 7 (a live request now in row 6) before the fix: its stores collide.
    assert {slot for slot, *_ in before.launches[1].collisions()} == {7}
    assert before.launches[1].mapping[7] == 7 and after.launches[1].mapping[7] == -1


# -- every cache keyed by what it depends on ----------------------------------------------------------

def _fake_run(calls):
    from labkit.bench.runs import RecordedRun

    def run(*args):
        calls.append((backends.backend(), str(backends.default_device())))
        return RecordedRun([], [], f"{backends.backend()} on {backends.default_device()}")

    return run


def test_engine_runs_are_cached_per_backend_and_device_not_by_whoever_asks_first(monkeypatch):
    from labkit.bench import runs
    from labkit.config import DrafterConfig

    calls = []
    monkeypatch.setattr(runs, "_engine_run_here", _fake_run(calls))
    config, here = DrafterConfig().with_pr_fix(), backends.backend()
    args = dict(prompts=7, seed=9917)  # arguments no other test uses: the fakes stay out of their way
    with backends.using_backend("torch"):
        on_torch = runs.engine_run(config, **args)  # asked first, under another backend
    mine = runs.engine_run(config, **args)
    assert mine.label.startswith(here) and on_torch.label == "torch on cpu"
    assert (mine is on_torch) == (here == "torch")
    assert runs.engine_run(config, **args) is mine
    assert runs.engine_run(config, backend="torch", **args) is on_torch
    assert len(calls) == (1 if here == "torch" else 2)


def test_timeline_sources_are_cached_per_backend_and_device(monkeypatch):
    from labkit.bench import runs

    calls = []
    monkeypatch.setattr(runs, "timeline_run", _fake_run(calls))
    source, here = runs.timeline_source(), backends.backend()
    with backends.using_backend("torch"):
        on_torch = source(TIMELINE.with_pr_fix())
    mine = source(TIMELINE.with_pr_fix())
    assert mine.label.startswith(here) and on_torch.label == "torch on cpu"
    assert (mine is on_torch) == (here == "torch")
    assert source(TIMELINE.with_pr_fix()) is mine
    with backends.using_backend("torch"):
        assert source(TIMELINE.with_pr_fix()) is on_torch


def test_shared_toy_models_are_one_per_device_however_it_is_named():
    from labkit.models import shared_toy_models

    assert shared_toy_models("cpu") is shared_toy_models(torch.device("cpu"))
    assert next(shared_toy_models("cpu").draft.parameters()).device.type == "cpu"
    if torch.cuda.is_available():
        on_gpu = shared_toy_models("cuda")
        assert on_gpu is shared_toy_models("cuda:0") is shared_toy_models(torch.device("cuda", 0))
        assert on_gpu is not shared_toy_models("cpu")
        assert next(on_gpu.draft.parameters()).is_cuda
