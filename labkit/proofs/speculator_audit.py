"""The padding-invariance audit (:mod:`labkit.proofs.audit`) applied to the kit's speculators.

    audit_speculator(mode or speculator, batch)   one batch of live slots, in row order
    speculator_buffers(spec, batch)               the speculator's buffers as audit Buffers
    batch_compositions(...)                       a `hypothesis` strategy of such batches
    smallest_failing_batch(mode)                  the batch `hypothesis` shrinks a failure to

The reference is the same speculator run eagerly (exactly the live rows, as vLLM's eager mode
does); the audited run is its graph replay on the padded row count. The default batch is
:data:`labkit.bench.scenario.MECHANICS_BATCH` (docs/MECHANICS.md's step t+1: slot 3 finished, 7 rows
padded to 8); the step inputs come from :func:`labkit.bench.scenario.propose_inputs`.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import replace
from typing import Sequence

from labkit.bench.scenario import MECHANICS_BATCH, propose_inputs
from labkit.errors import LabkitInputError
from labkit.proofs.audit import DEFAULT_POISONS, STALE, AuditReport, Buffer, audit_step

DEFAULT_CAPTURE_SIZES = (1, 2, 4, 8)


@contextlib.contextmanager
def _eager(spec):
    """Run the speculator's step on exactly num_reqs rows, as vLLM's eager mode does."""
    previous = spec.runner.mode
    spec.runner.mode = "eager"
    try:
        yield
    finally:
        spec.runner.mode = previous


def speculator_buffers(spec, batch: Sequence[int], reader: str = "") -> list[Buffer]:
    """The persistent buffers of a speculator, with the part that `batch` (live slots in row order) owns;
    `reader`: who reads draft_logits after the step, named in the report."""
    n, M, k, V = len(batch), spec.max_num_reqs, spec.k, spec.vocab_size
    rows = range(n)
    bufs = [
        Buffer("idx_mapping", spec.idx_mapping, "row", rows, "mapping", values=(0, M)),
        Buffer("input_tokens", spec.input_tokens, "row", rows, "input", values=(1, V)),
        Buffer("positions", spec.positions, "row", rows, "input", values=(0, 1000)),
        Buffer("temperature", spec.temperature, "slot", batch, "input", values=(0.3, 1.5)),
        Buffer("seeds", spec.seeds, "slot", batch, "input", values=(0, 2**31)),
    ]
    if spec.drafter == "dflash":
        bufs += [
            Buffer("sample_idx_mapping", spec.sample_idx_mapping, "row", range(n * k), "mapping", values=(0, M)),
            Buffer("sample_pos", spec.sample_pos, "row", range(n * k), "input", values=(0, 1000)),
        ]
    if spec.draft_logits is not None:
        bufs.append(Buffer("draft_logits", spec.draft_logits, "slot", batch, "output", read_by=reader))
    bufs.append(Buffer("draft_tokens", spec.draft_tokens, "row", rows, "output", values=(0, V)))
    return bufs


def _speculator(spec_or_mode, models, *, k: int, max_num_reqs: int, capture_sizes):
    """A speculator from a mode name, a factory, or a speculator; with a write trace attached."""
    from labkit.kernels.gumbel import WriteTrace

    if isinstance(spec_or_mode, str):
        from labkit import backends
        from labkit.bench.modes import mode_named
        from labkit.models import load_toy_models
        from labkit.speculator import build_speculator

        models = models or load_toy_models(backends.default_device())
        config = replace(mode_named(spec_or_mode).config, k=k, max_num_reqs=max_num_reqs,
                         capture_sizes=tuple(capture_sizes))
        spec = build_speculator(models.draft, config, record=True)
    elif callable(spec_or_mode) and not hasattr(spec_or_mode, "propose"):
        spec = spec_or_mode()
    else:
        spec = spec_or_mode
    if not hasattr(spec, "propose") or not hasattr(spec, "runner"):
        raise LabkitInputError("audit_speculator needs a Speculator, a function returning one, or a mode name")
    if spec.trace is None and spec.draft_logits is not None:
        spec.trace = WriteTrace.empty(spec.max_num_reqs, spec.k, spec.device)
    return spec


def audit_speculator(
    spec_or_mode,
    batch: Sequence[int] = MECHANICS_BATCH,
    *,
    poisons: Sequence = DEFAULT_POISONS,
    models=None,
    k: int = 2,
    max_num_reqs: int = 8,
    capture_sizes=DEFAULT_CAPTURE_SIZES,
    inputs_seed: int = 0,
    reader: str = "",
    name: str | None = None,
) -> AuditReport:
    """Audit one of the kit's speculators on one batch of live slots (in row order).

    spec_or_mode: a mode name ("graph-buggy", "graph-fixed", "dflash-buggy", ...; see
    :data:`labkit.bench.modes.MODES`), a :class:`~labkit.speculator.Speculator`, or a function that
    returns one (k, max_num_reqs and capture_sizes apply to a mode name only). A speculator
    without a write trace gets one attached (:class:`~labkit.kernels.gumbel.WriteTrace`). A mode
    that refuses to run (graph-host-only) raises PaddedSlotOutOfBoundsError, as it should.
    `reader`: who reads draft_logits after the step, named beside each record in the report; `name`:
    the report's (default: the mode, or the speculator's class).
    """
    spec = _speculator(spec_or_mode, models, k=k, max_num_reqs=max_num_reqs,
                       capture_sizes=capture_sizes)
    name = name or (spec_or_mode if isinstance(spec_or_mode, str) else type(spec).__name__)
    batch = [int(s) for s in batch]
    n, k = len(batch), spec.k
    inputs = propose_inputs(spec, batch, seed=inputs_seed)
    padded = spec.runner.rows_for(n)

    def step(rows: int):
        if rows == n and padded != n:
            with _eager(spec):
                return spec.propose(*inputs)
        return spec.propose(*inputs)

    dflash = spec.drafter == "dflash"
    report = audit_step(
        step, speculator_buffers(spec, batch, reader), live_rows=n, padded_rows=padded, poisons=poisons,
        trace=spec.trace if spec.draft_logits is not None else None, traced="draft_logits",
        writer_live_rows=n * k if dflash else n,
        writer_label=(lambda r: f"sample row {r} (request row {r // k}, draft step {r % k})") if dflash else None,
        name=name,
    )
    if padded == n:
        report.notes.append(f"a batch of {n} runs on exactly {n} rows here (no padding), so there was "
                            "nothing for padded rows to corrupt")
    return report


# -- random batches with hypothesis -----------------------------------------------------------

def batch_compositions(max_num_reqs: int = 8, capture_sizes=DEFAULT_CAPTURE_SIZES, padded_only: bool = True):
    """A `hypothesis` strategy: live slots in row order (distinct, any order, any subset).

    padded_only: only sizes that are not capture sizes, so every batch has padded rows.
    """
    from hypothesis import strategies as st

    sizes = [n for n in range(1, min(max_num_reqs, capture_sizes[-1]) + 1)
             if not (padded_only and n in capture_sizes)]
    if not sizes:
        raise LabkitInputError(f"no batch size up to {max_num_reqs} needs padding with capture sizes {capture_sizes}")
    return st.sampled_from(sizes).flatmap(
        lambda n: st.permutations(list(range(max_num_reqs))).map(lambda p: tuple(p[:n])))


def smallest_failing_batch(mode: str, *, max_examples: int = 30, poisons: Sequence = (STALE,), models=None,
                           max_num_reqs: int = 8, capture_sizes=DEFAULT_CAPTURE_SIZES, **kwargs):
    """The smallest batch (after `hypothesis` shrinks it) on which the audit of `mode` fails, or None.

    kwargs go to :func:`audit_speculator` (k, inputs_seed). With compiled kernels (a GPU) the search
    runs on the torch references and CPU copies of `models`: there colliding rows race, and a failure
    that comes and goes cannot be shrunk.
    """
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import Flaky, NoSuchExample

    from labkit import backends
    from labkit.models import ToyModels, load_toy_models

    if backends.backend() == "triton":
        # Compiled kernels on a GPU race: whether a colliding padded row's values land in a live q
        # differs from launch to launch, and hypothesis can only shrink a failure that repeats. So
        # the search runs where rows store in order: the torch references, on CPU copies of the
        # models (the answer is the CPU lab's).
        on_cpu = models and ToyModels(models.tokenizer, copy.deepcopy(models.target).cpu(),
                                      copy.deepcopy(models.draft).cpu())
        with backends.using_backend("torch"):
            return smallest_failing_batch(mode, max_examples=max_examples, poisons=poisons,
                                          models=on_cpu or load_toy_models("cpu"), max_num_reqs=max_num_reqs,
                                          capture_sizes=capture_sizes, **kwargs)
    models = models or load_toy_models(backends.default_device())
    strategy = batch_compositions(max_num_reqs, capture_sizes, padded_only=False)
    config = settings(max_examples=max_examples, database=None, derandomize=True, deadline=None,
                      suppress_health_check=list(HealthCheck))

    def fails(batch) -> bool:
        return not audit_speculator(mode, batch, poisons=poisons, models=models, max_num_reqs=max_num_reqs,
                                    capture_sizes=capture_sizes, **kwargs).passed

    try:
        return list(find(strategy, fails, settings=config))
    except NoSuchExample:
        return None
    except Flaky as err:  # a guard: the backends searched here store rows in order
        raise RuntimeError(
            f"the audit of {mode!r} failed on a batch once and passed on it when run again, on backend "
            f"{backends.backend()!r}: a failure that comes and goes cannot be shrunk"
        ) from err
