"""The whole audit of one vLLM tree, and its one verdict: is this tree affected by PR #47066?

    audit_tree(path=None) -> TreeAudit     ``python -m labkit audit-vllm [--vllm PATH]`` runs this
    TreeAudit.verdict() -> (word, why)      affected / not affected / not applicable / could not audit
    TreeAudit.lines() / .to_json()         the report in words (the verdict first) / as JSON

The PR's fix has three parts, and the verdict weighs each, with the file and line it stands on:

    kernel     vLLM's own sampling kernel, run in the kit's scenario (:mod:`labkit.upstream.audit`):
               does it store q by slot at all, and does it mask the loads and the store of a padded row
               (docs/VLLM_MAP.md says how, after the exercises)? A kernel that stores nothing by slot
               cannot have the bug: not applicable.
    host fill  the speculator's source, read (:mod:`labkit.upstream.speculator_reading`): are the
               padded rows of ``idx_mapping`` filled as the fix fills them before the launch, and when?
    DFlash     the DFlash drafter's input preparation, run in the kit's scenario
               (:mod:`labkit.upstream.dflash_run`; its source read where it cannot run,
               :mod:`labkit.upstream.dflash_reading`): are the padded rows of its per-sample mapping
               the fix's pad, a constant slot (0 is slot 0), or left stale?

Affected: the kernel stores by slot and a padded row can still name a live slot (no host fill: a
stale slot passes any mask) or the fill reaches an unmasked kernel (the fill without the mask: out of
bounds), or DFlash's padded sample rows name a slot. Not affected: the kernel masks, the host fills, DFlash (if any)
pads as the fix does. A part that cannot be judged, and no other part that settles it, is "could not audit".
The exit status is a linter's: 0 not affected or not applicable, 1 affected, 2 could not audit.

The kernel's run also says "the kernel alone, given a stale slot, overwrites a live q: yes" for every
kernel that stores by slot,
the fixed ones too: a stale slot is a valid slot, so no mask can tell it from a live one. That is
why the host fill is a part of the fix, not a sign that the kernel is wrong.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from labkit import backends
from labkit.errors import LabkitInputError
from labkit.upstream.audit import KernelVerdict, audit_sampler, kit_sampler, vllm_sampler
from labkit.upstream.dflash_run import DFlashAudit, audit_dflash, overwrites_a_slot
from labkit.upstream.kernel_api import KernelPlan, NoSlotStore, UnknownKernelApi, plan
from labkit.upstream.loader import KERNEL_FILE, find_tree, load_vllm_sampling, parse, tree_provenance
from labkit.upstream.speculator_reading import SpeculatorReading, read_speculators

PROGRAM = "python -m labkit audit-vllm"
PR = "vLLM PR #47066"
AFFECTED, NOT_AFFECTED, NOT_APPLICABLE, UNKNOWN = "affected", "not affected", "not applicable", "could not audit"
EXIT_STATUS = {NOT_AFFECTED: 0, NOT_APPLICABLE: 0, AFFECTED: 1, UNKNOWN: 2}
# What the q store's pointer is called in the kernels of the releases the kit has read.
Q_POINTERS = ("processed_logits", "logits_cache")


def q_store_sites(tree: Path) -> list[dict]:
    """The kernel file's stores into q (its slot-indexed output): file, line, code and mask, read with ast."""
    try:
        module = parse(tree / KERNEL_FILE)
    except LabkitInputError:
        return []
    sites = []
    for node in ast.walk(module):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "store"
                and node.args and any(p in ast.unparse(node.args[0]) and "source" not in ast.unparse(node.args[0])
                                      for p in Q_POINTERS)):
            mask = next((ast.unparse(k.value) for k in node.keywords if k.arg == "mask"), None)
            sites.append({"file": KERNEL_FILE, "line": node.lineno, "code": ast.unparse(node), "mask": mask})
    return sites


@dataclass
class TreeAudit:
    provenance: dict
    api: KernelPlan | None
    kernel: KernelVerdict | None  # the run in the scenario (None: not run)
    kernel_problem: str | None  # why it was not run: no slot store, an unknown API, a file that does not load
    no_slot_store: bool
    speculator: SpeculatorReading
    dflash: DFlashAudit
    q_stores: list[dict]
    calibration: dict  # "unmasked" / "masked" -> the kit's own kernel's KernelVerdict in the same scenario

    @property
    def complete(self) -> bool:
        return self.verdict()[0] != UNKNOWN

    # -- the parts ---------------------------------------------------------------------------------------

    def kernel_part(self) -> dict:
        where = ", ".join(f"{s['file']}:{s['line']}" for s in self.q_stores) or KERNEL_FILE
        if self.no_slot_store:
            return {"state": "no slot store", "evidence": self.q_stores,
                    "says": f"the sampling kernel stores nothing by slot ({self.kernel_problem})"}
        if self.kernel is None:
            return {"state": "unknown", "evidence": self.q_stores,
                    "says": f"the sampling kernel could not be run: {self.kernel_problem}"}
        if self.kernel.masks_padded_rows:
            return {"state": "masked", "evidence": self.q_stores,
                    "says": f"the kernel skips a row whose slot is -1 (its q store: {where})"}
        touched = "; ".join(self.kernel.filled.sentences[:2])
        return {"state": "unmasked", "evidence": self.q_stores,
                "says": f"the kernel stores q by slot and does not skip a row whose slot is -1 ({where}: {touched})"}

    def parts(self) -> dict:
        return {"kernel": self.kernel_part(), "host_fill": self.speculator.part(), "dflash_pad": self.dflash.part()}

    def verdict(self) -> tuple[str, str]:
        """(affected | not affected | not applicable | could not audit, why in one sentence)."""
        parts = self.parts()
        kernel, host, dflash = (parts[k]["state"] for k in ("kernel", "host_fill", "dflash_pad"))
        if kernel == "no slot store":
            return NOT_APPLICABLE, parts["kernel"]["says"] + ": no padded row can overwrite a live request's q"
        reasons = []
        if kernel in ("masked", "unmasked") and host == "no fill":
            extra = (": a padded row holding a stale slot passes the kernel's mask" if kernel == "masked" else
                     ", and the kernel does not skip padded rows")
            reasons.append(parts["host_fill"]["says"] + extra)
        if kernel == "unmasked" and host == "fills":
            reasons.append("the padded rows hold -1 but " + parts["kernel"]["says"].removeprefix("the ")
                           + ": the fill without the mask reads and writes out of bounds")
        if kernel in ("masked", "unmasked") and overwrites_a_slot(dflash):
            reasons.append(parts["dflash_pad"]["says"])
        if reasons:
            return AFFECTED, "; ".join(reasons)
        unknown = [parts[k]["says"] for k in ("kernel", "host_fill", "dflash_pad") if parts[k]["state"] == "unknown"]
        if unknown:
            return UNKNOWN, "; ".join(unknown)
        dflash_words = ("it has no DFlash drafter" if dflash == "absent" else parts["dflash_pad"]["says"])
        return NOT_AFFECTED, f"{parts['kernel']['says']}; {parts['host_fill']['says']}; {dflash_words}"

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict()[0]]

    # -- the report ---------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        import torch

        word, why = self.verdict()
        triton = None
        if backends.HAS_TRITON:
            import triton as _triton

            triton = _triton.__version__
        return {"program": PROGRAM, "verdict": word, "why": why, "exit_status": EXIT_STATUS[word],
                "parts": self.parts(), "tree": self.provenance,
                "kernel_api": None if self.api is None else self.api.name,
                "kernel_signature": None if self.api is None else self.api.signature,
                "kernel": None if self.kernel is None else self.kernel.to_json(),
                "kernel_problem": self.kernel_problem, "speculator": self.speculator.to_json(),
                "dflash": self.dflash.to_json(),
                "calibration": {name: v.to_json() for name, v in self.calibration.items()},
                "run": {"backend": backends.backend(), "torch": torch.__version__, "triton": triton}}

    def lines(self) -> list[str]:
        word, why = self.verdict()
        p = self.provenance
        commit = p.get("commit") or "unknown"
        head = [f"{PR}: {word}: {why}",
                f"vLLM tree: {p['tree']}",
                f"version {p.get('version') or 'unknown'}, commit {commit} (from {p.get('commit_from')}); "
                f"{KERNEL_FILE} sha256 {str(p.get('kernel_sha256'))[:16]}"]
        if p.get("fetched_from"):
            f = p["fetched_from"]
            head.append(f"files read from {f.get('wheel')} (uploaded {f.get('uploaded')}, sha256 listed "
                        f"{str(f.get('wheel_sha256_listed'))[:16]})")
        body = self.kernel.lines() if self.kernel is not None else [f"kernel: not run: {self.kernel_problem}"]
        yes = {True: "yes", False: "no"}
        check = [f"the kit's {name} kernel in the same scenario: masks padded rows {yes[v.masks_padded_rows]}, "
                 f"given a stale slot overwrites a live q {yes[v.stale_slots_corrupt]}"
                 for name, v in self.calibration.items()]
        calibration = ["calibration (the scenario tells the two kinds apart):"] + [f"  {c}" for c in check]
        return (head + body + self.speculator.lines() + self.dflash.lines() + (calibration if check else [])
                + [f"verdict: {word} (exit status {EXIT_STATUS[word]})"])


@functools.lru_cache(maxsize=2)
def _calibration(backend: str) -> dict[str, KernelVerdict]:
    return {"unmasked": audit_sampler(kit_sampler(masked=False)), "masked": audit_sampler(kit_sampler(masked=True))}


def calibrate() -> dict[str, KernelVerdict]:
    """The kit's own kernel before and after the fix, in the same scenario on the same backend (once per
    process and backend: a release matrix audits many trees)."""
    return _calibration("interpreter" if backends.KERNELS_INTERPRETED else "compiled")


def audit_tree(path: str | Path | None = None) -> TreeAudit:
    """Every part of one tree. Only a path that is no vLLM tree raises (NoVllmTree, one line); anything
    else that goes wrong becomes a part the report says it could not judge."""
    root = find_tree(path)
    provenance = tree_provenance(root)
    speculator, dflash, q_stores = read_speculators(root), audit_dflash(root), q_store_sites(root)

    def audit(api, kernel, problem, no_store=False, calibration=None):
        return TreeAudit(provenance, api, kernel, problem, no_store, speculator, dflash, q_stores, calibration or {})

    try:
        module = load_vllm_sampling(root)
        api = plan(module)
    except NoSlotStore as err:
        return audit(None, None, str(err), no_store=True)
    except (UnknownKernelApi, LabkitInputError) as err:
        return audit(None, None, str(err).splitlines()[0])
    except Exception as err:  # noqa: BLE001 - a file the kit cannot load: said in the report, never raised
        return audit(None, None, f"{KERNEL_FILE} did not load: {type(err).__name__}: {str(err).splitlines()[0]}"[:500])
    try:
        verdict = audit_sampler(vllm_sampler(module, api))
    except Exception as err:  # noqa: BLE001 - a kernel that fails in the scenario: said, never raised
        problem = (f"gumbel_sample ({api.name}) failed in the scenario: {type(err).__name__}: "
                   f"{str(err).splitlines()[0] if str(err) else ''}")[:500]
        return audit(api, None, problem)
    return audit(api, verdict, None, calibration=calibrate())
