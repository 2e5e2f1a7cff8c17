"""One drafter configuration: what the speculator, the engine, the bench's modes and the runs take.

    DrafterConfig(drafter, k, max_num_reqs, capture_sizes, use_graphs, fix, probabilistic)
    FixSwitches(host, kernel, dflash)                       which parts of PR #47066's fix a run has

A configuration is checked once, when it is made, so everything below it can trust it. It is
frozen and hashable: recorded runs are cached per configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from labkit.checks import check_capture_sizes, check_int
from labkit.errors import LabkitInputError

DRAFTERS = ("autoregressive", "dflash")


def dflash_pad(fix: "FixSwitches") -> int:
    """The value a DFlash drafter pads its per-sample mapping with, under `fix` (notebook 03)."""
    return -1 if fix.dflash else 0


@dataclass(frozen=True)
class FixSwitches:
    """Which parts of PR #47066's fix a run has, each on or off: its host side, its kernel side and its
    DFlash side (notebook 03 says what each part does, after the exercises of notebook 07).

    ``FixSwitches.before()`` is the code before the PR and ``FixSwitches.after()`` (the default) the
    PR's; each shows as that call. Any other combination is an ablation and shows its fields.
    """

    host: bool = True
    kernel: bool = True
    dflash: bool = True

    def __post_init__(self):
        for name in ("host", "kernel", "dflash"):
            if not isinstance(getattr(self, name), bool):
                raise LabkitInputError(f"{name} must be True or False, got {getattr(self, name)!r}")

    @classmethod
    def before(cls) -> FixSwitches:
        return cls(host=False, kernel=False, dflash=False)

    @classmethod
    def after(cls) -> FixSwitches:
        return cls()

    def __repr__(self) -> str:
        # A configuration's repr is one `?` away in every notebook (DrafterConfig shows its fix):
        # the two a learner meets before the exercises name no part of the fix.
        for name in ("before", "after"):
            if self == getattr(FixSwitches, name)():
                return f"FixSwitches.{name}()"
        return f"FixSwitches(host={self.host!r}, kernel={self.kernel!r}, dflash={self.dflash!r})"


@dataclass(frozen=True)
class DrafterConfig:
    """A drafter and how it runs. The defaults are the bench's: k = 4, 16 slots, graphs of 1-16 rows.

    drafter:       "autoregressive" (k forwards, k sampling launches) or "dflash" (one forward, one
                   launch over k sample rows per request)
    k:             draft tokens per request and step (vLLM's num_speculative_steps)
    max_num_reqs:  request-state slots: the rows of every persistent buffer
    capture_sizes: the graphs' row counts, ascending; a batch pads to the next one
    use_graphs:    False runs eagerly, on exactly num_reqs rows
    fix:           which parts of the PR's fix are on (:class:`FixSwitches`)
    probabilistic: False drafts greedily (argmax, no q kept: immune to the bug)
    """

    drafter: str = "autoregressive"
    k: int = 4
    max_num_reqs: int = 16
    capture_sizes: tuple[int, ...] = (1, 2, 4, 8, 16)
    use_graphs: bool = True
    fix: FixSwitches = field(default_factory=FixSwitches)
    probabilistic: bool = True

    def __post_init__(self):
        if self.drafter not in DRAFTERS:
            raise LabkitInputError(f"unknown drafter {self.drafter!r}: use one of {', '.join(DRAFTERS)}")
        object.__setattr__(self, "k", check_int("k", self.k, low=1))
        object.__setattr__(self, "max_num_reqs", check_int("max_num_reqs", self.max_num_reqs, low=1))
        object.__setattr__(self, "capture_sizes", tuple(check_capture_sizes(self.capture_sizes)))
        if not isinstance(self.fix, FixSwitches):
            raise LabkitInputError(f"fix must be a FixSwitches, got {self.fix!r}")
        for name in ("use_graphs", "probabilistic"):
            if not isinstance(getattr(self, name), bool):
                raise LabkitInputError(f"{name} must be True or False, got {getattr(self, name)!r}")

    def before_fix(self) -> DrafterConfig:
        """The same drafter, as it ran before the PR."""
        return replace(self, fix=FixSwitches.before())

    def with_pr_fix(self) -> DrafterConfig:
        """The same drafter, with the PR's fix."""
        return replace(self, fix=FixSwitches.after())

    def at_shapes_of(self, shapes: DrafterConfig) -> DrafterConfig:
        """This drafter at the k, max_num_reqs and capture sizes of `shapes`."""
        return replace(self, k=shapes.k, max_num_reqs=shapes.max_num_reqs, capture_sizes=shapes.capture_sizes)

    def canonical(self) -> DrafterConfig:
        """The same run with what this drafter ignores at its default: only DFlash reads `fix.dflash`."""
        if self.drafter == "dflash":
            return self
        return replace(self, fix=replace(self.fix, dflash=True))

    def describe_fix(self) -> str:
        """The fix setting in words. The two a learner meets before the exercises are named without
        naming the fix's parts: labels end up in figures the student edition must keep clean."""
        own = self.canonical()
        if own == self.canonical().before_fix().canonical():
            return "before the fix"
        if own == self.canonical().with_pr_fix().canonical():
            return "with the PR's fix"
        fix = self.fix
        parts = [f"fill {'on' if fix.host else 'off'}", f"mask {'on' if fix.kernel else 'off'}"]
        if self.drafter == "dflash":
            parts.append(f"DFlash pad {dflash_pad(fix)}")
        return ", ".join(parts)
