"""What a case's graph run corrupted, counted against the same work run eagerly (as notebook 01 counts).

A :class:`Symptom` names the unit counted (q records, cache slots, prompts, rows), which of them
differ from the eager run, how many there were, and the largest difference; ``str()`` says it in
one line and :meth:`Symptom.as_record` gives the JSON a record keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Symptom:
    """Which `unit` s of a graph run differ from the eager run's, out of `total`."""

    unit: str  # what is counted, plural: "q records", "cache slots", "prompts", "live rows"
    corrupted: tuple  # which ones, as the case names them (a slot, a prompt's length, a batch and row)
    total: int
    max_abs_diff: float = 0.0

    @property
    def count(self) -> int:
        return len(self.corrupted)

    def __str__(self) -> str:
        text = f"{self.count} of {self.total} {self.unit} differ from eager"
        if self.corrupted:
            shown = ", ".join(str(c) for c in self.corrupted[:8]) + (" ..." if self.count > 8 else "")
            text += f" ({shown}; largest difference {self.max_abs_diff:.3g})"
        return text

    def as_record(self) -> dict:
        return {"unit": self.unit, "corrupted": [list(c) if isinstance(c, tuple) else c for c in self.corrupted],
                "count": self.count, "total": self.total, "max_abs_diff": round(float(self.max_abs_diff), 6)}


def differs(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact inequality, bit for bit (the cases compare batch-invariant work)."""
    return not torch.equal(a.detach().cpu(), b.detach().cpu())


def largest_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    d = (a.detach().cpu().double() - b.detach().cpu().double()).abs()
    return float(d.max()) if d.numel() else 0.0
