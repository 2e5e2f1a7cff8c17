"""The bench's modes: named drafter configurations (:class:`~labkit.config.DrafterConfig`).

A mode's configuration runs as it is (``Engine(models, mode_named("graph-buggy").config)``), or
at other shapes (``config.at_shapes_of(shapes)``). Every mode is compared with the eager run of
the same drafter and draft sampling (:attr:`Mode.reference`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labkit.config import DrafterConfig, FixSwitches
from labkit.errors import LabkitInputError


@dataclass(frozen=True)
class Mode:
    """A named drafter configuration of the bench (at the bench's k, slots and capture sizes)."""

    name: str
    summary: str
    config: DrafterConfig = DrafterConfig()

    @property
    def reference(self) -> str:
        """The eager mode this one must match token for token."""
        if self.config.drafter == "dflash":
            return "dflash-eager"
        return "eager" if self.config.probabilistic else "greedy-eager"


_EAGER = DrafterConfig(use_graphs=False)
_BEFORE = DrafterConfig().before_fix()
_DFLASH = DrafterConfig(drafter="dflash")
MODES: dict[str, Mode] = {m.name: m for m in [
    Mode("eager", "no graphs: kernels see exactly num_reqs rows", _EAGER),
    Mode("graph-buggy", "full graphs, before the fix", _BEFORE),
    Mode("graph-fixed", "full graphs, with the PR's fix (notebook 03 shows it)"),
    Mode("graph-host-only", "the PR's host part alone: must refuse, not read out of bounds",
         DrafterConfig(fix=FixSwitches(host=True, kernel=False))),
    Mode("graph-kernel-only", "the PR's kernel part alone: the stale slots still corrupt",
         DrafterConfig(fix=FixSwitches(host=False, kernel=True))),
    Mode("greedy-eager", "greedy drafting, no graphs", replace(_EAGER, probabilistic=False)),
    Mode("greedy-graph-buggy", "greedy drafting under buggy graphs: no q is stored, so no harm",
         replace(_BEFORE, probabilistic=False)),
    Mode("dflash-eager", "DFlash-style drafter, no graphs (live rows only)", replace(_DFLASH, use_graphs=False)),
    Mode("dflash-buggy", "DFlash-style drafter under graphs, before its part of the fix",
         replace(_DFLASH, fix=FixSwitches(dflash=False))),
    Mode("dflash-fixed", "DFlash-style drafter under graphs, with the PR's fix", _DFLASH),
]}
DEFAULT_MODES = ("eager", "graph-buggy", "graph-fixed")
ALL_MODES = tuple(MODES)


def resolve_modes(names) -> list[str]:
    """Requested modes plus the eager references they are compared with, references first."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    if names == ["all"]:
        names = list(ALL_MODES)
    unknown = [n for n in names if n not in MODES]
    if unknown:
        raise LabkitInputError(f"unknown mode(s) {', '.join(unknown)}; known modes: {', '.join(ALL_MODES)}, or 'all'")
    if not names:
        raise LabkitInputError("no modes given")
    ordered: list[str] = []
    for n in names:
        for m in (MODES[n].reference, n):
            if m not in ordered:
                ordered.append(m)
    refs = [m for m in ordered if MODES[m].reference == m]
    return refs + [m for m in ordered if m not in refs]


def mode_named(name: str) -> Mode:
    """The registered mode called `name`, or an error that lists the known ones."""
    if name not in MODES:
        raise LabkitInputError(f"unknown mode {name!r}; known modes: {', '.join(ALL_MODES)}")
    return MODES[name]
