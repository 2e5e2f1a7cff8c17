"""The cases of notebook 09, one record each: the only place that lists them.

A :class:`Case` holds what names one case: its number, title and module; the thread it is about
(:class:`Ref`: repository, issue or pull request, number); the fix that changed the code, as a
:class:`Ref` of the same repository (or none, when none had landed in what was read); every other
thread or commit its sentences cite; the sentences themselves, where it was reported and read (each
fact with the file and the commit or release it was read at, or the thread it was read in) and the
fix; the id of its "predict, then run" cell in the notebook, and the patterns that give its answer
away before that cell. ``tests/test_family.py`` holds the sentences to the references: a case
names no thread, commit or engine its references do not list, and no fix from another repository.
The secrecy scan (:mod:`labkit.workshop.editions.secrecy`) reads the patterns along the learner's
path, as it reads each exercise's; :mod:`labkit.docgen.family_blocks` renders the sentences into the
notebook and into docs/VLLM_MAP.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

NOTEBOOK = "09_the_family.ipynb"  # the case book, in notebooks/

# The engines the cases come from: repository -> the name the sentences use.
ENGINES = {"vllm-project/vllm": "vLLM", "sgl-project/sglang": "SGLang"}
KINDS = ("issue", "pull request", "commit")
NO_FIX = "no fix has landed"  # what a case's fix sentence says when its record holds no fix


@dataclass(frozen=True)
class Ref:
    """A thread or commit a case cites: where it is, what it is, and what was read there."""

    repository: str  # "owner/name", one of ENGINES
    kind: str  # one of KINDS
    ref: str  # the number of an issue or pull request, or a commit's hash (at least 7 digits)
    read: str  # what the kit read there, and in what state ("description of 2026-07-27; merged")
    date: str = ""  # when the thread was opened, as far as it was read ("2026-05-27", or "2026-08")

    def __post_init__(self):
        if self.repository not in ENGINES:
            raise ValueError(f"unknown repository {self.repository!r}: one of {sorted(ENGINES)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def engine(self) -> str:
        return ENGINES[self.repository]

    @property
    def label(self) -> str:
        """How a heading names it: "vLLM PR #47066", "vLLM #43810" (an issue), "SGLang commit `abc1234`"."""
        if self.kind == "commit":
            return f"{self.engine} commit `{self.ref}`"
        return f"{self.engine} {'PR ' if self.kind == 'pull request' else ''}#{self.ref}"


@dataclass(frozen=True)
class Case:
    """One member of the family (see the module's docstring)."""

    number: int
    key: str  # the case's name in records and tests, e.g. "shared-pool"
    title: str = field(repr=False)  # notebook 09's heading, after "Case N · " (some name a fix: not in the repr)
    module: str  # the kit's module that reproduces it
    report: Ref  # the issue or pull request the case is about
    fix_ref: Ref | None  # the pull request or commit that fixed it upstream; None: none had landed
    sources: tuple[str, ...] = field(repr=False)  # where the mechanism was read (shown before the prediction)
    fix: tuple[str, ...] = field(repr=False)  # the fix upstream, where it was read (shown after it)
    answer: tuple[str, ...] = field(repr=False)  # regexes: what shows the answer before the predict cell
    cited: tuple[Ref, ...] = field(default=(), repr=False)  # every other thread or commit the sentences cite

    @property
    def reported_in(self) -> str:
        """The engine and the thread, as the heading gives it: "vLLM PR #47066"."""
        return self.report.label

    @property
    def refs(self) -> tuple[Ref, ...]:
        """Every thread and commit the case's sentences may cite."""
        return (self.report,) + ((self.fix_ref,) if self.fix_ref else ()) + self.cited

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


VLLM, SGLANG = "vllm-project/vllm", "sgl-project/sglang"

CASES: tuple[Case, ...] = (
    Case(
        number=1, key="stale-slot", title="A stale padded row stores by slot", module="labkit.family.stale_slot",
        report=Ref(VLLM, "pull request", "47066", "description of 2026-06-30; merged", "2026-06-30"),
        fix_ref=Ref(VLLM, "pull request", "47066", "the fix, read in the 0.33.0 wheel", "2026-06-30"),
        cited=(Ref(VLLM, "commit", "ee0da84ab", "the 0.24.0 wheel: the last release before the fix"),
               Ref(VLLM, "commit", "4ba787ec9", "the 0.33.0 wheel: the fix")),
        sources=(
            "vLLM PR #47066 (2026-06-30), Model Runner V2: `DraftModelSpeculator._copy_request_inputs` in "
            "`vllm/v1/worker/gpu/spec_decode/speculator.py` copies the live slots into `idx_mapping`, and "
            "`gumbel_block_argmax` in `vllm/v1/worker/gpu/sample/gumbel.py` stores each row's q by its slot; "
            "read in the 0.24.0 wheel (commit `ee0da84ab`), the last release before the fix.",
        ),
        fix=(
            "PR #47066 itself: the host fills the padded rows of `idx_mapping` with -1 (0.33.0 "
            "`spec_decode/speculator.py`:547-551, commit `4ba787ec9`) and the kernel masks its loads and its "
            "store on `slot >= 0` (0.33.0 `sample/gumbel.py`); DFlash pads its per-sample mapping with -1 "
            "instead of 0.",
        ),
        answer=(r"\bslot 7\b[^.\n]{0,60}\b(free|no (live )?request|nobody|no one|unowned)\b",
                r"\b(last|end) (row|request)\b[^.\n]{0,80}\b(none|nothing|no live q|0 of|harmless)\b",
                r"\bonly (the )?(first|middle)\b[^.\n]{0,40}\b(batch|schedule|one)\b",
                r"\bfree slot\b[^.\n]{0,60}\bno (live )?request\b"),
    ),
    Case(
        number=2, key="hidden-state-cache", title="A -1 fill without a mask", module="labkit.family.hidden_state_cache",
        report=Ref(VLLM, "issue", "43810", "the issue of 2026-05-27, reported at commit 284e6f54", "2026-05-27"),
        fix_ref=Ref(VLLM, "commit", "055e47c2", "`vllm/model_executor/models/extract_hidden_states.py`: the clamp"),
        cited=(Ref(VLLM, "commit", "284e6f54", "the commit the issue was reported at"),
               Ref(VLLM, "commit", "2e3b4f40", "`extract_hidden_states.py` before the clamp"),
               Ref(VLLM, "pull request", "43869", "description of 2026-05-28; open when read")),
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
        module="labkit.family.shared_pool",
        report=Ref(VLLM, "issue", "53488", "the issue's thread, open when read", "2026-08"),
        fix_ref=None,
        cited=(Ref(VLLM, "pull request", "53520", "description of 2026-08-24; open when read"),),
        sources=(
            "vLLM issue #53488 (August 2026; reproduced on vLLM 0.27.1 in its thread) and PR #53520 (opened "
            "2026-08-24, open when read), on the V1 GPU model runner, `vllm/v1/worker/gpu_model_runner.py`: "
            "as the PR's description gives it, the padded drafter runs before `_bookkeeping_sync()`, whose "
            "`_get_prompt_logprobs_dict()` computes the prompt logprobs from the target's `hidden_states`, the "
            "output of a CUDA graph, and every CUDA graph allocates from one shared memory pool. Read in the "
            "threads, not in a vLLM tree.",
        ),
        fix=(
            f"In vLLM, {NO_FIX} as of the threads read, the issue's and PR #53520's: both were open. "
            "#53520 proposes one; what it changes was not read.",
        ),
        answer=(r"\b(at most|up to|no more than|<=|≤)\s*32 tokens?\b[^.\n]{0,80}\b(wrong|corrupt)",
                r"\bran (under|in|through|as) a graph\b[^.\n]{0,60}\b(wrong|corrupt)",
                r"\b(wrong|corrupt\w*)\b[^.\n]{0,60}\bran (under|in|through|as) a graph\b",
                r"\bclean for the eager\b", r"\beager (ones|prompts)\b[^.\n]{0,40}\b(clean|right|correct)\b",
                r"\b(long|longer) (prompts?|ones)\b[^.\n]{0,60}\b(clean|right|correct|unaffected)\b",
                r"\b(short|shorter) (prompts?|ones)\b[^.\n]{0,60}\b(wrong|corrupt)"),
    ),
    Case(
        number=4, key="static-buffer", title="A track buffer refreshed at its front and read at its tail",
        module="labkit.family.static_buffer",
        report=Ref(SGLANG, "pull request", "32555", "description of 2026-07-27; merged", "2026-07-27"),
        fix_ref=Ref(SGLANG, "pull request", "32555", "the fix, read at commit 012945ec", "2026-07-27"),
        cited=(Ref(SGLANG, "commit", "012945ec", "`python/sglang/srt/layers/attention/hybrid_linear_attn_backend.py`"
                                                 ", a tree that carries the fix"),
               Ref(SGLANG, "pull request", "29678", "a review of 2026-06-30 quoting the unfixed line; merged")),
        sources=(
            "SGLang PR #32555 (merged; described 2026-07-27), Mamba2 with the mamba radix cache: at a "
            "`mamba_track_interval` boundary, decode copies each request's state from its working slot to a "
            "track slot, which the radix tree keeps for prefix hits. Under decode CUDA "
            "graphs, `MambaAttnBackendBase._replay_metadata` refreshes the static buffer "
            "`mamba_track_indices_buf` (`max_bs` entries, zeros when allocated) at its front, `[:bs]`, and "
            "handed the whole buffer on; `Mamba2AttnBackend.forward` takes the destinations as "
            "`[-num_decodes:]`. Read in the PR's description and in "
            "`python/sglang/srt/layers/attention/hybrid_linear_attn_backend.py` at commit `012945ec`, a later "
            "tree (the index holds no copy at the merge commit); the unfixed line, `track_buf = "
            "self.mamba_track_indices_buf`, in a review of 2026-06-30 on PR #29678, whose diff adds it.",
        ),
        fix=(
            "PR #32555 itself: `_replay_metadata` hands out only `mamba_track_indices_buf[:bs]`, so that "
            "`[-num_decodes:]` of it is the batch's own rows, and `Mamba2AttnBackend` asserts that "
            "`num_decodes` is the batch size (commit `012945ec`). The PR's repro: a prefix hit on a state saved "
            "in graphed decode diverged from a cold prefill (KL about 1.55; 0.002 without graphs).",
        ),
        answer=(r"\b(5|five) to (8|eight)\b[^.\n]{0,120}\b(right|correct|clean|match)", r"\(5, 6, 7, 8\)",
                r"\bare the whole buffer\b",
                r"\bgraph of (8|eight)\b[^.\n]{0,60}\b(right|correct|clean|unaffected|hides|match)",
                r"\blargest (graph|capture size)\b[^.\n]{0,60}\b(right|correct|clean|hides|match)",
                r"\btail is the whole buffer\b", r"\bonly\b[^.\n]{0,40}\bgraph of (8|eight)\b",
                r"\bentries (4|four) to (7|seven)\b", r"\bslot 0\b[^.\n]{0,80}\b(never|not) (written|saved)"),
    ),
)


def in_order_reported() -> tuple[Case, ...]:
    """The cases in the order their threads were opened (the date each record gives)."""
    return tuple(sorted(CASES, key=lambda c: c.report.date))


def engines() -> tuple[str, ...]:
    """The engines the cases come from, in the order of ENGINES."""
    used = {c.report.repository for c in CASES}
    return tuple(name for repo, name in ENGINES.items() if repo in used)


def case(name) -> Case | None:
    """The case a reader names: 3, "3", "case 3" or its key "shared-pool" (None: no such case)."""
    key = str(name).strip().lower().removeprefix("case").strip()
    return next((c for c in CASES if key in (str(c.number), c.key)), None)
