"""Notebook 03's explorer: notebook 02's, with a switch for each part of PR #47066's fix.

The three parts are :class:`labkit.config.FixSwitches`' host, kernel and dflash; each switch alone,
and the settings :func:`overwrite_summary` compares, show what each part does. Notebook 03 says
what they are (after the exercises of notebook 07, which ask for them).
"""
# (Kept out of the docstring, which `?` shows before the exercises.) The three parts:
#     host     Speculator.copy_idx_mapping fills the padded rows of idx_mapping with -1 (no request).
#     kernel   the Gumbel sampling kernel masks its loads and its q store on slot >= 0.
#     dflash   DFlash pads its per-sample mapping with -1 rather than 0 (request slot 0).
# The fill without the mask is refused (a -1 slot would index memory before the buffers), the mask
# without the fill lets stale slots through (they are >= 0), and DFlash with pad 0 overwrites slot 0.

from __future__ import annotations

from dataclasses import replace

from labkit.bench.runs import RunSource, engine_source
from labkit.config import FixSwitches, dflash_pad
from labkit.viz.widgets import Explorer

__all__ = ["FixExplorer", "overwrite_summary"]


class FixExplorer(Explorer):
    """:class:`~labkit.viz.widgets.Explorer` plus one switch per part of the fix."""

    def __init__(self, source: RunSource | None = None, **kwargs):
        import ipywidgets as w

        source = source or engine_source()
        fix = (kwargs.get("config") or source.base.before_fix()).fix
        self.fill = w.Checkbox(value=fix.host, description="fill padded rows with -1", indent=False)
        self.mask = w.Checkbox(value=fix.kernel, description="mask the kernel (slot >= 0)", indent=False)
        self.dflash_pad = w.Dropdown(options=[0, -1], value=dflash_pad(fix), description="DFlash pad")
        super().__init__(source, **kwargs)

    def controls(self) -> list:
        return [*super().controls(), self.fill, self.mask, self.dflash_pad]

    def control_rows(self) -> list:
        import ipywidgets as w

        return [w.HBox([self.step, self.drafter, self.dflash_pad]), w.HBox([self.fill, self.mask])]

    def config(self):
        self.dflash_pad.disabled = self.drafter.value != "dflash"
        fix = FixSwitches(host=self.fill.value, kernel=self.mask.value, dflash=self.dflash_pad.value < 0)
        return replace(super().config(), fix=fix).canonical()


# Settings worth comparing: what each changes in the source's drafter configuration. Private: its
# labels name the fix, and `?` shows a public table's repr before the exercises.
_FIX_SETTINGS: dict[str, dict] = {
    "before the fix": dict(fix=FixSwitches.before()),
    "mask only": dict(fix=FixSwitches(host=False)),
    "fill only": dict(fix=FixSwitches(kernel=False)),
    "fill + mask": dict(fix=FixSwitches()),
    "DFlash, pad 0": dict(drafter="dflash", fix=FixSwitches(dflash=False)),
    "DFlash, pad -1": dict(drafter="dflash", fix=FixSwitches()),
}


def overwrite_summary(source: RunSource | None = None, settings: dict[str, dict] | None = None) -> str:
    """Per setting: launches, launches in which a padded row overwrote a live q, overwritten (slot, step)s
    (`settings`: label -> changes to the source's configuration; None: the parts of the fix, alone and together)."""
    source = source or engine_source()
    settings = _FIX_SETTINGS if settings is None else settings
    head = f"{'setting':<16}{'launches':>9}{'with an overwrite':>19}{'overwritten q':>15}"
    lines = [head]
    for label, changes in settings.items():
        run = source(replace(source.base, **changes))
        if run.error:
            lines.append(f"{label:<16}{'refused before the first padded launch (slot -1, no mask)':>43}")
            continue
        found = [launch.collisions() for launch in run.launches]
        lines.append(f"{label:<16}{len(run.launches):>9}{sum(bool(f) for f in found):>19}"
                     f"{sum(len(f) for f in found):>15}")
    return "\n".join(lines)
