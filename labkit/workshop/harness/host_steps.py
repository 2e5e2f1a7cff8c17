"""Exercises (a) and (c) share this: the learner's host code writes a mapping buffer inside the kit's
speculator, and the checker runs a timeline of steps through padded graphs.

Each step is judged by what the graph did with the buffer the learner wrote:

* the live outputs: every live row's draft tokens equal those of an eager run (the kit's fixed
  speculator on exactly the live rows, same inputs), and every live slot's q too;
* the rows the graph reads: live rows map to their slots, padded rows to what exercise (a) asks
  for (notebook 03 says what, after the exercises). Rows past the graph's size are not read this
  step, so they are not judged: an answer that stops at the graph's size is right.

The first steps are the timeline of notebook 02 (:data:`labkit.bench.scenario.MECHANICS_SCHEDULE`:
8 requests, then slot 3 finishes), then the batch shrinks and grows, then a wider speculator pads
5 rows at once (:data:`WIDE`), and a fresh speculator (whose buffers still hold their initial
contents) runs one small step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch

from labkit import backends
from labkit.bench.scenario import MECHANICS_SCHEDULE, TIMELINE, propose_inputs
from labkit.models import shared_toy_models
from labkit.workshop.feedback import (
    CheckResult,
    LearnerRaised,
    explain_exception,
    fmt,
    join,
    learner_source,
    not_yet,
    resolve,
    solved,
)
from labkit.workshop.harness.launches import kit_work_on

CONFIG = TIMELINE  # the checks' drafter: the timeline's shapes (the fix switches vary per speculator)
M, K, CAPTURE_SIZES = CONFIG.max_num_reqs, CONFIG.k, CONFIG.capture_sizes
SCHEDULE: tuple[tuple[int, ...], ...] = MECHANICS_SCHEDULE + ((3, 4, 5, 6, 7), (6, 1), (2, 0, 7))
# With 8 slots a graph pads at most 3 rows, so a fill of only the first few padded rows would pass.
# A wider speculator follows (16 slots, graphs of 1 to 16 rows): a step of 16 writes every entry, then
# 11 live rows pad 5 rows (10 sample rows for DFlash, k = 2) that still hold live requests' slots.
WIDE = dataclasses.replace(TIMELINE, max_num_reqs=16, capture_sizes=(1, 2, 4, 8, 16))
WIDE_SCHEDULE: tuple[tuple[int, ...], ...] = (tuple(range(16)), (15, 14, 1, 2, 3, 9, 10, 11, 12, 5, 6))
FRESH: tuple[tuple[int, ...], ...] = ((0, 1, 2),)


def toy_draft_model():
    """The toy draft model, where the kit's kernels run (the GPU for compiled Triton, else the CPU)."""
    return shared_toy_models(backends.default_device()).draft


class UnsafeMapping(Exception):
    """The learner's buffer holds a value past the last slot: stop before any launch reads it."""


def refuse_unsafe(mapping: torch.Tensor, max_num_reqs: int) -> None:
    # On a GPU the launch inside a graph capture skips the kernel's input checks, and a slot past
    # the buffers would be a wild store: diagnose from the buffer instead of launching.
    if bool((mapping >= max_num_reqs).any()):
        raise UnsafeMapping()


@dataclass(frozen=True)
class HostExercise:
    """What differs between (a) and (c)."""

    ex: str
    name: str  # the learner's function
    buffer: str  # the buffer it writes
    spr: int  # rows of the buffer per request: 1, or k for DFlash's sample rows
    make_spec: Callable  # learner function [, shapes=config] -> speculator (graphs, record=True) that calls it
    make_reference: Callable  # ([shapes=config]) -> the kit's fixed speculator, eager
    learner: Callable | None = None  # the learner's function, once resolved (messages read its code)

    @property
    def unit(self) -> str:
        return "sample row" if self.spr > 1 else "row"


@dataclass
class Step:
    """One step as the checker saw it."""

    label: str
    slots: list[int]
    rows: int  # rows the graph processed
    before: torch.Tensor  # the buffer before the learner's function (CPU)
    after: torch.Tensor  # ... and after
    returned: object
    record: object  # the speculator's LaunchRecord
    tokens: torch.Tensor  # [num_reqs, k]
    ref_tokens: torch.Tensor
    ref_q: torch.Tensor  # [M, k, V] of the eager run
    call: object = None  # the learner's call (learner_specs.LearnerCall), to run it again on a probe

    @property
    def n(self) -> int:
        return len(self.slots)


# Batches (live slots in row order) of the padding-invariance audit that follows the timeline.
AUDIT_BATCHES = ((0, 1, 2, 4, 5, 6, 7), (2, 0, 7))


def check_host_exercise(exercise: HostExercise, learner, solved_text: str) -> CheckResult:
    """The verdict on the learner's function (or the namespace holding it): timeline, then audit."""
    fn, name, verdict = resolve(exercise.ex, learner, exercise.name)
    if verdict is not None:
        return verdict
    failed, warnings = run_timeline(exercise, fn, name)
    if failed is not None:
        return failed
    problem = audit_learner(exercise, fn, name, AUDIT_BATCHES)
    if problem is not None:
        return not_yet(exercise.ex, problem)
    return solved(exercise.ex, solved_text, warnings)


def run_timeline(exercise: HostExercise, learner: Callable, name: str):
    """Run the timeline, then a fresh speculator; returns (the first failure or None, warnings).

    name: what the learner calls the function (messages quote it). The kit's own kernels run on
    the torch backend on the CPU (:func:`~labkit.workshop.harness.launches.kit_work_on`).
    """
    with kit_work_on(backends.default_device()):
        return _run_timeline(dataclasses.replace(exercise, name=name, learner=learner), learner)


def _run_timeline(exercise: HostExercise, learner: Callable):
    warnings: list[str] = []
    phases = ((False, SCHEDULE, None, "of the timeline"), (True, FRESH, None, ""),
              (False, WIDE_SCHEDULE, WIDE, f"with {WIDE.max_num_reqs} slots and graphs of up to "
                                           f"{max(WIDE.capture_sizes)} rows"))
    for fresh, schedule, shapes, where in phases:
        wide = {} if shapes is None else {"shapes": shapes}
        spec, ref = exercise.make_spec(learner, **wide), exercise.make_reference(**wide)
        for i, slots in enumerate(schedule):
            rows = spec.runner.rows_for(len(slots))
            label = ("On a fresh speculator" if fresh else f"At step {i} {where}") + \
                f" (live slots {fmt(slots)} in rows 0..{len(slots) - 1}, graph of {rows} rows):"
            try:
                tokens = spec.propose(*propose_inputs(spec, slots, step=i))
            except LearnerRaised as err:
                return not_yet(exercise.ex, f"{label} " + explain_exception(err.original, learner, exercise.name)), []
            except UnsafeMapping:
                return not_yet(exercise.ex, f"{label} " + _past_the_slots(exercise, spec.seen[exercise.buffer][1],
                                                                        spec.max_num_reqs)), []
            ref_tokens = ref.propose(*propose_inputs(ref, slots, step=i))
            step = Step(label, list(slots), rows, *spec.seen[exercise.buffer], spec.last_record,
                        tokens.cpu(), ref_tokens.cpu(), ref.draft_logits.cpu().clone(),
                        call=spec.calls.get(exercise.buffer))
            problem = judge_step(exercise, step, fresh)
            if problem:
                return not_yet(exercise.ex, f"{label} {problem}"), []
            warnings += [w for w in _negative_values_warning(exercise, step) if w not in warnings]
    return None, warnings


def _expected(exercise: HostExercise, step: Step) -> torch.Tensor:
    return torch.tensor(step.slots, dtype=torch.int32).repeat_interleave(exercise.spr)


def judge_step(exercise: HostExercise, step: Step, fresh: bool) -> str | None:
    for judge in (_not_in_place, _live_part, _padded_part, _live_outputs):
        problem = judge(exercise, step, fresh)
        if problem:
            return problem
    return None


def _read_part(step: Step, spr: int) -> torch.Tensor:
    return step.after[: step.rows * spr]


def _not_in_place(exercise: HostExercise, step: Step, fresh: bool) -> str | None:
    live = _expected(exercise, step)
    if not torch.equal(step.after, step.before) or torch.equal(step.after[: live.numel()], live):
        return None
    extra = " Your function returned a tensor; the kit ignores return values." if \
        isinstance(step.returned, torch.Tensor) else ""
    # The contents are not quoted: (c)'s buffer starts out holding (c)'s answer.
    said = f"the buffer did not change at all: your `{exercise.name}` left {exercise.buffer} exactly as it was.{extra}"
    rebound = rebound_arguments(exercise.learner)
    if rebound:
        return (f"{said} It assigns a new value to the argument's name ({join(f'`{n}`' for n in rebound)}): "
                "that makes the name point at a new tensor inside your function and changes nothing outside it. "
                "The graph reads the persistent buffer it was captured with, so only changes made to that very "
                "tensor count (assign into it: `buffer[...] = ...`).")
    return (f"{said} Its live {exercise.unit}s still hold what an earlier step wrote, not this step's slots: "
            f"your function must copy this step's batch into {exercise.buffer}, in place, as the code the "
            "exercise started from did.")


def _live_part(exercise: HostExercise, step: Step, fresh: bool) -> str | None:
    live = _expected(exercise, step)
    for r in range(live.numel()):
        got, want = int(step.after[r]), int(live[r])
        if got != want:
            req = r // exercise.spr
            who = (f"Sample row {r} is draft step {r % exercise.spr} of live row {req}" if exercise.spr > 1
                   else f"Row {r} is a live row")
            effect = (f"its draft was sampled with slot {got}'s temperature and seed, and its q stored into "
                      f"draft_logits[{got}] instead of draft_logits[{want}]" if got >= 0 else
                      f"the kernel took it for a padded row: a plain argmax, and no q stored for slot {want}")
            return (f"after your `{exercise.name}` {exercise.buffer} is {fmt(step.after)}. {who}, whose request "
                    f"holds slot {want}, but it maps to {got}: {effect}.")
    return None


def _padded_part(exercise: HostExercise, step: Step, fresh: bool) -> str | None:
    read = _read_part(step, exercise.spr)
    owner = {slot: row for row, slot in enumerate(step.slots)}
    for r in range(step.n * exercise.spr, read.numel()):
        v = int(read[r])
        if v < 0:
            continue
        shown = f"after your `{exercise.name}` {exercise.buffer} is {fmt(step.after)}."
        padded = f"padded {exercise.unit} {r}"
        if v not in owner:
            return (f"{shown} The graph runs {step.rows * exercise.spr} {exercise.unit}s, so {padded} ran through "
                    f"the kernel holding slot {v}, which no live request owns this step, and stored into "
                    f"draft_logits[{v}]. No request was hurt this time; once a request is admitted to slot {v} "
                    "while a padded row still points there, that request's q is overwritten.")
        return f"{shown} " + _overwrite_words(exercise, step, r, v, owner[v], fresh)
    return None


def _overwrite_words(exercise: HostExercise, step: Step, r: int, slot: int, victim: int, fresh: bool) -> str:
    spr, k = exercise.spr, step.record.draft_logits.shape[1]
    read = _read_part(step, spr)
    pads = list(range(step.n * spr, read.numel()))
    rows = [p for p in pads if int(read[p]) == slot]  # with the masked kernel, each of them stores
    plural = len(rows) > 1
    s_ = "" if plural else "s"
    written = _written_by_learner(exercise, step, rows)
    if fresh and slot == 0 and int(step.before[r]) == 0:
        held = f"hold{s_} slot 0 (the buffer starts as zeros, and nothing wrote {'them' if plural else 'it'})"
    elif slot == 0 and all(int(read[p]) == 0 for p in pads):
        held = f"hold{s_} 0, which is not 'empty' but request slot 0's number,"
    elif written:
        held = (f"hold{s_} slot {slot}, which your `{exercise.name}` wrote there this step "
                f"({exercise.buffer}[{written[0]}] was {int(step.before[written[0]])} before it ran),")
    else:
        held = f"still hold{s_} slot {slot} from an earlier step"
    at = " and ".join(f"[{slot}, {p % spr}]" for p in rows) if spr > 1 else f"[{slot}, {join(range(k))}]"
    landed = any(s_slot == slot for s_slot, *_ in step.record.collisions())
    outcome = (f"A padded store landed last, so the rejection sampler verifies row {victim}'s drafts against that q."
               if landed else "On this launch the live row's stores landed last, so its q survived; on a GPU the "
               "order of the stores is a race.")
    return (f"The graph runs {step.rows * spr} {exercise.unit}s, so padded {exercise.unit}{'s' if plural else ''} "
            f"{join(rows)} {held} and stored {'their' if plural else 'its'} logits, computed from padding, into "
            f"draft_logits{at}: the q of live row {victim}. {outcome}")


_PROBE = -12345  # no slot, and no value a learner's code would write


def _written_by_learner(exercise: HostExercise, step: Step, rows: list[int]) -> list[int]:
    """Which of the padded `rows` the learner's code wrote this step (the value it wrote may be the one
    that was there): the function is called once more, on the same arguments, with the padded rows of
    its buffer holding a probe value."""
    changed = [p for p in rows if int(step.before[p]) != int(step.after[p])]
    if changed or exercise.learner is None or step.call is None:
        return changed
    inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in step.call.inputs]
    probe = inputs[step.call.buffer_at]
    probe[rows] = _PROBE
    try:
        exercise.learner(*inputs)
    except Exception:  # noqa: BLE001 - the step already ran this code without raising; say nothing more
        return []
    return [p for p in rows if int(probe[p]) != _PROBE]


def rebound_arguments(fn: Callable | None) -> list[str]:
    """The arguments of `fn` that its body assigns a new value to (``idx_mapping = ...``), from its source."""
    import ast
    import textwrap


    source = learner_source(fn) if fn is not None else None
    try:
        tree = ast.parse(textwrap.dedent(source)) if source else None
    except SyntaxError:
        tree = None
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None) if tree else None
    if func is None:
        return []
    params = {a.arg for a in func.args.args + func.args.kwonlyargs}
    stored = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return sorted(params & stored)


def _live_outputs(exercise: HostExercise, step: Step, fresh: bool) -> str | None:
    for row in range(step.n):
        if not torch.equal(step.tokens[row], step.ref_tokens[row]):
            return (f"live row {row} drafted tokens {step.tokens[row].tolist()}, the eager run (no padding) "
                    f"{step.ref_tokens[row].tolist()}.")
    q = step.record.draft_logits
    for row, slot in enumerate(step.slots):
        for j in range(q.shape[1]):
            if not torch.allclose(q[slot, j], step.ref_q[slot, j], rtol=1e-5, atol=1e-6):
                return (f"the q of live row {row} (draft_logits[{slot}, {j}]) differs from the eager run's: it is "
                        "not the distribution the row's draft was sampled from.")
    return None


def _past_the_slots(exercise: HostExercise, after, m: int = M) -> str:
    r = next(i for i, v in enumerate(after.tolist()) if v >= m)
    return (f"after your `{exercise.name}` {exercise.buffer} is {fmt(after)}. {exercise.unit.capitalize()} {r} holds "
            f"{int(after[r])}, which is no slot at all (slots are 0..{m - 1}): the kernel would read temperature"
            f"[{int(after[r])}] and seeds[{int(after[r])}] and store past the end of draft_logits, so the checker "
            "stopped before the launch.")


def _negative_values_warning(exercise: HostExercise, step: Step) -> list[str]:
    odd = sorted({int(v) for v in _read_part(step, exercise.spr).tolist() if v < -1})
    if not odd:
        return []
    # Worded without exercise (b)'s answer: this warning shows under (a) before (b) is done.
    return [f"padded {exercise.unit}s held {join(odd)}. The kit's kernel treats every negative slot alike, so "
            "this works here; but vLLM and this kit use -1 as the one 'no request' value, and their checks and "
            "messages name -1."]


def audit_learner(exercise: HostExercise, learner: Callable, name: str, batches) -> str | None:
    """The padding-invariance audit (:mod:`labkit.proofs.speculator_audit`) on the learner's speculator."""
    from labkit.proofs.speculator_audit import audit_speculator

    exercise = dataclasses.replace(exercise, name=name)
    def warmed_up():
        spec = exercise.make_spec(learner)
        # NOTE: on a GPU, GraphRunner warms a step up once before capturing it, and a draft step
        # shifts its own input buffers; capturing every size now keeps that extra run out of the
        # audit's unpadded-vs-padded comparison. (Emulated graphs capture nothing.)
        spec.runner.capture_all(spec.run_rows)
        return spec

    for batch in batches:
        try:
            with kit_work_on(backends.default_device()):
                report = audit_speculator(warmed_up, batch)
        except LearnerRaised as err:
            return (f"in the padding-invariance audit (batch {fmt(batch)}): "
                    + explain_exception(err.original, learner, exercise.name))
        except UnsafeMapping:
            return (f"in the padding-invariance audit (batch {fmt(batch)}): a padded row held a value past the "
                    "last slot.")
        if not report.passed:
            found = "; ".join(report.sentences()[:2])
            return (f"the padding-invariance audit poisoned the rows and slots that live slots {fmt(batch)} do not "
                    f"own, then ran the step unpadded and padded: {found}.")
    return None
