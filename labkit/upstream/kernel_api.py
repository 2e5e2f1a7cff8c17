"""The signatures of vLLM's ``gumbel_sample`` the kit knows, and how to call each in the audit.

vLLM's host function ``gumbel_sample`` (in ``vllm/v1/worker/gpu/sample/gumbel.py``) launches the
Gumbel sampling kernel and returns one token per row. Its first parameters have kept their names
across releases; the slot-indexed output (q, the record the rejection sampler reads) has not:

    processed_logits   output_processed_logits [max_num_reqs, k, V] and output_processed_logits_col:
                       the logits after temperature (vLLM 0.24.0; the API at PR #47066's time)
    logits_cache       logits_cache [max_num_reqs, num_cols, V], logits_cache_col, is_drafting:
                       the logits before temperature (vLLM 0.33.0; after vLLM #54282)

:func:`identify` matches a loaded file against these by parameter names, so a release in between
that kept one of them works too; a file that has neither says which the kit expects.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from labkit.errors import LabkitInputError
from labkit.upstream.releases import FIXED, UNMASKED

ROW_PARAMS = ("logits", "expanded_idx_mapping", "temperature", "seed", "pos", "apply_temperature")


@dataclass(frozen=True)
class KernelApi:
    name: str
    q_param: str  # the slot-indexed output [max_num_reqs, columns, V]
    col_param: str  # which column (draft step) a launch stores into
    q_is: str  # what the kernel stores there
    seen_in: str  # a release that has it
    fixed_args: dict = field(default_factory=dict)  # further arguments the drafter passes

    def signature_text(self) -> str:
        extra = "".join(f", {k}" for k in self.fixed_args)
        return f"gumbel_sample({', '.join(ROW_PARAMS)}{extra}, {self.q_param}, {self.col_param}, ...)"


KNOWN_APIS = (
    KernelApi("processed_logits", "output_processed_logits", "output_processed_logits_col",
              "the draft logits after temperature", UNMASKED),
    KernelApi("logits_cache", "logits_cache", "logits_cache_col",
              "the draft logits before temperature (a logits cache)", FIXED, {"is_drafting": True}),
)


class UnknownKernelApi(LabkitInputError):
    """The kernel file's gumbel_sample is not one the kit knows how to call."""


def expected_apis() -> str:
    return "; ".join(f"{api.signature_text()} as in vLLM {api.seen_in}" for api in KNOWN_APIS)


def identify(module) -> KernelApi:
    """The known API the module's ``gumbel_sample`` has, or UnknownKernelApi saying which the kit expects."""
    fn = getattr(module, "gumbel_sample", None)
    where = getattr(module, "__file__", "the kernel file")
    if fn is None:
        raise UnknownKernelApi(f"{where} defines no gumbel_sample; the kit knows {expected_apis()}")
    params = inspect.signature(fn).parameters
    for api in KNOWN_APIS:
        known = set(ROW_PARAMS) | {api.q_param, api.col_param} | set(api.fixed_args)
        required_unknown = [n for n, p in params.items() if n not in known and p.default is inspect.Parameter.empty
                            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if known - {"use_fp64"} <= set(params) and not required_unknown:
            return api
    raise UnknownKernelApi(f"{where}: gumbel_sample{inspect.signature(fn)} is not an API the kit knows; it knows "
                           f"{expected_apis()}")


def sample(module, api: KernelApi, *, logits, mapping, temperature, seeds, positions, q, col):
    """One launch of vLLM's gumbel_sample as its drafter calls it: temperature applied, q stored at `col`."""
    kwargs = {"apply_temperature": True, api.q_param: q, api.col_param: col, **api.fixed_args}
    return module.gumbel_sample(logits, mapping, temperature, seeds, positions, **kwargs)
