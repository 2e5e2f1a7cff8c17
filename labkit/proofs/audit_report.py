"""What an audit found, in words: the padding-invariance audit (:mod:`labkit.proofs.audit`) and the
output-lifetime audit (:mod:`labkit.proofs.lifetime`) report alike.

A :class:`Corruption` is one live record that differs between the unpadded and the padded run,
with the row that wrote it when the audit could name it, or what the record read outside the live
rows; an :class:`Overwrite` is an output handed on from one stage of a step that a later stage
changed before its reader read it. An :class:`AuditReport` is the verdict, what was checked, and
every finding as a sentence such as ``padded row 7 wrote draft_logits[7, 0, :] owned by row 6``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PADDING_INVARIANCE = "padding invariance"
OUTPUT_LIFETIME = "output lifetime"


class PaddingInvarianceError(AssertionError):
    """A step's live outputs changed when only its padded or unused parts were changed."""


class OutputLifetimeError(AssertionError):
    """An output one stage handed on changed before the stage that reads it ran."""


def _listed(places, most: int = 3) -> str:
    shown = ", ".join(places[:most])
    return shown + (f" and {len(places) - most} more" if len(places) > most else "")


@dataclass
class Corruption:
    """One live record that differs between the unpadded and the padded run."""

    buffer: str
    index: tuple[int, ...]
    location: str  # e.g. "draft_logits[7, 0, :]"
    owner: int | None  # live row that owns it
    writer: int | None  # row (program) that wrote it, if known
    writer_text: str  # e.g. "padded row 7"
    stores: int | None  # how many rows stored there (from a write trace)
    how: str  # "write trace", "mapping", "probe", "unknown"; "unpadded run": the reference moved
    poisons: tuple = ()
    max_abs_diff: float = 0.0
    by_own_row: bool = False  # the trace names the record's writer in the unpadded run as the writer here too
    reads: tuple[str, ...] = ()  # records outside the live rows whose change moves this one, e.g. "hidden[5, :]"
    read_by: str = ""  # who reads the record (the buffer's reader, e.g. "the rejection sampler")

    def sentence(self) -> str:
        owner = f"row {self.owner}" if self.owner is not None else "no live row"
        reader = f", which {self.read_by} reads," if self.read_by else ""
        outside = (f"it reads {_listed(self.reads)}, which no live row owns (nothing of this step wrote "
                   "it there)") if self.reads else ""
        if self.how == "unpadded run":
            return (f"{self.location} owned by {owner}{reader} changes with the poison even without padding: "
                    + (outside or "the step reads something outside the live rows and slots, or never writes it"))
        if self.writer is None:
            if outside:
                return f"{self.location} owned by {owner}{reader} differs from the unpadded run: {outside}"
            return (f"{self.location} owned by {owner}{reader} differs from the unpadded run; "
                    "no row could be named as its writer")
        if self.by_own_row:
            if self.stores is not None and self.stores > 1:
                return (f"{self.writer_text} wrote {self.location} owned by {owner} ({self.stores} rows "
                        "stored there; its own store landed last), yet the value differs from the unpadded "
                        "run: on a GPU, stores to one address race element by element, so part of the "
                        "record can hold another row's values")
            return (f"{self.location} owned by {owner} differs from the unpadded run although its own "
                    f"{self.writer_text} wrote it last in both runs: that row's result depends on how many "
                    "rows the step ran")
        text = f"{self.writer_text} wrote {self.location} owned by {owner}{reader.rstrip(',')}"
        if self.stores is not None and self.stores > 1:
            text += f" ({self.stores} rows stored there; this one landed last)"
        return text


@dataclass
class Overwrite:
    """An output one stage handed on that a later stage changed before the reader read it."""

    buffer: str
    rows: tuple[int, ...]  # the rows (first index) that changed
    location: str  # e.g. "hidden_states[0:2, :]"
    handed_on_by: str  # the stage that produced it
    writer: str  # the first later stage after which it differed
    reader: str  # the stage that read it
    steps: tuple[int, ...] = ()  # the engine steps in which it happened
    max_abs_diff: float = 0.0
    how: str = "later stage"

    def sentence(self) -> str:
        return (f"{self.writer} overwrote {self.location}, handed on by {self.handed_on_by}, before "
                f"{self.reader} read it")


@dataclass
class AuditReport:
    """What the audit ran and what it found. ``str(report)`` is the report in words.

    `checks`: the property audited (:data:`PADDING_INVARIANCE`, or :data:`OUTPUT_LIFETIME` with
    `shape` saying what ran, e.g. "3 stages over 4 steps")."""

    name: str
    live_rows: int
    padded_rows: int
    poisons: tuple
    checked: list[str]
    findings: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: str = PADDING_INVARIANCE
    shape: str = ""

    @property
    def passed(self) -> bool:
        return not self.findings

    def sentences(self) -> list[str]:
        return [f.sentence() for f in self.findings]

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        if self.checks == OUTPUT_LIFETIME:
            head = f"{verdict} {self.name}: output lifetime, {self.shape}; checked {', '.join(self.checked)}"
            if not self.passed:
                head += f" -- {len(self.findings)} output(s) overwritten before they were read"
            return head
        shape = f"{self.live_rows} live rows run as {self.padded_rows}"
        poisons = ", ".join(str(p) for p in self.poisons)
        head = f"{verdict} {self.name}: {shape}, poisons {poisons}; checked {', '.join(self.checked)}"
        if not self.passed:
            head += f" -- {len(self.findings)} corrupted live record(s)"
        return head

    def __str__(self) -> str:
        lines = [self.summary()]
        for f in self.findings:
            if isinstance(f, Overwrite):
                steps = ", ".join(str(s) for s in f.steps)
                lines.append(f"  {f.sentence()}  [{f.how}; step {steps}]")
                continue
            poisons = ", ".join(str(p) for p in f.poisons)
            lines.append(f"  {f.sentence()}  [{f.how}; poison {poisons}]")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def raise_if_failed(self) -> "AuditReport":
        if not self.passed:
            error = OutputLifetimeError if self.checks == OUTPUT_LIFETIME else PaddingInvarianceError
            raise error(str(self))
        return self
