"""How to call a vLLM release's ``gumbel_sample`` in the audit: each of its parameters by what it is.

vLLM's host function ``gumbel_sample`` (in ``vllm/v1/worker/gpu/sample/gumbel.py``) launches the
Gumbel sampling kernel and returns one token per row. Across releases its parameters have been
renamed and added to, but each plays one of a few parts, named in :data:`ROLES`:

    rows      the logits [rows, V], the row -> slot mapping (``idx_mapping``, later
              ``expanded_idx_mapping``), temperature and seeds by slot, positions by row
    q         the slot-indexed output, the draft distribution the rejection sampler reads:
              ``processed_logits_out`` [slots, V] (0.18.0-0.20.x, one per launch),
              ``output_processed_logits`` with its column (0.21.0-0.27.x), ``logits_cache`` with its
              column (0.28.0 on: the logits before temperature)
    settings  what the drafter passes: ``apply_temperature``, ``is_drafting`` (0.29.0 on), and
              optional inputs left at None or their default (``use_fp64``, ``logits_cache_source``,
              ``logits_cache_row_mapping``, ``bias``)

:func:`plan` reads the signature: a function with no slot-indexed output stores nothing by slot
(0.12.0-0.17.x: the bug cannot occur, :class:`NoSlotStore`); a required parameter of no known part
is a signature the kit cannot call yet (:class:`UnknownKernelApi`, with the signature).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from labkit.errors import LabkitInputError

MAPPING = ("expanded_idx_mapping", "idx_mapping")
# The slot-indexed output, by name: (what the kernel stores there, the name of its column parameter or None
# where each launch gets one column of q as a 2-D view).
Q_OUTPUTS = {
    "processed_logits_out": ("the draft logits after temperature", None),
    "output_processed_logits": ("the draft logits after temperature", "output_processed_logits_col"),
    "logits_cache": ("the draft logits before temperature (a logits cache)", "logits_cache_col"),
}
SETTINGS = {"apply_temperature": True, "is_drafting": True}
LEFT_AT_DEFAULT = ("use_fp64", "logits_cache_source", "logits_cache_row_mapping", "bias")
ROLES = ("logits", *MAPPING, "temperature", "seed", "pos", *Q_OUTPUTS,
         *(col for _, col in Q_OUTPUTS.values() if col), *SETTINGS, *LEFT_AT_DEFAULT)


class UnknownKernelApi(LabkitInputError):
    """The file's gumbel_sample has a parameter the kit does not know how to fill."""


class NoSlotStore(LabkitInputError):
    """The file's gumbel_sample takes no slot-indexed output: it stores nothing by slot."""


@dataclass(frozen=True)
class KernelPlan:
    """How to call one release's gumbel_sample."""

    signature: str
    mapping: str  # the name of its row -> slot parameter
    q_param: str
    col_param: str | None
    settings: tuple[tuple[str, bool], ...]

    @property
    def name(self) -> str:
        return f"{self.q_param} API"

    @property
    def q_is(self) -> str:
        return Q_OUTPUTS[self.q_param][0]


def signature_text(fn) -> str:
    try:
        return f"gumbel_sample{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return "gumbel_sample(?)"


def _passed_through(module, fn):
    """The function a ``def gumbel_sample(*args, **kwargs): return other(*args, **kwargs)`` wrapper hands
    everything to (a function of the same module), or None where `fn` is not exactly that form."""
    import ast
    import textwrap

    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    a = node.args
    if not (a.vararg and a.kwarg and not a.args and not a.posonlyargs and not a.kwonlyargs and len(body) == 1
            and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call)):
        return None
    call = body[0].value
    passes = (len(call.args) == 1 and isinstance(call.args[0], ast.Starred)
              and isinstance(call.args[0].value, ast.Name) and call.args[0].value.id == a.vararg.arg
              and len(call.keywords) == 1 and call.keywords[0].arg is None
              and isinstance(call.keywords[0].value, ast.Name) and call.keywords[0].value.id == a.kwarg.arg)
    if not (passes and isinstance(call.func, ast.Name)):
        return None
    target = getattr(module, call.func.id, None)
    return target if callable(target) else None


def plan(module) -> KernelPlan:
    """How to call the module's ``gumbel_sample``, or why the kit cannot (see the module's docstring).

    A wrapper is followed where its target is known: ``functools.wraps`` (its ``__wrapped__``) or a
    function whose whole body passes ``*args, **kwargs`` on to another function of the file. A
    signature that still hides its parameters behind ``*args``/``**kwargs`` is not read as "stores
    nothing by slot": the kit cannot tell, and says so."""
    fn = getattr(module, "gumbel_sample", None)
    where = getattr(module, "__file__", "the kernel file")
    if fn is None:
        raise UnknownKernelApi(f"{where} defines no gumbel_sample")
    seen = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        target = _passed_through(module, fn)
        if target is None:
            break
        fn = target
    params = inspect.signature(fn).parameters
    text = signature_text(fn)
    hidden = [n for n, p in params.items() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    required_unknown = [n for n, p in params.items() if n not in ROLES and p.default is inspect.Parameter.empty
                        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required_unknown:
        raise UnknownKernelApi(f"could not audit: {text}: the kit does not know what to pass as "
                               f"{', '.join(required_unknown)}")
    q_params = [n for n in Q_OUTPUTS if n in params]
    if not q_params and hidden:
        raise UnknownKernelApi(f"could not audit: {text}: its parameters are hidden behind "
                               f"{', '.join('*' * (1 + (params[n].kind == params[n].VAR_KEYWORD)) + n for n in hidden)}"
                               ", and the kit cannot tell what it passes on to")
    unknown = [n for n in params if n not in ROLES]
    if not q_params and unknown:
        # "stores nothing by slot" is read from a signature whose every parameter the kit knows (0.12.0-0.17.x);
        # a parameter of no known part may be the slot-indexed output under another name
        raise UnknownKernelApi(f"could not audit: {text}: no slot-indexed output the kit knows, and "
                               f"{', '.join(unknown)} of no part the kit knows (it may be one)")
    if not q_params:
        raise NoSlotStore(f"its gumbel_sample({', '.join(params)}) takes no slot-indexed output")
    q_param = q_params[0]
    col = Q_OUTPUTS[q_param][1]
    if col is not None and col not in params:
        raise UnknownKernelApi(f"could not audit: {text}: {q_param} without its column {col}")
    mapping = next((m for m in MAPPING if m in params), None)
    if mapping is None:
        raise UnknownKernelApi(f"could not audit: {text}: no row -> slot mapping ({' or '.join(MAPPING)})")
    return KernelPlan(text, mapping, q_param, col, tuple((k, v) for k, v in SETTINGS.items() if k in params))


def sample(module, api: KernelPlan, *, logits, mapping, temperature, seeds, positions, q, col: int):
    """One launch of the release's gumbel_sample as its drafter calls it: temperature applied, draft step
    `col`'s q stored at q[slot, col, :]."""
    kwargs = dict(api.settings)
    if api.col_param is None:
        kwargs[api.q_param] = q[:, col]  # a 2-D view whose rows are slots: its stride(0) steps over the columns
    else:
        kwargs[api.q_param] = q
        kwargs[api.col_param] = torch.tensor(col, dtype=torch.int64, device=logits.device)
    return module.gumbel_sample(logits=logits, **{api.mapping: mapping}, temperature=temperature, seed=seeds,
                                pos=positions, **kwargs)
