"""Notebook 03's map of the moving parts: :func:`labkit.viz.moving_parts.moving_parts` with the three
parts of PR #47066's fix written where they act (FIX 1-3, the numbers of the bug's places)."""

from __future__ import annotations

from matplotlib.figure import Figure

from labkit.viz.moving_parts import moving_parts

# Private: `?` on a public table would show the fix before the exercises.
_FIX = {
    1: "FIX 1: idx_mapping[num_reqs:] = -1",
    2: "FIX 2: skip slot < 0\n(masked loads + store)",
    3: "FIX 3: pad with -1, not 0",
}


def moving_parts_fixed() -> Figure:
    """The map of the moving parts, each place of the bug with the part of the fix that acts there."""
    return moving_parts(_FIX)
