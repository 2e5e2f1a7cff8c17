"""The bench's modes, and the one place a mode becomes a speculator or an engine configuration.

A mode is a drafter (autoregressive or DFlash-style), a draft sampling (probabilistic or greedy),
graphs on or off, and the fix switches (:class:`~labkit.speculator.FixSwitches`). Every mode is
compared with the eager run of the same drafter and draft sampling (:attr:`Mode.reference`).
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.checks import LabkitInputError
from labkit.engine import EngineConfig
from labkit.speculator import FixSwitches, Speculator, make_speculator


@dataclass(frozen=True)
class Mode:
    name: str
    summary: str
    drafter: str = "autoregressive"
    probabilistic: bool = True
    use_graphs: bool = True
    fix: FixSwitches = FixSwitches.after()

    @property
    def reference(self) -> str:
        """The eager mode this one must match token for token."""
        if self.drafter == "dflash":
            return "dflash-eager"
        return "eager" if self.probabilistic else "greedy-eager"


_NO_FILL = FixSwitches(fill_padding=False, mask_kernel=True)
MODES: dict[str, Mode] = {m.name: m for m in [
    Mode("eager", "no graphs: kernels see exactly num_reqs rows", use_graphs=False),
    Mode("graph-buggy", "full graphs, before the fix", fix=FixSwitches.before()),
    Mode("graph-fixed", "full graphs, with the PR's fix (notebook 03 shows it)"),
    Mode("graph-fill-only", "fill -1 but the kernel is unmasked: must refuse, not read out of bounds",
         fix=FixSwitches(fill_padding=True, mask_kernel=False)),
    Mode("graph-mask-only", "masked kernel but stale slots (>= 0) stay: still corrupts", fix=_NO_FILL),
    Mode("greedy-eager", "greedy drafting, no graphs", probabilistic=False, use_graphs=False),
    Mode("greedy-graph-buggy", "greedy drafting under buggy graphs: no q is stored, so no harm",
         probabilistic=False, fix=FixSwitches.before()),
    Mode("dflash-eager", "DFlash-style drafter, no graphs (live rows only)", drafter="dflash", use_graphs=False),
    Mode("dflash-buggy", "DFlash pads its sample mapping with 0 (slot 0)", drafter="dflash",
         fix=FixSwitches(fill_padding=True, mask_kernel=True, dflash_pad=0)),
    Mode("dflash-fixed", "DFlash pads with -1", drafter="dflash"),
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


def _as_mode(mode: Mode | str) -> Mode:
    return mode_named(mode) if isinstance(mode, str) else mode


def speculator_for(mode: Mode | str, draft_model, *, max_num_reqs: int, num_steps: int, capture_sizes,
                   record: bool = False, device=None, validate: bool = True) -> Speculator:
    """The speculator that runs `mode` at these shapes (`validate=False`: no host-side input
    checks in the kernels, for GPU timing; see :class:`~labkit.speculator.Speculator`)."""
    m = _as_mode(mode)
    return make_speculator(m.drafter, draft_model, max_num_reqs=max_num_reqs, num_steps=num_steps,
                           capture_sizes=tuple(capture_sizes), use_graphs=m.use_graphs, fix=m.fix,
                           probabilistic=m.probabilistic, device=device, record=record,
                           validate=validate)


def engine_config_for(mode: Mode | str, *, max_num_reqs: int, num_steps: int, capture_sizes,
                      record: bool = False) -> EngineConfig:
    """The engine configuration that runs `mode` at these shapes."""
    m = _as_mode(mode)
    return EngineConfig(drafter=m.drafter, num_steps=num_steps, max_num_reqs=max_num_reqs,
                        capture_sizes=tuple(capture_sizes), use_graphs=m.use_graphs, fix=m.fix,
                        probabilistic=m.probabilistic, record=record)
