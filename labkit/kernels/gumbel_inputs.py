"""Input checks of the sampling kernel's entry points (:mod:`labkit.kernels.gumbel`).

Two kinds: the layout (shapes, dtypes, devices, strides), read from tensor attributes without
touching the data, and the values (slots, temperatures, NaN), which read the data and so
synchronise with a GPU -- the reason benchmarks can turn them off with ``validate=False``.
They run where inputs enter (the public entry points); the launchers behind them trust their inputs.
"""

from __future__ import annotations

import torch

from labkit.checks import (
    FLOAT_DTYPES,
    check_int,
    check_mapping_dtype,
    check_no_nan,
    check_same_device,
    check_slot_values,
    check_temperatures,
    check_tensor,
    check_writable,
)
from labkit.errors import LabkitInputError, padded_slot_error
from labkit.kernels.sampling_state import SamplingState


def check_switches(masked: bool, early_exit: bool) -> None:
    """The one rule between the kernel's switches: `early_exit` is a variant of the masked kernel only."""
    if early_exit and not masked:
        raise LabkitInputError("early_exit skips rows with slot < 0, which only the masked kernel knows about")


def check_state(state) -> None:
    if not isinstance(state, SamplingState):
        raise LabkitInputError(f"the sampling inputs travel in a SamplingState(idx_mapping, temperature, seeds, "
                               f"positions, draft_logits), got {type(state).__name__}")


def check_layout(logits, state: SamplingState, trace, *, draft_step, samples_per_req, backend):
    """Shapes, dtypes, devices and strides: host-side attributes only, no synchronisation."""
    check_state(state)
    idx_mapping, temperature, seeds, positions, draft_logits = (
        state.idx_mapping, state.temperature, state.seeds, state.positions, state.draft_logits)
    check_tensor("logits", logits, dim=2, dtypes=FLOAT_DTYPES, what=" [num_rows, vocab] floating point")
    num_rows, vocab = logits.shape
    if vocab < 1:
        raise LabkitInputError(f"logits has shape {tuple(logits.shape)}: the vocabulary must have at least 1 token")
    check_tensor("idx_mapping", idx_mapping, dim=1, what=" [num_rows]: one slot per batch row")
    check_mapping_dtype(idx_mapping)
    check_tensor("temperature", temperature, dim=1, dtypes=(torch.float32,), what=" [max_num_reqs]")
    check_tensor("seeds", seeds, dim=1, dtypes=(torch.int64,), what=" [max_num_reqs]")
    check_tensor("positions", positions, dim=1, dtypes=(torch.int32, torch.int64), what=" [num_rows]")
    max_num_reqs = temperature.shape[0]
    if seeds.shape[0] != max_num_reqs or max_num_reqs < 1:
        raise LabkitInputError(f"temperature and seeds hold one entry per slot: they must have the same "
                               f"length >= 1, got {max_num_reqs} and {seeds.shape[0]}")
    if idx_mapping.shape[0] < num_rows or positions.shape[0] < num_rows:
        raise LabkitInputError(
            f"the launch has {num_rows} rows but idx_mapping has {idx_mapping.shape[0]} and "
            f"positions {positions.shape[0]} entries"
        )
    draft_step = check_int("draft_step", draft_step, low=0)
    samples_per_req = check_int("samples_per_req", samples_per_req, low=1)
    if num_rows % samples_per_req:
        raise LabkitInputError(f"{num_rows} rows is not a whole number of {samples_per_req}-sample requests")
    steps_needed = draft_step + samples_per_req
    if draft_logits is not None:
        check_tensor("draft_logits", draft_logits, dim=3, dtypes=(torch.float32,), what=" [max_num_reqs, k, vocab]")
        if draft_logits.shape[0] != max_num_reqs or draft_logits.shape[2] != vocab:
            raise LabkitInputError(f"draft_logits must be [max_num_reqs={max_num_reqs}, k, vocab={vocab}], "
                                   f"got {tuple(draft_logits.shape)}")
        if steps_needed > draft_logits.shape[1]:
            raise LabkitInputError(f"draft steps {draft_step}..{steps_needed - 1} do not fit draft_logits "
                                   f"with k={draft_logits.shape[1]}")
        if draft_logits.stride(2) != 1 and vocab > 1:
            raise LabkitInputError(
                f"draft_logits must have stride 1 along the vocabulary (the kernel stores each row's "
                f"block of consecutive tokens in place), got strides {tuple(draft_logits.stride())}; "
                "its slot and step strides may be anything"
            )
        check_writable("draft_logits", draft_logits)
    if trace is not None:
        _check_trace(trace, max_num_reqs, steps_needed)
    device = check_same_device(logits=logits, idx_mapping=idx_mapping, temperature=temperature, seeds=seeds,
                               positions=positions, draft_logits=draft_logits,
                               trace=trace.writer if trace is not None else None)
    if backend == "triton" and device.type != "cuda":
        raise LabkitInputError(f"the compiled kernels run on the GPU: the tensors must be on CUDA, not {device}")


def _check_trace(trace, max_num_reqs: int, steps_needed: int) -> None:
    if not all(isinstance(getattr(trace, n, None), torch.Tensor) for n in ("writer", "writes")):
        raise LabkitInputError(f"trace must be a WriteTrace (WriteTrace.empty(max_num_reqs, k, device)), got {trace!r}")
    for name, t in (("trace.writer", trace.writer), ("trace.writes", trace.writes)):
        check_tensor(name, t, dim=2, dtypes=(torch.int32,), what=" [max_num_reqs, k]")
        if t.shape[0] != max_num_reqs or t.shape[1] < steps_needed or not t.is_contiguous():
            raise LabkitInputError(f"{name} must be a contiguous [max_num_reqs={max_num_reqs}, k >= "
                                   f"{steps_needed}] tensor, got shape {tuple(t.shape)}")


def check_values(logits, state: SamplingState, masked):
    """Slots, temperatures and logits as the launch will read them (synchronises with a GPU)."""
    idx_mapping, temperature = state.idx_mapping, state.temperature
    num_rows = logits.shape[0]
    if num_rows == 0 or (logits.is_cuda and torch.cuda.is_current_stream_capturing()):
        return  # under CUDA graph capture nothing can be read back; the capture's warm-up checked
    slots = idx_mapping[:num_rows].to(torch.int64)
    check_slot_values("idx_mapping", slots, temperature.shape[0], allow_negative=True)
    negative = slots < 0
    if not masked and bool(negative.any()):
        raise padded_slot_error("gumbel_sample", negative.nonzero().flatten().tolist(), slots[negative].tolist())
    check_temperatures(temperature, slots[~negative])
    # Only the live rows' logits: a padded row (slot -1) stores nothing and its token is thrown
    # away, so NaN or inf there (stale activations under a padded graph) can reach no live row.
    check_no_nan("logits", logits, rows=~negative)


def _unit_stride(t: torch.Tensor, dim: int) -> bool:
    return t.shape[dim] <= 1 or t.stride(dim) == 1


def check_launchable(logits, state: SamplingState, draft_step, samples_per_req) -> None:
    """What the launcher needs to address memory right (cheap, no synchronisation)."""
    check_state(state)
    if logits.dim() != 2 or logits.shape[1] < 1:
        raise LabkitInputError(f"logits must be [num_rows, vocab >= 1], got shape {tuple(logits.shape)}")
    check_int("draft_step", draft_step, low=0)
    check_int("samples_per_req", samples_per_req, low=1)
    unit = [("logits", logits, 1)] + [(n, getattr(state, n), 0) for n in (
        "idx_mapping", "temperature", "seeds", "positions")]
    if state.draft_logits is not None:
        unit.append(("draft_logits", state.draft_logits, 2))
    for name, t, dim in unit:
        if t.dim() <= dim or not _unit_stride(t, dim):
            hint = "" if name == "draft_logits" else ", or call gumbel_sample, which packs read-only inputs"
            raise LabkitInputError(
                f"the launcher reads {name} with stride 1 along dimension {dim}, got strides "
                f"{tuple(t.stride())}: pass a packed copy (.contiguous()){hint}"
            )
