"""What each section of the GPU record measured with, against what the code measures with now.

A section's numbers describe the code that ran. Two things name that code: the kernel's launch
defaults (:mod:`labkit.kernels.gumbel_tuning`), stamped with each section in
``record["section_provenance"]``, and the sizes and shapes it ran at (:mod:`labkit.gpu.sizes`),
kept in the section's data. When the code moves on (a warp count changed, a capture size added),
every number of that section describes a kit that is gone: :func:`stale` names each such section,
what differs, and the commands that measure it again. ``tests/test_gpu.py`` runs it on the shipped
record, on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Callable

from labkit import records
from labkit.gpu import sizes

# Sections that do not run the kit's kernel at its launch defaults: a copy's bandwidth, the sweep over
# launch configurations (each row names its own), and vLLM's kernel.
NOT_AT_THE_DEFAULTS = ("peak_copy", "sweep", "upstream_audit")


def kernel_defaults() -> dict:
    """The launch defaults of the compiled kernel, as a GPU run stamps them."""
    from labkit.kernels import gumbel_tuning as tuning

    return {"block_v": tuning.GPU_BLOCK_V, "num_warps": tuning.GPU_NUM_WARPS, "fast_math": tuning.GPU_FAST_MATH,
            "single_pass": tuning.SINGLE_PASS, "dependent_launch": tuning.DEPENDENT_LAUNCH}


@dataclass(frozen=True)
class Measured:
    """One thing a section ran at: read back from its data, and the code's value now."""

    section: str
    what: str
    recorded: Callable[[dict], object]
    code: Callable[[], object]


def _pairs(values) -> list:
    return sorted({tuple(v) for v in values})


MEASURED = (
    Measured("kernel", "shapes (rows, vocab)", lambda d: _pairs((e["rows"], e["vocab"]) for e in d["sizes"]),
             lambda: _pairs(product(sizes.ROWS, sizes.VOCABS))),
    Measured("sweep", "launch configurations (block, warps)",
             lambda d: _pairs((c["block_v"], c["num_warps"]) for c in d["configs"]),
             lambda: _pairs(sizes.SWEEP_CONFIGS)),
    Measured("sweep", "shapes (rows, vocab)", lambda d: _pairs((c["rows"], c["vocab"]) for c in d["configs"]),
             lambda: _pairs(sizes.SWEEP_SHAPES)),
    Measured("torch_natural", "rows", lambda d: sorted(d["rows"]), lambda: sorted(sizes.NATURAL_ROWS)),
    Measured("graphs", "capture sizes", lambda d: sorted(d["capture_sizes"]), lambda: sorted(sizes.TOY_CAPTURE_SIZES)),
    Measured("staircase_toy", "capture sizes", lambda d: sorted(d["capture_sizes"]),
             lambda: sorted(sizes.TOY_CAPTURE_SIZES)),
    Measured("staircase_kernel", "capture sizes", lambda d: sorted(d["capture_sizes"]),
             lambda: sorted(sizes.KERNEL_SIZES)),
    Measured("staircase_kernel", "vocabulary", lambda d: d["vocab"], lambda: sizes.REAL_VOCAB),
    Measured("peers", "shapes (rows, vocab)", lambda d: _pairs(d["shapes"]), lambda: _pairs(sizes.PEER_SHAPES)),
)


def measure_again(section: str) -> str:
    """The commands that measure `section` again and take it into the record."""
    return (f"on a machine with an NVIDIA GPU, `python -m labkit gpu --out DIR --sections {section}`, then here "
            f"`python -m labkit record merge DIR/gpu_benchmarks.json --sections {section}` and `make refresh`")


def stale(record: dict, name: str | Path = records.GPU) -> list[str]:
    """A line per section of `record` (whose file is `name`) that was measured with other launch
    defaults, sizes or shapes than the code has now; [] when every section describes the code."""
    name = Path(name)
    shown = name.relative_to(records.paths.REPO) if name.is_relative_to(records.paths.REPO) else name
    stamps = record.get("section_provenance", {})
    now = kernel_defaults()
    found = []
    for section in record:
        stamp = stamps.get(section)
        if stamp is None or section in NOT_AT_THE_DEFAULTS:
            continue
        then = stamp.get("kernel_defaults") or {}
        differ = {k: (then[k], now[k]) for k in then if k in now and then[k] != now[k]}
        if differ:
            said = ", ".join(f"{k} {a} (the code now has {b})" for k, (a, b) in differ.items())
            found.append(f"{shown}, section {section}: measured with the kernel's launch defaults {said}; "
                         f"measure it again: {measure_again(section)}")
    for m in MEASURED:
        data = record.get(m.section)
        if not isinstance(data, dict) or "error" in data:
            continue
        then, code = m.recorded(data), m.code()
        if then != code:
            found.append(f"{shown}, section {m.section}: measured at {m.what} {then}; the code now measures at "
                         f"{code}; measure it again: {measure_again(m.section)}")
    return found


def unstamped(record: dict) -> list[str]:
    """The sections run at the kernel's launch defaults whose stamp does not say which (nothing to compare)."""
    stamps = record.get("section_provenance", {})
    return [s for s, stamp in stamps.items() if s in record and s not in NOT_AT_THE_DEFAULTS
            and not {"block_v", "num_warps"} <= set((stamp or {}).get("kernel_defaults") or {})]
