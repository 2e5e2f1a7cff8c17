"""What a padding-invariance audit found, in words (:mod:`labkit.proofs.audit` runs it).

A :class:`Corruption` is one live record that differs between the unpadded and the padded run,
with the row that wrote it when the audit could name it; an :class:`AuditReport` is the verdict,
what was checked, and every corruption as a sentence such as
``padded row 7 wrote draft_logits[7, 0, :] owned by row 6``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class PaddingInvarianceError(AssertionError):
    """A step's live outputs changed when only its padded or unused parts were changed."""


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

    def sentence(self) -> str:
        owner = f"row {self.owner}" if self.owner is not None else "no live row"
        if self.how == "unpadded run":
            return (f"{self.location} owned by {owner} changes with the poison even without padding: "
                    "the step reads something outside the live rows and slots, or never writes it")
        if self.writer is None:
            return (f"{self.location} owned by {owner} differs from the unpadded run; "
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
        text = f"{self.writer_text} wrote {self.location} owned by {owner}"
        if self.stores is not None and self.stores > 1:
            text += f" ({self.stores} rows stored there; this one landed last)"
        return text


@dataclass
class AuditReport:
    """What the audit ran and what it found. ``str(report)`` is the report in words."""

    name: str
    live_rows: int
    padded_rows: int
    poisons: tuple
    checked: list[str]
    findings: list[Corruption] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.findings

    def sentences(self) -> list[str]:
        return [f.sentence() for f in self.findings]

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        shape = f"{self.live_rows} live rows run as {self.padded_rows}"
        poisons = ", ".join(str(p) for p in self.poisons)
        head = f"{verdict} {self.name}: {shape}, poisons {poisons}; checked {', '.join(self.checked)}"
        if not self.passed:
            head += f" -- {len(self.findings)} corrupted live record(s)"
        return head

    def __str__(self) -> str:
        lines = [self.summary()]
        for f in self.findings:
            poisons = ", ".join(str(p) for p in f.poisons)
            lines.append(f"  {f.sentence()}  [{f.how}; poison {poisons}]")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def raise_if_failed(self) -> "AuditReport":
        if not self.passed:
            raise PaddingInvarianceError(str(self))
        return self
