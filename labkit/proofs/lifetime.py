"""An output-lifetime audit: what one stage of a step hands on must still hold when its reader reads it.

The padding-invariance audit (:mod:`labkit.proofs.audit`) compares one step's live outputs with
and without padding. A captured graph can corrupt a live request another way, which that audit
does not see: a graph's output lives in memory the next graph may be given (graphs that share a
memory pool, :class:`~labkit.graph_pool.GraphPool`), so an output is right when it is made and
wrong by the time it is read. This audit checks the second property:

    An output a stage hands on must not change when a later stage (a graph replay) runs before it
    is read.

Describe one engine step as :class:`Stage` s in the order they run (a name and a function), and
each output handed on as a :class:`HandedOn`: its name, how to get it as its reader will read it,
the stage that hands it on and the stage that reads it. :func:`audit_lifetime` runs the step
``steps`` times (``before_step(i)`` sets step i's inputs); it copies each output right after the
stage that hands it on and compares after every later stage, up to its reader. The first stage
after which it differs is named as the writer:
``draft graph overwrote hidden_states[0:2, :], handed on by target graph, before prompt logprobs read it``.
The report is an :class:`~labkit.proofs.audit_report.AuditReport` like the padding audit's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from labkit.errors import LabkitInputError
from labkit.proofs.audit_report import OUTPUT_LIFETIME, AuditReport, Overwrite
from labkit.proofs.poisoning import differs, max_diff

__all__ = ["HandedOn", "Stage", "audit_lifetime"]


@dataclass(frozen=True)
class Stage:
    """One part of an engine step, in the order the step runs them: a graph replay, a sampler, a reader."""

    name: str
    run: Callable[[], object]


@dataclass(frozen=True)
class HandedOn:
    """An output that stage `by` hands on and stage `read_by` reads.

    tensor: returns the output as the reader will read it (called after `by` has run, and again
            just before `read_by` runs: the reference the engine holds, not a copy).
    rows:   how many leading rows are the step's own (a padded graph's output has more); a number,
            or a function called after `by` has run. Default: all of them.
    """

    name: str
    tensor: Callable[[], torch.Tensor]
    by: str
    read_by: str
    rows: int | Callable[[], int] | None = None


def audit_lifetime(stages: Sequence[Stage], outputs: Sequence[HandedOn], *, steps: int = 1,
                   before_step: Callable[[int], object] | None = None, name: str = "step") -> AuditReport:
    """Run `stages` in order `steps` times and check every output in `outputs` for its lifetime."""
    stages, outputs = _checked(stages, outputs, steps, before_step)
    order = {s.name: i for i, s in enumerate(stages)}
    findings: dict[tuple, Overwrite] = {}
    for step in range(steps):
        if before_step is not None:
            before_step(step)
        held: dict[str, tuple[torch.Tensor, int, str | None]] = {}  # output -> (copy, rows, first writer)
        for stage in stages:
            for out in outputs:  # read now: compared with the copy taken when it was handed on
                if out.read_by == stage.name and out.name in held:
                    _compare_at_read(out, held.pop(out.name), step, findings)
            stage.run()
            for out in outputs:
                if out.name in held:
                    copy, rows, writer = held[out.name]
                    if writer is None and differs(_rows_of(out.tensor(), rows), copy):
                        held[out.name] = (copy, rows, stage.name)
                elif out.by == stage.name and order[out.read_by] > order[stage.name]:
                    rows = _rows(out)
                    held[out.name] = (_rows_of(out.tensor(), rows).clone(), rows, None)
    shape = f"{len(stages)} stages ({', '.join(s.name for s in stages)}) over {steps} step(s)"
    ordered = sorted(findings.values(), key=lambda f: ([o.name for o in outputs].index(f.buffer), f.writer))
    return AuditReport(name, 0, 0, (), [o.name for o in outputs], ordered, checks=OUTPUT_LIFETIME, shape=shape)


def _compare_at_read(out: HandedOn, held, step: int, findings: dict) -> None:
    copy, rows, writer = held
    now = _rows_of(out.tensor(), rows)
    if not differs(now, copy):
        return
    changed = tuple(i for i in range(copy.shape[0]) if differs(now[i], copy[i]))
    key = (out.name, writer)
    if key in findings:
        f = findings[key]
        f.steps = (*f.steps, step)
        f.rows = tuple(sorted(set(f.rows) | set(changed)))
        f.location = _location(out.name, f.rows, copy.dim())
        f.max_abs_diff = max(f.max_abs_diff, max_diff(now, copy))
        return
    findings[key] = Overwrite(out.name, changed, _location(out.name, changed, copy.dim()), out.by,
                              writer or "a stage that ran in between", out.read_by, (step,), max_diff(now, copy))


def _rows(out: HandedOn) -> int | None:
    rows = out.rows() if callable(out.rows) else out.rows
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise LabkitInputError(f"output {out.name}: rows must be a count >= 0, got {rows!r}")
    return rows


def _rows_of(tensor, rows: int | None) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor) or tensor.dim() < 1:
        raise LabkitInputError(f"a handed-on output must be a tensor with at least one dimension, got {tensor!r}")
    return (tensor if rows is None else tensor[:rows]).detach().cpu()


def _location(name: str, rows: tuple[int, ...], dims: int) -> str:
    rest = ", :" * (dims - 1)
    if rows and list(rows) == list(range(rows[0], rows[-1] + 1)):
        first = f"{rows[0]}" if len(rows) == 1 else f"{rows[0]}:{rows[-1] + 1}"
    else:
        first = ", ".join(str(r) for r in rows[:4]) + (" ..." if len(rows) > 4 else "")
        first = f"[{first}]"
    return f"{name}[{first}{rest}]"


def _checked(stages, outputs, steps, before_step):
    stages, outputs = list(stages), list(outputs)
    if not stages or not all(isinstance(s, Stage) and callable(s.run) for s in stages):
        raise LabkitInputError("audit_lifetime needs the step's stages as a non-empty list of Stage(name, run)")
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise LabkitInputError(f"stage names repeat: {names}")
    if not outputs or not all(isinstance(o, HandedOn) for o in outputs):
        raise LabkitInputError("audit_lifetime needs the outputs handed on, as a non-empty list of HandedOn")
    if len({o.name for o in outputs}) != len(outputs):
        raise LabkitInputError(f"output names repeat: {[o.name for o in outputs]}")
    for o in outputs:
        for role, stage in (("by", o.by), ("read_by", o.read_by)):
            if stage not in names:
                raise LabkitInputError(f"output {o.name}: {role}={stage!r} is no stage; the stages are {names}")
        if names.index(o.read_by) <= names.index(o.by):
            raise LabkitInputError(f"output {o.name}: its reader {o.read_by!r} must run after {o.by!r}, which "
                                   "hands it on")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise LabkitInputError(f"steps must be a positive integer, got {steps!r}")
    if before_step is not None and not callable(before_step):
        raise LabkitInputError("before_step must be a function of the step number")
    return stages, outputs
