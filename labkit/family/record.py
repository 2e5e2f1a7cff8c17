"""The cases of notebook 09, one record each: the only place that lists them.

A :class:`Case` holds what names one case: its number, title and module, where it was reported and
read (each fact with the file and the commit or release it was read at, or said to rest on a
thread when no tree was read), the fix as upstream made or proposed it, the id of its "predict,
then run" cell in the notebook, and the patterns that give its answer away before that cell. The
secrecy scan (:mod:`labkit.workshop.editions.secrecy`) reads the patterns along the learner's path,
as it reads each exercise's; :mod:`labkit.docgen.numbers` renders the sources into the notebook and
into docs/VLLM_MAP.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

NOTEBOOK = "09_the_family.ipynb"  # the case book, in notebooks/


@dataclass(frozen=True)
class Case:
    """One member of the family (see the module's docstring)."""

    number: int
    key: str  # the case's name in records and tests, e.g. "shared-pool"
    title: str = field(repr=False)  # notebook 09's heading, after "Case N · " (some name a fix: not in the repr)
    reported_in: str  # the engine and the issue or PR, e.g. "vLLM #53488"
    module: str  # the kit's module that reproduces it
    sources: tuple[str, ...] = field(repr=False)  # where the mechanism was read (shown before the prediction)
    fix: tuple[str, ...] = field(repr=False)  # the fix upstream, where it was read (shown after it)
    answer: tuple[str, ...] = field(repr=False)  # regexes: what shows the answer before the predict cell

    @property
    def predict_cell(self) -> str:
        return f"case-{self.number}-predict"

    @property
    def name(self) -> str:
        """How a report names it: "case 3"."""
        return f"case {self.number}"

    def patterns(self, in_task: bool = False) -> tuple[str, ...]:
        """What gives the answer away on the learner's path before the predict cell."""
        return self.answer

    def reproduction(self):
        """The module that reproduces the case (imported on first use)."""
        return importlib.import_module(self.module)


CASES: tuple[Case, ...] = (
    Case(
        number=1, key="stale-slot", title="A stale padded row stores by slot", reported_in="vLLM PR #47066",
        module="labkit.family.stale_slot",
        sources=(
            "vLLM PR #47066 (2026-06-30), Model Runner V2: `DraftModelSpeculator._copy_request_inputs` in "
            "`vllm/v1/worker/gpu/spec_decode/speculator.py` copies the live slots into `idx_mapping`, and "
            "`gumbel_block_argmax` in `vllm/v1/worker/gpu/sample/gumbel.py` stores each row's q by its slot; "
            "read in the 0.24.0 wheel (commit `ee0da84ab`), the last release before the fix.",
        ),
        fix=(
            "The host fills the padded rows of `idx_mapping` with -1 (0.33.0 `spec_decode/speculator.py`:547-551, "
            "commit `4ba787ec9`) and the kernel masks its loads and its store on `slot >= 0` (0.33.0 "
            "`sample/gumbel.py`); DFlash pads its per-sample mapping with -1 instead of 0.",
        ),
        answer=(r"\bslot 7\b[^.\n]{0,60}\b(free|no (live )?request|nobody|no one|unowned)\b",
                r"\b(last|end) (row|request)\b[^.\n]{0,80}\b(none|nothing|no live q|0 of|harmless)\b",
                r"\bonly (the )?(first|middle)\b[^.\n]{0,40}\b(batch|schedule|one)\b",
                r"\bfree slot\b[^.\n]{0,60}\bno (live )?request\b"),
    ),
    Case(
        number=2, key="hidden-state-cache", title="A -1 fill without a mask", reported_in="vLLM #43810",
        module="labkit.family.hidden_state_cache",
        sources=(
            "vLLM issue #43810 (2026-05-27, reported at commit `284e6f54`): the hidden-state extraction "
            "drafter (`ExtractHiddenStatesProposer`) pads its slot mapping to the graph's size with "
            "`PADDING_SLOT_ID = -1`, and `basic_cache` in `vllm/model_executor/models/extract_hidden_states.py` "
            "stores with torch indexing: at commit `2e3b4f40`, `token_kv_cache[slot_mapping] = to_cache` over "
            "the cache viewed as one row per slot; the issue quotes the form "
            "`kv_cache[slot_mapping // block_size, slot_mapping % block_size] = to_cache`.",
        ),
        fix=(
            "At commit `055e47c2` `basic_cache` first clamps the slot mapping to 0 and up, so that padding "
            "lands in block 0, a null block never given to a request. PR #43869 (open when read) proposed "
            "instead the `reshape_and_cache_flash` op, whose kernel returns early on a negative slot: the "
            "kit's own mask.",
        ),
        # Python's -1 is taught before (07(b), docs/MECHANICS.md): the answer is where it lands here, and whose.
        answer=(r"\bslot 79\b", r"\blast slot of the last block\b", r"\btoken row 63\b", r"\bcache\[-1\]",
                r"\bpadded rows?\b[^.\n]{0,60}\b(block 4|last block)\b"),
    ),
    Case(
        number=3, key="shared-pool", title="A later replay reuses an earlier graph's output memory",
        reported_in="vLLM #53488", module="labkit.family.shared_pool",
        sources=(
            "vLLM issue #53488 (August 2026; reproduced on vLLM 0.27.1 in its thread) and PR #53520 (opened "
            "2026-08-24, open when read), on the V1 GPU model runner, `vllm/v1/worker/gpu_model_runner.py`: "
            "as the PR's description gives it, the padded drafter runs before `_bookkeeping_sync()`, whose "
            "`_get_prompt_logprobs_dict()` computes the prompt logprobs from the target's `hidden_states`, the "
            "output of a CUDA graph, and every CUDA graph allocates from one shared memory pool. Read in the "
            "threads, not in a vLLM tree.",
        ),
        fix=(
            "SGLang PR #35546 (merged; its review of 2026-08-31) clones the selected hidden states before they "
            "leave the draft-extend graph's output buffer "
            "(`python/sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py`), so that a later "
            "replay cannot overwrite them. The change #53520 makes is not quoted here.",
        ),
        answer=(r"\b(at most|up to|no more than|<=|≤)\s*32 tokens?\b[^.\n]{0,80}\b(wrong|corrupt)",
                r"\bran (under|in|through|as) a graph\b[^.\n]{0,60}\b(wrong|corrupt)",
                r"\b(wrong|corrupt\w*)\b[^.\n]{0,60}\bran (under|in|through|as) a graph\b",
                r"\bclean for the eager\b", r"\beager (ones|prompts)\b[^.\n]{0,40}\b(clean|right|correct)\b",
                r"\b(long|longer) (prompts?|ones)\b[^.\n]{0,60}\b(clean|right|correct|unaffected)\b",
                r"\b(short|shorter) (prompts?|ones)\b[^.\n]{0,60}\b(wrong|corrupt)"),
    ),
    Case(
        number=4, key="static-buffer", title="A buffer refreshed at one end and read at the other",
        reported_in="SGLang #32555", module="labkit.family.static_buffer",
        sources=(
            "As reported in SGLang #32555 (July 2026): a replay refreshes a static buffer at its front "
            "(`[:bs]`) while the captured kernel reads its tail (`[-n:]`), and the output diverges only under "
            "graphs. The index of GitHub threads the kit's facts come from does not hold that thread, so the "
            "kit names no SGLang file for it: its miniature is the pattern as reported.",
        ),
        fix=(
            "SGLang PR #18647 (merged; described 2026-02-12) zero-pads the padding slots of the draft "
            "buffers (`topk_p`, `topk_index`, `hidden_states`, `req_pool_indices`) so that no stale value "
            "reaches a graph, as the PR's description says. Here the fix reads where the host writes.",
        ),
        answer=(r"\b(5|five) to (8|eight)\b[^.\n]{0,120}\b(right|correct|clean|match)", r"\(5, 6, 7, 8\)",
                r"\bare the whole buffer\b",
                r"\bgraph of (8|eight)\b[^.\n]{0,60}\b(right|correct|clean|unaffected|hides|match)",
                r"\blargest (graph|capture size)\b[^.\n]{0,60}\b(right|correct|clean|hides|match)",
                r"\btail is the whole buffer\b", r"\bonly\b[^.\n]{0,40}\bgraph of (8|eight)\b"),
    ),
)


def case(name) -> Case | None:
    """The case a reader names: 3, "3", "case 3" or its key "shared-pool" (None: no such case)."""
    key = str(name).strip().lower().removeprefix("case").strip()
    return next((c for c in CASES if key in (str(c.number), c.key)), None)
