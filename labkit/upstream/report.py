"""The whole audit of one vLLM tree: where the code came from, the kernel's verdicts, the speculator's fill.

    audit_tree(path=None) -> TreeAudit     ``python -m labkit audit-vllm [--vllm PATH]`` runs this
    TreeAudit.lines() / .to_json()         the report in words / as JSON
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labkit import backends
from labkit.upstream.audit import KernelVerdict, audit_sampler, kit_sampler, vllm_sampler
from labkit.upstream.kernel_api import UnknownKernelApi, identify
from labkit.upstream.loader import KERNEL_FILE, find_tree, load_vllm_sampling, tree_provenance
from labkit.upstream.speculator_reading import SpeculatorReading, read_speculators

PROGRAM = "python -m labkit audit-vllm"


@dataclass
class TreeAudit:
    provenance: dict
    api: str | None
    kernel: KernelVerdict | None
    kernel_problem: str | None  # why the kernel was not run (an API the kit does not know)
    speculator: SpeculatorReading
    calibration: dict  # "unmasked" / "masked" -> the kit's own kernel's KernelVerdict in the same scenario

    @property
    def complete(self) -> bool:
        return self.kernel is not None

    def verdicts(self) -> dict:
        k = self.kernel
        return {"kernel_masks_padded_rows": None if k is None else k.masks_padded_rows,
                "stale_slots_still_corrupt": None if k is None else k.stale_slots_corrupt,
                "speculator_fills_padded_rows_with_minus_1": self.speculator.fills_padded_rows}

    def to_json(self) -> dict:
        import torch
        import triton

        return {"program": PROGRAM, "tree": self.provenance, "kernel_api": self.api,
                "kernel": None if self.kernel is None else self.kernel.to_json(),
                "kernel_problem": self.kernel_problem, "speculator": self.speculator.to_json(),
                "verdicts": self.verdicts(),
                "calibration": {name: v.to_json() for name, v in self.calibration.items()},
                "run": {"backend": backends.backend(), "torch": torch.__version__, "triton": triton.__version__}}

    def lines(self) -> list[str]:
        p = self.provenance
        commit = p.get("commit") or "unknown"
        head = [f"vLLM tree: {p['tree']}",
                f"version {p.get('version') or 'unknown'}, commit {commit} (from {p.get('commit_from')}); "
                f"{KERNEL_FILE} sha256 {p['kernel_sha256'][:16]}"]
        if p.get("fetched_from"):
            f = p["fetched_from"]
            head.append(f"files extracted from {f.get('wheel')} (sha256 {str(f.get('wheel_sha256'))[:16]})")
        body = self.kernel.lines() if self.kernel is not None else [f"kernel: not run: {self.kernel_problem}"]
        yes = {True: "yes", False: "no"}
        check = [f"the kit's {name} kernel in the same scenario: masks padded rows {yes[v.masks_padded_rows]}, "
                 f"stale slots corrupt {yes[v.stale_slots_corrupt]}" for name, v in self.calibration.items()]
        calibration = ["calibration (the scenario tells the two kinds apart):"] + [f"  {c}" for c in check]
        return head + body + self.speculator.lines() + (calibration if check else [])


def calibrate() -> dict[str, KernelVerdict]:
    """The kit's own kernel before and after the fix, in the same scenario on the same backend."""
    return {"unmasked": audit_sampler(kit_sampler(masked=False)), "masked": audit_sampler(kit_sampler(masked=True))}


def audit_tree(path: str | Path | None = None) -> TreeAudit:
    root = find_tree(path)
    provenance = tree_provenance(root)
    module = load_vllm_sampling(root)
    try:
        api = identify(module)
    except UnknownKernelApi as err:
        return TreeAudit(provenance, None, None, str(err), read_speculators(root), {})  # nothing to compare
    try:
        verdict = audit_sampler(vllm_sampler(module, api))
    except Exception as err:  # a kernel that matches a known signature but fails in the scenario
        problem = (f"gumbel_sample ({api.name} API) failed in the scenario: {type(err).__name__}: "
                   f"{str(err).splitlines()[0] if str(err) else ''}"[:500])
        return TreeAudit(provenance, api.name, None, problem, read_speculators(root), {})
    return TreeAudit(provenance, api.name, verdict, None, read_speculators(root), calibrate())
