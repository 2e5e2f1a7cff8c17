"""The exercises of notebook 07, one record each: the only place that lists them.

An :class:`Exercise` holds everything that names one exercise: its letter, title and topic, where
its part lives in vLLM, the learner's function (per version: a Triton kernel or helper, or the torch
function written where Triton cannot run), notebook 07's cells, the hints, the kit's code that
answers it (shown once it is solved), what counts as its answer on the learner's path, its minutes
in the agendas, and its checker. The hints (:mod:`~labkit.workshop.exercises.hints`), the reveal
(:mod:`~labkit.workshop.exercises.reveal`, :mod:`~labkit.workshop.exercises.kit_code`), the
starting code (:mod:`~labkit.workshop.exercises.starting_code`), the checkers that notebook 07
imports (:mod:`labkit.workshop.checkers`), the secrecy scan and the agendas
(:mod:`labkit.workshop.editions`) all read :data:`EXERCISES` when they run. docs/MAINTAINING.md
says how to add one.

Notebook 07's cells of exercise ``x`` carry the ids ``x-task`` (where the exercise starts),
``x-skeleton`` (and ``x-skeleton-torch``: the starting code of each version), ``x-check-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Piece:
    """A function of the kit, whole (``"module:Qualified.name"``), and a regex of the lines to mark."""

    owner: str
    mark: str


@dataclass(frozen=True)
class KitCode:
    """The kit's code that answers an exercise: where it lives (in words) and its functions."""

    where: str
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class Version:
    """One way to write an exercise: ``kind`` 'triton' (a @triton.jit kernel or helper), 'torch' (a plain
    function, for a session that cannot run Triton), or None where one plain function serves everywhere."""

    kind: str | None
    function: str  # the name the checker looks up in the learner's namespace
    skeleton_cell: str  # notebook 07's cell that holds its starting code
    kit_code: KitCode = field(repr=False)
    hints: tuple[str, ...] = field(repr=False)  # each gives more away; the last is the fix


@dataclass(frozen=True)
class Exercise:
    """One exercise of notebook 07 (see the module's docstring)."""

    letter: str
    title: str  # notebook 07's heading, after "(x) "
    topic: str  # what the exercise is about, in a few words
    upstream: str = field(repr=False)  # where its part of the fix lives in vLLM (its words name the fix)
    versions: tuple[Version, ...]
    checker: str  # "module:function" of its checker (labkit.workshop.exercises.checks); 07 calls ex.<function>
    minutes: int  # planned in the agendas (labkit.workshop.editions.agenda)
    agenda_notebook: str  # the notebook whose slot of the agenda the exercise is done in
    compare_notebook: str  # the notebook (after 07) that shows the kit's code beside the learner's
    answer: tuple[str, ...] = field(repr=False)  # regexes: what shows the answer before the exercise
    # Narrower regexes for the exercise's own task and skeleton, which may name its tools (a masked load,
    # a cast) but not the answer; None: the same as `answer`.
    answer_in_task: tuple[str, ...] | None = field(default=None, repr=False)
    # What the kit's reference may not say: what `?` and Tab show anywhere in the package (docstrings,
    # signatures, reprs), all of it reachable before the first exercise. None: `answer_in_task`.
    answer_in_help: tuple[str, ...] | None = field(default=None, repr=False)
    agenda_note: str = ""  # said after the letter in the agenda, e.g. that it is a discussion
    # Notebook 07's opening table (rendered from here): what the learner writes, and what the checker runs
    # it through. Empty: the topic, and "its checker".
    you_write: str = ""
    checked_on: str = ""

    def patterns(self, in_task: bool = False, in_help: bool = False) -> tuple[str, ...]:
        """What gives the answer away: anywhere before the exercise, (`in_task`) in its own task, or
        (`in_help`) in what ``?`` shows of the kit's modules."""
        if in_help and self.answer_in_help is not None:
            return self.answer_in_help
        if (in_task or in_help) and self.answer_in_task is not None:
            return self.answer_in_task
        return self.answer

    @property
    def task_cell(self) -> str:
        return f"{self.letter}-task"

    @property
    def check_name(self) -> str:
        return self.checker.partition(":")[2]

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.function for v in self.versions))

    def version(self, kind: str | None = None) -> Version:
        """The version of `kind` ('triton' or 'torch'); an exercise written one way has only that one."""
        if len(self.versions) == 1:
            return self.versions[0]
        for version in self.versions:
            if version.kind == kind:
                return version
        raise KeyError(f"exercise ({self.letter}) has no {kind!r} version")


NOTEBOOK = "07_exercises.ipynb"  # the exercises' notebook, in notebooks/
_GUMBEL = "labkit.kernels.gumbel"
_WORKSHOP = "labkit.workshop.exercises"

EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        letter="a",
        you_write='the host-side copy of the batch into `idx_mapping`',
        checked_on="the kit's `Speculator`, on notebook 02's timeline (8 requests, then slot 3 finishes, ...)",
        title="The host side: the padded rows of the mapping",
        topic="the host side: idx_mapping's padded rows",
        upstream="DraftModelSpeculator._copy_request_inputs in vllm/v1/worker/gpu/spec_decode/speculator.py",
        versions=(Version(None, "copy_idx_mapping", "a-skeleton", KitCode(
            "labkit/speculator.py, Speculator.copy_idx_mapping",
            (Piece("labkit.speculator:Speculator.copy_idx_mapping", r"fill_\(-1\)"),)), hints=(
            "Which rows does the padded graph process, and what do rows num_reqs and above hold when nobody "
            "writes them this step?",
            "Slot numbers are 0 .. max_num_reqs - 1, so every non-negative value in the buffer is somebody's slot. "
            "The buffer is signed on purpose: which value can no request own?",
            "Two lines, both in place: `idx_mapping[:num_reqs] = slots` and `idx_mapping[num_reqs:] = -1`.")),),
        checker=f"{_WORKSHOP}.host_mapping:check_mapping",
        minutes=10, agenda_notebook="07", compare_notebook="03",
        answer=(r"(?<![\w.\-])-1(?![\w.])", r"\bfill(s|ed|ing)?\b", r"\bsentinel", r"\bno[ -]request\b.{0,20}\bvalue",
                r"\buint32\b"),
        answer_in_task=(r"\[\s*num_reqs\s*:\s*\]\s*=\s*-1", r"\.fill_\(\s*-1\s*\)", r"(?<![\w.\-])-1(?![\w.\]])"),
        answer_in_help=(r"\[\s*num_reqs\s*:\s*\]\s*=\s*-1", r"\.fill_\(\s*-1\s*\)", r"(?<![\w.\-])-1(?![\w.\]])",
                        r"\b(padded|padding)\b[^.\n]{0,60}\bnegative\b", r"\bnegative\b[^.\n]{0,30}\b(pad|fill)"),
    ),
    Exercise(
        letter="b",
        you_write='a small Gumbel sampling kernel that must cope with padded rows',
        checked_on='the torch reference, with guard memory around every buffer',
        title="The kernel: a row that holds no request",
        topic="the sampling kernel's loads and store",
        upstream="gumbel_block_argmax in vllm/v1/worker/gpu/sample/gumbel.py",
        versions=(
            Version("triton", "gumbel_kernel", "b-skeleton", KitCode(
                "labkit/kernels/gumbel.py, slot_temperature_and_seed and q_store_mask (called by "
                "gumbel_sample_kernel)",
                (Piece(f"{_GUMBEL}:slot_temperature_and_seed", r"mask=|other=|>= 0"),
                 Piece(f"{_GUMBEL}:q_store_mask", r">= 0"))), hints=(
                "Find every tl.load and tl.store whose address uses `slot`. Which of them run for a padded row, "
                "and which address do they touch when slot is -1?",
                "A padded row's token and q are thrown away, so it may compute anything, as long as it touches no "
                "memory through slot -1: no load of temperature or seeds there, no store into q.",
                "`is_valid = slot >= 0`; load with `mask=is_valid, other=0` (any `other` works), and store with "
                "`mask=in_vocab & ((offs * 0 + slot) >= 0)` (the scalar broadcast first, which every Triton "
                "accepts). Putting the whole body under `if slot >= 0:` works too.")),
            Version("torch", "gumbel_rows", "b-skeleton-torch", KitCode(
                "labkit/kernels/gumbel.py, _slot_temperature_and_seed_torch and _store_q_torch (the kernel's "
                "torch reference, behind gumbel_sample_torch)",
                (Piece(f"{_GUMBEL}:_slot_temperature_and_seed_torch", r">= 0|where\(valid,"),
                 Piece(f"{_GUMBEL}:_store_q_torch", r"valid\[row\]"))), hints=(
                "Find every place that indexes temperature, seeds or q with `slot`. Which of them run for a padded "
                "row, and what do they touch when slot is -1? (These buffers index like pointers: -1 is the "
                "memory just before them.)",
                "A padded row's token and q are thrown away, so it may compute anything, as long as it touches no "
                "memory through slot -1.",
                "Skip the padded rows before any access: `if slot < 0: continue` at the top of the loop (or index "
                "with `idx_mapping.clamp(min=0)` and select with `torch.where(idx_mapping >= 0, ..., 0.0)`, "
                "storing only the rows with slot >= 0).")),
        ),
        checker=f"{_WORKSHOP}.sampling_kernel:check_kernel",
        minutes=15, agenda_notebook="07", compare_notebook="03",
        answer=(r"\bmask", r"\bslot\s*[<>]=?\s*0", r">=\s*0\b", r"\bis_valid\b", r"\bother\s*=",
                r"\bskip\w*\s+(the\s+)?(padded|padding|rows?|slots?)\b"),
        answer_in_task=(r"\bslot\s*[<>]=?\s*0", r"\bis_valid\b", r"mask\s*=[^,)\n]*slot",
                        r"\bskip\w*\s+(the\s+)?(padded|rows?)\b"),
        answer_in_help=(r"\bslot\s*[<>]=?\s*0", r"\bis_valid\b", r"mask\s*=[^,)\n]*slot",
                        r"\bskip\w*\s+(the\s+)?(padded|padding|rows?)\b", r"\bmask\w*\b[^.\n]{0,30}\bskip"),
    ),
    Exercise(
        letter="c",
        you_write="DFlash's per-sample mapping, and its pad value",
        checked_on="the kit's `DFlashSpeculator`, on the same timeline",
        title="DFlash: what to pad the sample mapping with",
        topic="DFlash's sample mapping",
        upstream="_prepare_dflash_inputs_kernel in vllm/v1/worker/gpu/spec_decode/dflash/speculator.py",
        versions=(Version(None, "build_sample_mapping", "c-skeleton", KitCode(
            "labkit/config.py, dflash_pad (the pad), and labkit/kernels/dflash_prep.py, "
            "prepare_dflash_sample_mapping_torch (where it goes)",
            (Piece("labkit.config:dflash_pad", r"-1"),
             Piece("labkit.kernels.dflash_prep:prepare_dflash_sample_mapping_torch", r"pad_value"))), hints=(
            "0 looks like a harmless index. Harmless for whom? The sampling kernel stores q *by slot*.",
            "The masked kernel skips exactly the sample rows whose slot is negative.",
            "`sample_idx_mapping[num_reqs * k:] = -1`.")),),
        checker=f"{_WORKSHOP}.dflash_mapping:check_dflash",
        minutes=5, agenda_notebook="07", compare_notebook="03",
        agenda_note='a discussion: "0 is a valid index, so why was it wrong?"',
        answer=(r"\bpad(s|ded|ding)?\s+(it\s+|value\s+|them\s+)?(with|of|=|:|to|is|becomes)\s*-1", r"-1,?\s+not\s+0\b",
                r"\bpad_value\s*=\s*-1", r"sample_idx_mapping[^\n]{0,80}-1\s*\]",
                r"\b(DFlash|sample rows?)\b[^.\n]{0,60}-1"),
    ),
    Exercise(
        letter="d",
        you_write='the offset `slot * stride` of a store, without overflow (vLLM #47383)',
        checked_on='a kernel with vLLM-sized strides',
        title="Harder: an offset that overflows (vLLM #47383)",
        topic="the offset of the store into q",
        upstream="vLLM #47383, the slot-indexed draft-logits offset slot * k * vocab in int32 (the kit's "
                 "gumbel_sample_kernel widens it); #46560 was its per-row sibling, row * vocab_size",
        versions=tuple(Version(kind, "q_offset", "d-skeleton", KitCode(
            "labkit/kernels/gumbel.py, q_row_start (called by gumbel_sample_kernel)",
            (Piece(f"{_GUMBEL}:q_row_start", r"int64\)"),)), hints=(
            first,
            "slot * stride_slot passes 2**31 - 1 once slot > 2**31 // stride_slot: 3533 for k = 4 and V = 151936. "
            "Casting the finished sum is too late: the product has wrapped by then.",
            f"Widen before multiplying: `slot.to({module}.int64) * stride_slot + step * stride_step`."))
            for kind, module, first in (
                ("triton", "tl", "slot is int32 (loaded from the int32 mapping) and so is stride_slot: what is the "
                                 "type of their product?"),
                ("torch", "torch", "slot is an int32 tensor and stride_slot a Python int: torch keeps the product "
                                   "int32. What happens past 2**31 - 1?"))),
        checker=f"{_WORKSHOP}.store_offset:check_offset",
        minutes=10, agenda_notebook="05", compare_notebook="05",
        answer=(r"\.to\(\s*(tl|torch)\.int64\s*\)", r"\btl\.int64\b", r"\bwiden",
                r"\b(cast|promot)\w*\b[^.\n]{0,40}(int64|64[- ]bit)",
                r"(int64|64[- ]bit)[^.\n]{0,40}\b(offset|multipl|product)", r"\boffsets? need 64",
                r"\bint32\b[^.\n]{0,30}\boverflow"),
        answer_in_task=(r"\bint64\b", r"\bwiden", r"64[- ]bit"),
        # The kit's reference names int64 as a dtype in many places; what it may not say is the fix's
        # widening of the offset.
        answer_in_help=(r"\.to\(\s*(tl|torch)\.int64\s*\)", r"\btl\.int64\b", r"\bwiden",
                        r"\b(cast|promot)\w*\b[^.\n]{0,40}(int64|64[- ]bit)",
                        r"(int64|64[- ]bit)[^.\n]{0,40}\b(offset|multipl|product)", r"\boffsets? need 64"),
    ),
)


def letters() -> tuple[str, ...]:
    """The exercises' letters, in notebook 07's order."""
    return tuple(x.letter for x in EXERCISES)


def exercise(name) -> Exercise | None:
    """The exercise a learner names: 'a', '(a)', 'A' (None: no such exercise)."""
    key = str(name).strip().strip("()").lower()
    return next((x for x in EXERCISES if x.letter == key), None)


def version_of_function(function: str) -> tuple[Exercise, Version] | None:
    """The exercise and version whose learner function is called `function` (its first version if several)."""
    return next(((x, v) for x in EXERCISES for v in x.versions if v.function == function), None)


def choices() -> str:
    """'a, b, c, d': for the line that says an exercise does not exist."""
    return ", ".join(letters())
