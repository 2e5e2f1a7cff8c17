"""Exercises for notebook 07: write the fix yourself; each checker runs your code through the kit.

    (a) check_fill(copy_idx_mapping)          the host-side fill of the padded rows
    (b) check_kernel(gumbel_kernel)           the `slot >= 0` masks in a @triton.jit sampling kernel
    (c) check_dflash(build_sample_mapping)    the pad value of DFlash's per-sample mapping
    (d) check_offset(q_offset)                the int64 cast in `slot * stride` (vLLM #46560)

Each checker takes your function (or a namespace such as ``globals()``, where it looks the name up)
and returns a :class:`CheckResult`, shown as one paragraph: "solved", or "not solved yet" with what
went wrong in terms of rows, slots and buffers, and what to change. A checker never raises: an
exception inside your code is caught and explained, with the line of your function it came from.

How each checker runs your code:

* (a) and (c) plug your function into a :class:`~labkit.speculator.Speculator` (or its DFlash
  sibling) in place of the kit's own fill, run the timeline of MECHANICS.md (8 requests, then slot 3
  finishes, ...) through padded graphs, and read the launch's write trace: which row stored
  ``draft_logits[slot, step]`` last.
* (b) launches your kernel on buffers that sit inside larger allocations, so that a row with slot
  -1 reads and writes *guard* memory instead of crashing; it compares tokens and q with the torch
  reference (:func:`~labkit.kernels.gumbel.gumbel_sample_torch`) and inspects the guards.
  If the kit has :mod:`labkit.proofs.audit`, your speculator also goes through its padding-invariance
  audit (live outputs must not change when everything the batch does not own is poisoned).
* (d) calls your offset function from a small kernel with vLLM-sized strides and compares with
  exact Python integers, then stores through it into a small buffer.

Hints: ``hint("a")``, ``hint("a", 2)``, ...
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable

import torch

from labkit import backends as _backends
from labkit.checks import LabkitInputError, PaddedSlotOutOfBoundsError
from labkit.kernels.gumbel import gumbel_sample_torch
from labkit.kernels.noise import SALT_DRAFT

if _backends.HAS_TRITON:
    import triton
    import triton.language as tl

    from labkit.kernels.noise import row_key, uniform
else:  # pragma: no cover - macOS / Windows
    # Stand-ins so that the exercise cells still *define* their functions without Triton; the
    # checkers then say plainly that kernels cannot run here.
    def _jit_unavailable(fn=None, **_kwargs):
        return fn if fn is not None else (lambda f: f)

    triton = types.SimpleNamespace(jit=_jit_unavailable, next_power_of_2=lambda n: 1 << (n - 1).bit_length())
    tl = types.SimpleNamespace(constexpr=int, int64="int64", int32="int32", uint32="uint32")
    row_key = uniform = None

__all__ = [
    "CheckResult", "check_fill", "check_kernel", "check_dflash", "check_offset", "hint",
    "triton", "tl", "row_key", "uniform",
]

# The timeline of the checks: max_num_reqs 8, capture sizes 1, 2, 4, 8, two draft steps.
M, K = 8, 2
CAPTURE_SIZES = (1, 2, 4, 8)
# One speculator runs these batches (live slots, in row order) one after another. The first two
# are MECHANICS.md's timeline: 8 requests, then slot 3 finishes and the rows shift.
TIMELINE = ([0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 4, 5, 6, 7], [3, 4, 5, 6, 7], [6, 1], [2, 0, 7])
# A fresh speculator whose buffer still holds its initial zeros: 3 live rows, graph of 4.
FRESH = ([0, 1, 2],)


@dataclass
class CheckResult:
    """The verdict of a checker; shows as its message in a notebook."""

    exercise: str
    solved: bool
    message: str

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__

    def __bool__(self) -> bool:
        return self.solved


def _solved(ex: str, text: str) -> CheckResult:
    return CheckResult(ex, True, f"Exercise ({ex}) solved. {text}")


def _not_yet(ex: str, text: str) -> CheckResult:
    return CheckResult(ex, False, f"Exercise ({ex}) not solved yet: {text}")


class _UnsafeMapping(Exception):
    """The learner's mapping holds values that are no slot and not -1: stop before any launch."""


def _refuse_unsafe(mapping: torch.Tensor) -> None:
    # On a GPU the launch inside a graph capture skips the kit's input checks, and a slot past the
    # buffers would be a wild store: diagnose from the buffer instead of launching.
    if bool(((mapping >= M) | (mapping < -1)).any()):
        raise _UnsafeMapping()


class _LearnerRaised(Exception):
    """Wraps an exception raised inside the learner's function, to tell it from the kit's own."""

    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


def _resolve(ex: str, obj: Any, name: str) -> tuple[Callable | None, CheckResult | None]:
    if isinstance(obj, dict):
        obj = obj.get(name)
    if obj is None:
        return None, _not_yet(ex, f"`{name}` is not defined yet. Run the cell that defines it "
                                  "(if it raised an error, fix that first), then run this checker again.")
    if not callable(obj):
        return None, _not_yet(ex, f"`{name}` should be a function, but it is a {type(obj).__name__}.")
    return obj, None


def _python_function(fn: Callable) -> types.FunctionType | None:
    """The plain Python function behind `fn` (a Triton kernel keeps it in `.fn`)."""
    inner = getattr(fn, "fn", fn)
    return inner if isinstance(inner, types.FunctionType) else None


def _explain_exception(exc: BaseException, fn: Callable, name: str) -> str:
    """One paragraph about an exception that came out of the learner's code."""
    chain, seen = [], exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    root = chain[-1]
    text = str(root).strip().splitlines()[0] if str(root).strip() else ""
    text = text[:300]
    where = ""
    py = _python_function(fn)
    if py is not None:
        code = py.__code__
        for err in chain:
            frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == code.co_filename
                      and f.lineno is not None and f.lineno >= code.co_firstlineno]
            if frames:
                frame = frames[-1]
                where = f" at line {frame.lineno - code.co_firstlineno + 1} of `{name}`"
                if frame.line:
                    where += f" (`{frame.line.strip()}`)"
                break
    if not where and py is not None:
        where = _compile_error_line(chain, py, name)
    advice = ""
    lowered = text.lower()
    if "mask has unsupported dtype" in lowered:
        advice = (" Newer Triton interpreters refuse a mask built as `block_mask & scalar_mask` when the "
                  "scalar came from tl.load. Broadcast the scalar first: "
                  "`mask = in_vocab & ((offs * 0 + slot) >= 0)`, or `tl.where(slot >= 0, in_vocab, False)`.")
    elif isinstance(root, NameError):
        advice = (" A name your code uses is not defined. Kernels may use `tl`, `row_key` and `uniform` "
                  "(the first cell of the notebook imports them) and their own arguments.")
    elif isinstance(root, (IndexError, RuntimeError)) and ("size" in lowered or "shape" in lowered):
        advice = " Check the sizes of what you assign: the right side must fit the slice on the left."
    elif isinstance(root, TypeError):
        advice = " Check the arguments: the checker calls your function with the signature given in the exercise."
    return f"`{name}` raised {type(root).__name__}{where}: {text}.{advice}"


def _compile_error_line(chain: list, py: types.FunctionType, name: str) -> str:
    """Where a compiled Triton kernel failed: CompilationError carries the AST node, whose line
    counts from the `def` (Triton drops the decorators); count from the decorator like a cell does."""
    node = next((getattr(e, "node", None) for e in chain if getattr(e, "node", None) is not None), None)
    lineno = getattr(node, "lineno", None)
    if not lineno:
        return ""
    try:
        lines = inspect.getsource(py).splitlines()
    except (OSError, TypeError):
        return ""
    def_index = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)
    index = def_index + lineno - 1
    if not 0 <= index < len(lines):
        return ""
    return f" at line {index + 1} of `{name}` (`{lines[index].strip()}`)"


def _unexpected(ex: str, err: BaseException) -> CheckResult:
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return _not_yet(ex, f"the kit stopped with {type(err).__name__}: {first}. If nothing in your code "
                        "explains it, tell the instructor (it may be the kit's own fault).")


def _never_raises(check):
    """A checker answers in words; whatever goes wrong inside it becomes a 'not solved yet'."""
    import functools

    @functools.wraps(check)
    def wrapper(learner):
        try:
            return check(learner)
        except Exception as err:  # noqa: BLE001
            return _unexpected(_EXERCISE[check.__name__], err)

    return wrapper


_EXERCISE = {"check_fill": "a", "check_kernel": "b", "check_dflash": "c", "check_offset": "d"}


# ------------------------------------------------------------------------------------------------
# Shared: a speculator that runs the learner's host code, and the timeline's inputs.


def _step_inputs(models, slots: list[int], step: int):
    from labkit.models import encode_context

    g = torch.Generator().manual_seed(1000 + step)
    histories = [torch.randint(1, models.draft.vocab_size, (20,), generator=g).tolist() for _ in slots]
    contexts = encode_context(histories, models.draft.context_len)
    temperature = torch.linspace(0.6, 1.0, M)
    seeds = torch.arange(M, dtype=torch.int64) * 1000 + 7
    positions = torch.full((len(slots),), 20, dtype=torch.int64)
    device = next(models.draft.parameters()).device
    return tuple(t.to(device) for t in (torch.tensor(slots, dtype=torch.int32), temperature, seeds,
                                        contexts, positions))


def _models():
    """The toy models, where the kit's kernels run (the GPU for compiled Triton, else the CPU)."""
    from labkit.models import load_toy_models

    return load_toy_models(_backends.default_device())


def _rows_for(n: int) -> int:
    return next(s for s in CAPTURE_SIZES if s >= n)


def _fmt(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _join(items: list) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _q_matches_own_rows(rec) -> list[tuple[int, int, int]]:
    """(row, slot, step) of live rows whose q is not their own scaled logits."""
    bad = []
    for row, slot in enumerate(rec.live_slots):
        t = float(rec.temperature[slot])
        for step in range(rec.draft_logits.shape[1]):
            own = rec.row_logits[row, step]  # DFlash: sample row row * k + step, reshaped to [rows, k, V]
            expect = own / t if t != 0 else own
            if not torch.allclose(rec.draft_logits[slot, step], expect, rtol=1e-6, atol=0):
                bad.append((row, slot, step))
    return bad


# ------------------------------------------------------------------------------------------------
# (a) the host-side fill


def _fill_speculator(learner: Callable):
    from labkit.speculator import FixSwitches, Speculator

    class LearnerFill(Speculator):
        """The kit's speculator with its own fill switched off; the learner writes idx_mapping."""

        def copy_request_inputs(self, slots, temperature, seeds, contexts, positions):
            before = self.idx_mapping.clone()
            num_reqs = super().copy_request_inputs(slots, temperature, seeds, contexts, positions)
            self.idx_mapping.copy_(before)  # stale state exactly as earlier steps left it
            self.before = before.cpu()
            try:
                self.returned = learner(self.idx_mapping, slots.clone())
            except Exception as err:  # noqa: BLE001 - any learner error is explained, not raised
                raise _LearnerRaised(err) from err
            self.after = self.idx_mapping.cpu().clone()
            _refuse_unsafe(self.after)
            return num_reqs

    return LearnerFill(_models().draft, max_num_reqs=M, num_steps=K, capture_sizes=CAPTURE_SIZES,
                       fix=FixSwitches(fill_padding=False, mask_kernel=True), record=True)


def _diagnose_mapping(ex, name, step_text, mapping, expected, num_reqs, rows, live_slots, spr=1,
                      fresh=False, pad_words="idx_mapping[num_reqs:]"):
    """Explain the first way `mapping` differs from `expected`; None if it does not."""
    owner = {slot: row for row, slot in enumerate(live_slots)}
    n_live = num_reqs * spr
    unit = "sample row" if spr > 1 else "row"
    shown = f"after your `{name}` the buffer is {_fmt(mapping)}."
    for r in range(n_live):
        if int(mapping[r]) != int(expected[r]):
            req = r // spr
            what = (f"{unit} {r} is live request row {req}'s draft step {r % spr}" if spr > 1
                    else f"row {r} is a live request")
            fix = ("each slot of idx_mapping[:num_reqs] repeated k times in a row "
                   "(`repeat_interleave`, not `repeat`)" if spr > 1
                   else "copy `slots` into idx_mapping[:num_reqs]")
            return _not_yet(ex, f"{step_text} {shown} {what[0].upper() + what[1:]}, so it must map to slot "
                                f"{int(expected[r])}, but it maps to {int(mapping[r])}. Write the live part: {fix}.")
    # Padded rows inside the graph: these ran through the kernel this step.
    for r in range(n_live, rows * spr):
        v = int(mapping[r])
        if v == -1:
            continue
        padded = f"padded {unit} {r}"
        if v in owner:
            victim = owner[v]
            if fresh and v == 0:
                held = "holds slot 0 (the buffer starts as zeros and nothing cleared it)"
            elif v == 0 and all(int(x) == 0 for x in mapping[n_live: rows * spr]):
                held = "holds 0, which is not 'empty' but request slot 0,"
            else:
                held = f"still holds slot {v}"
            return _not_yet(ex, f"{step_text} {shown} The graph runs {rows * spr} {unit}s, so {padded} "
                                f"{held} and it overwrote the q of live row {victim} (draft_logits[{v}]) "
                                f"with logits computed from padding. Fill {pad_words} with -1.")
        if v < -1:
            return _not_yet(ex, f"{step_text} {shown} {padded[0].upper() + padded[1:]} holds {v}; the "
                                f"'no request' marker is exactly -1 (the kernel skips slot < 0, but keep "
                                f"one sentinel). Fill {pad_words} with -1.")
        if v >= M:
            return _not_yet(ex, f"{step_text} {shown} {padded[0].upper() + padded[1:]} holds {v}, which is "
                                f"not a slot at all (slots are 0..{M - 1}): the kernel would index past "
                                f"the slot-indexed buffers. The 'no request' marker is -1.")
        return _not_yet(ex, f"{step_text} {shown} {padded[0].upper() + padded[1:]} holds slot {v}. No live "
                            f"request owns slot {v} this step, so only a finished request's q was "
                            f"overwritten this time; when a new request takes slot {v} it will be a live "
                            f"one. Fill {pad_words} with -1.")
    for r in range(rows * spr, len(mapping)):
        if int(mapping[r]) != -1:
            return _not_yet(ex, f"{step_text} {shown} {unit[0].upper() + unit[1:]} {r} holds {int(mapping[r])}. "
                                f"It lies past this step's graph of {rows * spr} {unit}s, so it did no harm "
                                f"now, but the next step with a larger graph reads it before anything "
                                f"rewrites it. Fill all of {pad_words}, not only up to the graph's size.")
    return None


def _run_host_exercise(ex, name, learner, make_spec, spr, pad_words):
    for fresh, timeline in ((False, TIMELINE), (True, FRESH)):
        models = _models()
        try:
            spec = make_spec(learner)
        except Exception as err:  # noqa: BLE001
            return _unexpected(ex, err)
        for i, slots in enumerate(timeline):
            n, rows = len(slots), _rows_for(len(slots))
            label = "On a fresh engine" if fresh else f"At step {i} of the timeline"
            step_text = (f"{label} (live slots {_fmt(slots)} in rows 0..{n - 1}, num_reqs={n}, "
                         f"graph of {rows} rows):")
            try:
                spec.propose(*_step_inputs(models, slots, i))
            except _LearnerRaised as err:
                return _not_yet(ex, f"{step_text} " + _explain_exception(err.original, learner, name))
            except (_UnsafeMapping, LabkitInputError, PaddedSlotOutOfBoundsError, IndexError, RuntimeError) as err:
                if getattr(spec, "after", None) is None:
                    return _unexpected(ex, err)
                mapping = spec.after
                expected = torch.tensor(slots, dtype=torch.int32).repeat_interleave(spr)
                expected = torch.cat([expected, torch.full((len(mapping) - len(expected),), -1, dtype=torch.int32)])
                found = _diagnose_mapping(ex, name, step_text, mapping, expected, n, rows, slots, spr, fresh,
                                          pad_words)
                return found if found is not None else _unexpected(ex, err)
            except Exception as err:  # noqa: BLE001 - a checker reports, it never raises
                return _unexpected(ex, err)
            mapping, before = spec.after, spec.before
            expected = torch.tensor(slots, dtype=torch.int32).repeat_interleave(spr)
            expected = torch.cat([expected, torch.full((len(mapping) - len(expected),), -1, dtype=torch.int32)])
            if torch.equal(mapping, before) and not torch.equal(before, expected):
                extra = (" Your function returned a tensor; the kit ignores return values." if
                         isinstance(spec.returned, torch.Tensor) else "")
                return _not_yet(ex, f"{step_text} the buffer did not change at all.{extra} The graph reads "
                                    "the persistent buffer it was captured with, so write into it in place "
                                    "(`buf[:n] = ...`, `.fill_()`, `.copy_()`); assigning a new tensor to the "
                                    "argument's name changes nothing outside your function.")
            found = _diagnose_mapping(ex, name, step_text, mapping, expected, n, rows, slots, spr, fresh, pad_words)
            if found is not None:
                return found
            rec = spec.last_record
            collisions = rec.collisions()
            if collisions:
                slot, step, w, live = collisions[0]
                return _not_yet(ex, f"{step_text} the write trace shows row {w} storing draft_logits[{slot}, "
                                    f"{step}], the q of live row {live}.")
            bad = _q_matches_own_rows(rec)
            if bad:
                row, slot, step = bad[0]
                return _not_yet(ex, f"{step_text} the q of live row {row} (draft_logits[{slot}, {step}]) is "
                                    "not the distribution its draft token was sampled from.")
    return None


@_never_raises
def check_fill(copy_idx_mapping) -> CheckResult:
    """(a) `copy_idx_mapping(idx_mapping, slots)` writes this step's row -> slot mapping in place.

    idx_mapping: the persistent int32 buffer [max_num_reqs]; slots: int32 [num_reqs], the slot of
    each live row. Rows past num_reqs must say "no request" (-1).
    """
    ex, name = "a", "copy_idx_mapping"
    fn, verdict = _resolve(ex, copy_idx_mapping, name)
    if verdict is not None:
        return verdict
    failed = _run_host_exercise(ex, name, fn, _fill_speculator, 1, "idx_mapping[num_reqs:]")
    if failed is not None:
        return failed
    failed = _audit(ex, name, fn, _fill_speculator, "idx_mapping[num_reqs:]")
    if failed is not None:
        return failed
    return _solved(ex, f"Over {len(TIMELINE)} steps of the timeline and a fresh engine, every padded row "
                       "held -1, no padded row stored into a live request's q, and every live row's q "
                       f"is the distribution its draft was sampled from.{_audit_note()} (Remember the other "
                       "half: the kernel must skip slot -1, which is exercise (b).)")


# Batches (live slots in row order) that the padding-invariance audit runs, when labkit.proofs.audit exists.
AUDIT_BATCHES = ((0, 1, 2, 4, 5, 6, 7), (3, 4, 5, 6, 7), (2, 0, 7))


def _audit_note() -> str:
    try:
        from labkit.proofs.audit import audit_speculator  # noqa: F401
    except ImportError:
        return ""
    return (f" The padding-invariance audit agreed on {len(AUDIT_BATCHES)} batches: with everything the "
            "batch does not own poisoned, the padded step's live outputs equal the unpadded step's.")


def _audit(ex: str, name: str, fn: Callable, make_spec, pad_words: str) -> CheckResult | None:
    """Run labkit.proofs.audit's padding-invariance audit on the speculator that uses the learner's code.

    The audit poisons everything the batch does not own (padded rows get stale, valid slots), runs
    the step unpadded and padded, and names the row that wrote any live record that differs.
    Skipped (None) when the kit has no audit module.
    """
    try:
        from labkit.proofs.audit import audit_speculator
    except ImportError:
        return None
    def warmed_up():
        spec = make_spec(fn)
        # NOTE: on a GPU, GraphRunner warms a step up once before capturing it, and a draft step
        # shifts its own input buffers; capturing every size now keeps that extra run out of the
        # audit's unpadded-vs-padded comparison. (Emulated graphs capture nothing.)
        spec.runner.capture_all(spec._propose_rows)
        return spec

    for batch in AUDIT_BATCHES:
        try:
            report = audit_speculator(warmed_up, batch)
        except _LearnerRaised as err:
            return _not_yet(ex, f"in the padding-invariance audit (batch {_fmt(batch)}): "
                                + _explain_exception(err.original, fn, name))
        except Exception as err:  # noqa: BLE001 - reported in words, never raised
            return _unexpected(ex, err)
        if not report.passed:
            found = "; ".join(report.sentences()[:2])
            return _not_yet(ex, f"the padding-invariance audit (labkit.proofs.audit) poisoned the rows and slots that "
                                f"live slots {_fmt(batch)} do not own, then ran the step unpadded and padded: "
                                f"{found}. Padded rows must not point at any slot: fill {pad_words} with -1.")
    return None


# ------------------------------------------------------------------------------------------------
# (c) DFlash's sample mapping


def _dflash_speculator(learner: Callable):
    from labkit.speculator import DFlashSpeculator, FixSwitches

    class LearnerDFlash(DFlashSpeculator):
        """The kit's DFlash drafter; the learner builds sample_idx_mapping (positions stay the kit's)."""

        def _prepare_sample_rows(self, num_reqs):
            before = self.sample_idx_mapping.clone()
            super()._prepare_sample_rows(num_reqs)
            self.sample_idx_mapping.copy_(before)
            self.before = before.cpu()
            try:
                self.returned = learner(self.idx_mapping, num_reqs, self.num_steps, self.sample_idx_mapping)
            except Exception as err:  # noqa: BLE001
                raise _LearnerRaised(err) from err
            self.after = self.sample_idx_mapping.cpu().clone()
            _refuse_unsafe(self.after)

    # The buffer starts as -1 (vLLM's later hardening), so only the learner's pad decides.
    return LearnerDFlash(_models().draft, max_num_reqs=M, num_steps=K, capture_sizes=CAPTURE_SIZES,
                         fix=FixSwitches(fill_padding=True, mask_kernel=True, dflash_pad=-1), record=True)


@_never_raises
def check_dflash(build_sample_mapping) -> CheckResult:
    """(c) `build_sample_mapping(idx_mapping, num_reqs, k, sample_idx_mapping)` fills the sample mapping.

    sample_idx_mapping is the persistent int32 buffer [max_num_reqs * k]: sample row r < num_reqs*k
    is draft step r % k of live row r // k, so it maps to idx_mapping[r // k]; the rest is padding.
    """
    ex, name = "c", "build_sample_mapping"
    fn, verdict = _resolve(ex, build_sample_mapping, name)
    if verdict is not None:
        return verdict
    pad_words = "sample_idx_mapping[num_reqs * k:]"
    failed = _run_host_exercise(ex, name, fn, _dflash_speculator, K, pad_words)
    if failed is None:
        failed = _audit(ex, name, fn, _dflash_speculator, pad_words)
    if failed is not None:
        return failed
    return _solved(ex, "Every padded sample row held -1, so the masked kernel skipped it and no request's "
                       "q was overwritten; slot 0's q, which the old pad of 0 clobbered, stayed its own."
                       + _audit_note())


# ------------------------------------------------------------------------------------------------
# (b) the kernel masks

_V = 31  # the toy vocabulary: one block of 32 with one lane past the vocabulary
_GUARD = 2  # guard elements (rows for q) before and after each slot-indexed buffer
_Q_UNTOUCHED = 7.0
_GUARD_Q = -12345.0
_GUARD_TEMP = 1e30  # a padded row that reads it samples pure noise instead of the argmax

# (mapping, number of live rows) for each launch; slot 0 is live so `slot > 0` shows up.
_KERNEL_CASES = (([0, 1, 2, 4, 5, 6, 7, -1], 7), ([6, 0, -1, -1], 2), ([3, 7, 1, 0], 4))


def _kernel_device():
    if _backends.KERNELS_INTERPRETED:
        return torch.device("cpu")
    return torch.device("cuda")


def _with_guards(values: torch.Tensor, guard_value) -> tuple[torch.Tensor, torch.Tensor]:
    """A storage with guard entries around `values`, and the view of the middle that the kernel gets."""
    shape = (values.shape[0] + 2 * _GUARD,) + tuple(values.shape[1:])
    storage = torch.full(shape, guard_value, dtype=values.dtype, device=values.device)
    storage[_GUARD: _GUARD + values.shape[0]] = values
    return storage, storage[_GUARD: _GUARD + values.shape[0]]


def _kernel_case(index: int, mapping: list[int], device):
    g = torch.Generator().manual_seed(50 + index)
    rows = len(mapping)
    logits = (3 * torch.randn(rows, _V, generator=g)).to(device)
    temperature = torch.linspace(0.6, 1.0, M)
    temperature[5] = 0.0  # one greedy request: its q is the unscaled logits, its token the argmax
    seeds = torch.randint(0, 2**62, (M,), generator=g)
    positions = torch.randint(0, 5000, (rows,), generator=g)
    return (logits, torch.tensor(mapping, dtype=torch.int32, device=device), temperature.to(device),
            seeds.to(device), positions.to(device))


def _guard_seed(logits, mapping, positions) -> int:
    """A seed for the guard memory that makes 'read temperature[-1]' visible in every padded row's token."""
    padded = (mapping < 0).nonzero().flatten().tolist()
    greedy = logits.argmax(dim=1)
    for seed in range(1, 200):
        unmasked = _tokens_reading_guards(logits, mapping, positions, seed)
        if all(int(unmasked[r]) != int(greedy[r]) for r in padded):
            return seed
    return 1  # pragma: no cover - 200 tries always find one for these fixed cases


def _tokens_reading_guards(logits, mapping, positions, guard_seed):
    """What padded rows sample if they read temperature[-1] = _GUARD_TEMP and seeds[-1] = guard_seed."""
    device = logits.device
    temps = torch.full((M + 1,), _GUARD_TEMP, device=device)
    seeds = torch.full((M + 1,), guard_seed, dtype=torch.int64, device=device)
    fake = torch.where(mapping < 0, torch.full_like(mapping, M), mapping)
    return gumbel_sample_torch(logits, fake, temps, seeds, positions, masked=True)


def _launch_learner_kernel(kernel, logits, mapping, temperature, seeds, positions, guard_seed):
    device = logits.device
    temp_store, temp_view = _with_guards(temperature, _GUARD_TEMP)
    seed_store, seed_view = _with_guards(seeds, guard_seed)
    q0 = torch.full((M, _V), _Q_UNTOUCHED, dtype=torch.float32, device=device)
    q_store, q_view = _with_guards(q0, _GUARD_Q)
    tokens = torch.full((logits.shape[0],), -7, dtype=torch.int64, device=device)
    kernel[(logits.shape[0],)](logits, mapping, temp_view, seed_view, positions, q_view, tokens,
                               _V, SALT_DRAFT, BLOCK_V=triton.next_power_of_2(_V))
    return tokens, q_store


def _unmasked_slot_accesses(kernel) -> list[tuple[int, str, str]]:
    """(line in the function, 'load'/'store', pointer) for tl.load/tl.store through the slot without a mask."""
    py = _python_function(kernel)
    if py is None:
        return []
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    except (OSError, TypeError, SyntaxError):
        return []

    def is_tl_call(node, attr):
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == attr and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl")

    slot_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and is_tl_call(node.value, "load") and node.value.args:
            names = {n.id for n in ast.walk(node.value.args[0]) if isinstance(n, ast.Name)}
            if any("mapping" in n for n in names):
                slot_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        for attr, min_args in (("load", 2), ("store", 3)):
            if is_tl_call(node, attr) and node.args:
                names = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
                masked = len(node.args) >= min_args or any(kw.arg == "mask" for kw in node.keywords)
                if names & slot_names and not masked:
                    found.append((node.lineno, attr, ast.unparse(node.args[0])))
    return sorted(found)


@_never_raises
def check_kernel(gumbel_kernel) -> CheckResult:
    """(b) a @triton.jit sampling kernel with the signature of the exercise, masked on `slot >= 0`.

    gumbel_kernel(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                  vocab_size, salt, BLOCK_V: tl.constexpr); one program per row, one vocab block.
    """
    ex, name = "b", "gumbel_kernel"
    fn, verdict = _resolve(ex, gumbel_kernel, name)
    if verdict is not None:
        return verdict
    if not _backends.HAS_TRITON:
        return _not_yet(ex, "Triton is not installed on this machine (macOS and Windows have no Triton "
                            "wheels), so a kernel cannot run here. Read the solution, or do this exercise "
                            "on a Linux machine, where Triton's CPU interpreter runs it.")
    if not (_backends.KERNELS_INTERPRETED or _backends.HAS_CUDA):
        return _not_yet(ex, "labkit was imported with Triton neither interpreted nor on a GPU (was "
                            "LABKIT_BACKEND=torch set?). Restart the kernel with LABKIT_BACKEND=interpreter "
                            "(or unset) so that kernels run in Triton's CPU interpreter.")
    if not hasattr(fn, "__getitem__"):
        return _not_yet(ex, f"`{name}` is a plain Python function: put `@triton.jit` above its `def`.")
    device = _kernel_device()
    for index, (mapping_list, live) in enumerate(_KERNEL_CASES):
        logits, mapping, temperature, seeds, positions = _kernel_case(index, mapping_list, device)
        guard_seed = _guard_seed(logits, mapping, positions)
        launch = f"Launch {index + 1} (idx_mapping {_fmt(mapping_list)}):"
        try:
            tokens, q_store = _launch_learner_kernel(fn, logits, mapping, temperature, seeds, positions, guard_seed)
        except Exception as err:  # noqa: BLE001
            return _not_yet(ex, f"{launch} " + _explain_exception(err, fn, name))
        q_ref = torch.full((M, 1, _V), _Q_UNTOUCHED, dtype=torch.float32, device=device)
        t_ref = gumbel_sample_torch(logits, mapping, temperature, seeds, positions, q_ref, 0, masked=True)
        q = q_store[_GUARD: _GUARD + M]
        live_slots = {int(s): r for r, s in enumerate(mapping_list) if s >= 0}
        padded_rows = [r for r, s in enumerate(mapping_list) if s < 0]
        before, after = q_store[:_GUARD], q_store[_GUARD + M:]
        if not torch.all(before == _GUARD_Q):
            rows = _join(padded_rows) if padded_rows else "a row"
            return _not_yet(ex, f"{launch} something stored into draft_logits[-1], the memory just before "
                                f"the buffer (on a GPU: another tensor). Padded row {rows} holds slot -1: "
                                "mask the store on both in_vocab and slot >= 0, e.g. "
                                "`mask=in_vocab & ((offs * 0 + slot) >= 0)`, so that it stores nothing.")
        if not torch.all(after == _GUARD_Q):
            return _not_yet(ex, f"{launch} something stored past the end of draft_logits (slot {M}'s "
                                "row). Keep `in_vocab` in the store mask: the block has "
                                f"{triton.next_power_of_2(_V)} lanes and the vocabulary {_V}.")
        for slot in range(M):
            stored = not torch.all(q[slot] == _Q_UNTOUCHED)
            if slot in live_slots and not stored:
                row = live_slots[slot]
                zero = (" Slot 0 is a real request: the test is `slot >= 0`, not `slot > 0`." if slot == 0
                        else "")
                return _not_yet(ex, f"{launch} live row {row} holds slot {slot}, but nothing was stored into "
                                    f"draft_logits[{slot}]: the rejection sampler would verify its draft "
                                    f"against a q that was never written.{zero}")
            if slot not in live_slots and stored:
                return _not_yet(ex, f"{launch} no row holds slot {slot}, yet draft_logits[{slot}] changed. "
                                    "A store spilled past its own row: keep `in_vocab` in the store mask "
                                    f"(the block has {triton.next_power_of_2(_V)} lanes, the vocabulary {_V}).")
        for slot, row in live_slots.items():
            if not torch.allclose(q[slot], q_ref[slot, 0], rtol=1e-5, atol=1e-6):
                return _not_yet(ex, f"{launch} row {row}'s q (draft_logits[{slot}]) is not its logits divided "
                                    "by its temperature (or the raw logits when the temperature is 0). Keep the "
                                    "scaling of the skeleton; only the masks change.")
        for row in range(len(mapping_list)):
            if row in padded_rows:
                continue
            if int(tokens[row]) != int(t_ref[row]):
                return _not_yet(ex, f"{launch} live row {row} sampled token {int(tokens[row])}, the "
                                    f"reference {int(t_ref[row])}. Keep the sampling math of the skeleton "
                                    "(scaled logits plus Gumbel noise from row_key/uniform, then argmax).")
        reading = _tokens_reading_guards(logits, mapping, positions, guard_seed)
        for row in padded_rows:
            if int(tokens[row]) == int(t_ref[row]):
                continue
            if int(tokens[row]) == int(reading[row]):
                return _not_yet(ex, f"{launch} padded row {row} (slot -1) loaded temperature[-1] and "
                                    "seeds[-1], the memory before each buffer (its token came out as the "
                                    "noise those guard values give). Masking the store is not enough: load "
                                    "with `mask=slot >= 0, other=0`, so a padded row gets temperature 0 and "
                                    "becomes a cheap, noiseless argmax whose result is thrown away.")
            return _not_yet(ex, f"{launch} padded row {row} (slot -1) sampled token {int(tokens[row])}; with "
                                f"its loads masked (`other=0`, so temperature 0) it is the plain argmax "
                                f"{int(t_ref[row])}. Load temperature and seed with `mask=slot >= 0, other=0`.")
    unmasked = _unmasked_slot_accesses(fn)
    if unmasked:
        line, what, ptr = unmasked[0]
        return _not_yet(ex, f"the {what} `tl.{what}({ptr})` at line {line} of `{name}` goes through the slot "
                            "without a mask. For a padded row that is an access at index -1, outside the "
                            "buffer. (A masked temperature of 0 skips the noise, so an unmasked seed load "
                            "changes no result today; mask it anyway, as vLLM does: `mask=slot >= 0, other=0`.)")
    return _solved(ex, f"Over {len(_KERNEL_CASES)} launches your kernel matched the torch reference on every live "
                       "row, stored nothing for slot -1, and read nothing before the buffers. The mask alone "
                       "does not help a stale slot (it is >= 0): it needs the fill of exercise (a).")


# ------------------------------------------------------------------------------------------------
# (d) the int64 offset

# vLLM-sized draft_logits: k = 4 draft steps of a 151936-token vocabulary (Qwen).
_BIG_V, _BIG_K = 151936, 4
_BIG_SLOTS = (0, 1, 3533, 3534, 4095, 7066, 7067, 9000)

if _backends.HAS_TRITON:

    @triton.jit
    def _offset_harness(mapping_ptr, out_ptr, stride_slot, stride_step, step, OFFSET: tl.constexpr):
        row = tl.program_id(0)
        slot = tl.load(mapping_ptr + row)
        tl.store(out_ptr + row, OFFSET(slot, step, stride_slot, stride_step).to(tl.int64))

    @triton.jit
    def _store_harness(q_ptr, mapping_ptr, stride_slot, stride_step, step, vocab_size,
                       OFFSET: tl.constexpr, BLOCK_V: tl.constexpr):
        row = tl.program_id(0)
        slot = tl.load(mapping_ptr + row)
        offs = tl.arange(0, BLOCK_V)
        value = (row * 1000 + offs).to(tl.float32)
        tl.store(q_ptr + OFFSET(slot, step, stride_slot, stride_step) + offs, value, mask=offs < vocab_size)


@_never_raises
def check_offset(q_offset) -> CheckResult:
    """(d) `q_offset(slot, step, stride_slot, stride_step)`, a @triton.jit helper: the element offset
    of draft_logits[slot, step, 0]. Must not overflow for vLLM-sized buffers."""
    ex, name = "d", "q_offset"
    fn, verdict = _resolve(ex, q_offset, name)
    if verdict is not None:
        return verdict
    if not _backends.HAS_TRITON or not (_backends.KERNELS_INTERPRETED or _backends.HAS_CUDA):
        return _not_yet(ex, "this exercise runs a Triton helper, which needs Triton (its CPU interpreter is "
                            "enough); it is not available in this session. Read the solution instead.")
    if not hasattr(fn, "__getitem__") and _python_function(fn) is fn:
        return _not_yet(ex, f"`{name}` is a plain Python function: put `@triton.jit` above its `def`.")
    device = _kernel_device()
    # Small buffer first: does the offset address the right row at all?
    k, v = 3, 5
    mapping = torch.tensor([2, 0, 3], dtype=torch.int32, device=device)
    q = torch.full((4, k, v), -1.0, device=device)
    try:
        _store_harness[(3,)](q, mapping, q.stride(0), q.stride(1), 1, v, OFFSET=fn, BLOCK_V=8)
    except Exception as err:  # noqa: BLE001
        return _not_yet(ex, "storing through your offset into a small draft_logits [4, 3, 5]: "
                            + _explain_exception(err, fn, name))
    for row, slot in enumerate(mapping.tolist()):
        expect = torch.arange(v, dtype=torch.float32, device=device) + row * 1000
        if not torch.equal(q[slot, 1], expect):
            return _not_yet(ex, f"with a small draft_logits [4, 3, 5] (strides {q.stride(0)}, {q.stride(1)}), row "
                                f"{row} (slot {slot}) should have stored into draft_logits[{slot}, 1], but it did "
                                "not. The offset of [slot, step, 0] is slot * stride_slot + step * stride_step.")
    slots = torch.tensor(_BIG_SLOTS, dtype=torch.int32, device=device)
    out = torch.zeros(len(_BIG_SLOTS), dtype=torch.int64, device=device)
    stride_slot, stride_step, step = _BIG_K * _BIG_V, _BIG_V, 3
    try:
        _offset_harness[(len(_BIG_SLOTS),)](slots, out, stride_slot, stride_step, step, OFFSET=fn)
    except Exception as err:  # noqa: BLE001
        return _not_yet(ex, _explain_exception(err, fn, name))
    results = [(slot, slot * stride_slot + step * stride_step, got) for slot, got in zip(_BIG_SLOTS, out.tolist())]
    wrong = [(slot, want, got) for slot, want, got in results if want != got]
    if wrong:
        slot, want, got = wrong[0]
        unsigned = (all(got == want % 2**32 for _, want, got in wrong)
                    and any(2**31 <= want < 2**32 and want == got for _, want, got in results))
        how = ""
        if unsigned:
            how = (" It wrapped at 2^32: an unsigned 32-bit cast only doubles the range (offsets between 2^31 "
                   "and 2^32 came out right, larger ones did not), and it turns the padding marker -1 into "
                   "4294967295. Use tl.int64.")
        elif got == ((want + 2**31) % 2**32) - 2**31:
            how = (" It wrapped around at 2^31: the multiply ran in int32. Casting the result afterwards is "
                   "too late; cast `slot` to tl.int64 *before* multiplying.")
        gib = want * 4 / 2**30
        return _not_yet(ex, f"for slot {slot} in a draft_logits of [max_num_reqs, {_BIG_K}, {_BIG_V}] "
                            f"(stride_slot = {stride_slot:,}), the offset of [{slot}, {step}, 0] is {want:,} "
                            f"(float32: {gib:.1f} GiB into the buffer), but yours came out as {got:,}.{how} "
                            "vLLM #46560 was this bug in its sampler kernels.")
    first_big = next(slot for slot, want, _ in results if want >= 2**31)
    return _solved(ex, f"Your offsets are exact up to slot {max(_BIG_SLOTS)} with vLLM-sized strides "
                       f"(the offset of [slot, {step}, 0] passes 2^31 at slot {first_big}), and stores land in the right rows.")


# ------------------------------------------------------------------------------------------------
# Hints

HINTS = {
    "a": [
        "Which rows does the padded graph process, and what do rows num_reqs and above hold when nobody "
        "writes them?",
        "Slot numbers are 0 .. max_num_reqs - 1, so every non-negative value is somebody's slot. The buffer "
        "is signed on purpose.",
        "Two lines: `idx_mapping[:num_reqs] = slots` and `idx_mapping[num_reqs:] = -1` (in place).",
    ],
    "b": [
        "Find every tl.load and tl.store whose address uses `slot`. Which of them run for a padded row?",
        "Compute `is_valid = slot >= 0` once. Loads take `mask=is_valid, other=0`; the store's mask combines "
        "it with `in_vocab`.",
        "For the store, broadcast the scalar before combining: `in_vocab & ((offs * 0 + slot) >= 0)`, which "
        "every Triton version accepts.",
    ],
    "c": [
        "0 looks like a harmless index. Harmless for whom? The sampling kernel stores q *by slot*.",
        "The masked kernel skips exactly the rows whose slot is negative.",
        "`sample_idx_mapping[num_reqs * k:] = -1`.",
    ],
    "d": [
        "slot is int32 (loaded from the int32 mapping) and so is stride_slot: what is the type of the product?",
        "slot * stride_slot passes 2**31 - 1 once slot > 2**31 // stride_slot: 3533 for k = 4 and V = 151936.",
        "Widen before multiplying: `slot.to(tl.int64) * stride_slot + step * stride_step`.",
    ],
}


@dataclass
class _Hint:
    text: str

    def __repr__(self) -> str:
        return self.text


def hint(exercise: str, n: int = 1) -> _Hint:
    """Hint number `n` (1, 2, 3: each gives more away) for exercise 'a', 'b', 'c' or 'd'."""
    key = str(exercise).strip().strip("()").lower()
    if key not in HINTS:
        return _Hint(f"There is no exercise {exercise!r}; choose one of {', '.join(sorted(HINTS))}.")
    hints = HINTS[key]
    if not 1 <= n <= len(hints):
        return _Hint(f"Exercise ({key}) has hints 1 to {len(hints)}.")
    return _Hint(f"Hint {n}/{len(hints)} for ({key}): {hints[n - 1]}")
