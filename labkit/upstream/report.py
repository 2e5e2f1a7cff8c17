"""The whole audit of one vLLM tree, and its one verdict: is this tree affected by PR #47066?

    audit_tree(path=None) -> TreeAudit     ``python -m labkit audit-vllm [--vllm PATH]`` runs this
    TreeAudit.verdict() -> (word, why)      affected / not affected / not applicable / could not audit
    TreeAudit.lines() / .to_json()         the report in words (the verdict first) / as JSON

The PR's fix has three parts, and the verdict weighs each, with the file and line it stands on:

    kernel     vLLM's own sampling kernel, run in the kit's scenario (:mod:`labkit.upstream.audit`):
               does it store q by slot at all, and does it mask the loads and the store of a padded row
               (docs/VLLM_MAP.md says how, after the exercises)? A kernel that stores nothing by slot
               cannot have the bug: not applicable.
    host fill  the speculator's host step that writes ``idx_mapping``, run on a padded batch
               (:mod:`labkit.upstream.host_step_run`): does the padded row hold what the fix writes
               when the graph replays, and does the step run before every replay?
    DFlash     the DFlash drafter's input preparation, run in the kit's scenario
               (:mod:`labkit.upstream.dflash_run`; its source read where it cannot run,
               :mod:`labkit.upstream.dflash_reading`): are the padded rows of its per-sample mapping
               the fix's pad, a constant slot (0 is slot 0), or left stale?

Affected: the kernel stores by slot and a padded row can still name a live slot (no host fill: a
stale slot passes any mask) or the fill reaches an unmasked kernel (the fill without the mask: out of
bounds), or DFlash's padded sample rows name a slot. Not affected: the kernel masks, the host fills, DFlash (if any)
pads as the fix does, each shown by a run or a form the kit recognizes exactly (:data:`RULE`). A part
that cannot be shown, and no other part that settles it, is "could not audit: PART: WHY".
The exit status is a linter's: 0 not affected or not applicable, 1 affected, 2 could not audit.

The kernel's run also says "the kernel alone, given a stale slot, overwrites a live q: yes" for every
kernel that stores by slot,
the fixed ones too: a stale slot is a valid slot, so no mask can tell it from a live one. That is
why the host fill is a part of the fix, not a sign that the kernel is wrong.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from labkit import backends
from labkit.errors import LabkitInputError
from labkit.upstream.audit import KernelVerdict, audit_sampler, kit_sampler, vllm_sampler
from labkit.upstream.dflash_run import DFlashAudit, audit_dflash, overwrites_a_slot
from labkit.upstream.host_step_run import HostFillAudit, audit_host_fill
from labkit.upstream.kernel_api import KernelPlan, NoSlotStore, UnknownKernelApi, plan
from labkit.upstream.loader import (
    KERNEL_FILE,
    NoModelRunnerV2,
    find_tree,
    load_vllm_sampling,
    parse,
    tree_provenance,
)

PROGRAM = "python -m labkit audit-vllm"
# The rule every verdict keeps, in the command's help and in docs/VLLM_MAP.md.
RULE = ('"Not affected" is said only where it was shown: each part (the sampling kernel\'s store and loads, the '
        "host fill of idx_mapping and when it runs under graphs, DFlash's padded sample rows as the sampler reads "
        "them) is run in the kit's scenario or read in a form the kit recognizes exactly, and anything else is "
        '"could not audit: PART: WHY" with exit status 2.')
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


LABELS = {"kernel": "kernel", "host_fill": "host fill", "dflash_pad": "DFlash"}
_UNKNOWN_PREFIXES = ("the sampling kernel could not be run: ", "the host fill could not be judged: ",
                     "DFlash's padded sample rows could not be judged: ", "could not audit: ")


def _why_unknown(says: str) -> str:
    """A part's reason, without the words that name the part (the verdict names it: "could not audit: PART: WHY")."""
    changed = True
    while changed:
        changed = False
        for prefix in _UNKNOWN_PREFIXES:
            if says.startswith(prefix):
                says, changed = says.removeprefix(prefix), True
    return says


@dataclass
class TreeAudit:
    provenance: dict
    api: KernelPlan | None
    kernel: KernelVerdict | None  # the run in the scenario (None: not run)
    kernel_problem: str | None  # why it was not run: no slot store, an unknown API, a file that does not load
    no_slot_store: bool
    speculator: HostFillAudit
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
        if self.kernel.skips_live_rows:
            return {"state": "skips live rows", "evidence": self.q_stores,
                    "says": f"the kernel's mask skips a live row as well as a row whose slot is -1 ({where}: "
                            f"{self.kernel.filled.live_records_unstored[0]} was never stored), so that request's q "
                            "is stale"}
        if self.kernel.masks_padded_rows:
            return {"state": "masked", "evidence": self.q_stores,
                    "says": f"the kernel skips a row whose slot is -1 (its q store: {where})"}
        touched = "; ".join(self.kernel.filled.sentences[:2])
        return {"state": "unmasked", "evidence": self.q_stores,
                "says": f"the kernel stores q by slot and does not skip a row whose slot is -1 ({where}: {touched})"}

    def _seen_outside(self) -> str:
        """What the run saw a padded row holding -1 do, in words: read or write out of bounds (which buffers),
        overwrite a live record."""
        filled = self.kernel.filled
        kinds = {"load": set(), "store": set(), "access": set()}
        for a in filled.out_of_bounds:
            kinds.setdefault(a["kind"], set()).add(a["buffer"])
        said = []
        if kinds["load"]:
            said.append(f"reads out of bounds ({', '.join(sorted(kinds['load']))})")
        if kinds["store"]:
            said.append(f"writes out of bounds ({', '.join(sorted(kinds['store']))})")
        if kinds["access"]:
            said.append("touches memory outside every buffer")
        if filled.live_records_changed:
            said.append(f"overwrites a live slot's record ({filled.live_records_changed[0]})")
        return " and ".join(said) or "changes what a live row gets"

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
            reasons.append("the padded rows hold -1 but " + parts["kernel"]["says"]
                           + f": the fill without the mask {self._seen_outside()}")
        if kernel == "skips live rows":
            reasons.append(parts["kernel"]["says"])
        if kernel in ("masked", "unmasked") and overwrites_a_slot(dflash):
            reasons.append(parts["dflash_pad"]["says"])
        if reasons:
            return AFFECTED, "; ".join(reasons)
        unknown = [f"{LABELS[k]}: {_why_unknown(parts[k]['says'])}" for k in ("kernel", "host_fill", "dflash_pad")
                   if parts[k]["state"] == "unknown"]
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
                f"version {p.get('version') or 'unknown'}"
                f"{' (' + p['version_problem'] + ')' if p.get('version_problem') else ''}, commit {commit} "
                f"(from {p.get('commit_from')}); "
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


_KERNEL_VERDICTS: dict = {}


def _kernel_verdict(module, api: KernelPlan) -> KernelVerdict:
    """The kernel's run in the scenario, once per loaded module (one per content of the kernel file and the
    files it imports) and backend: trees that differ elsewhere share it."""
    key = (module, api, backends.KERNELS_INTERPRETED)
    if key not in _KERNEL_VERDICTS:
        _KERNEL_VERDICTS[key] = audit_sampler(vllm_sampler(module, api))
    return _KERNEL_VERDICTS[key]


def audit_tree(path: str | Path | None = None) -> TreeAudit:
    """Every part of one tree. Only a path that is no vLLM tree raises (NoVllmTree, one line); anything
    else that goes wrong becomes a part the report says it could not judge."""
    root = find_tree(path)
    provenance = tree_provenance(root)
    speculator, dflash, q_stores = audit_host_fill(root), audit_dflash(root), q_store_sites(root)

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
        verdict = _kernel_verdict(module, api)
    except Exception as err:  # noqa: BLE001 - a kernel that fails in the scenario: said, never raised
        problem = (f"gumbel_sample ({api.name}) failed in the scenario: {type(err).__name__}: "
                   f"{str(err).splitlines()[0] if str(err) else ''}")[:500]
        return audit(api, None, problem)
    return audit(api, verdict, None, calibration=calibrate())


# -- the command -----------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    """``python -m labkit audit-vllm``'s arguments and help."""
    parser.description = (
        "Is a vLLM tree affected by PR #47066? The first line says: affected, not affected, not applicable (no Model "
        "Runner V2 sampler, or one that stores nothing by slot) or could not audit, and why. It runs the tree's own "
        "sampling kernel (vllm/v1/worker/gpu/sample/gumbel.py, with what it imports from vLLM, never vLLM itself) "
        "with a padded row holding a live slot and one holding -1, guard memory around every slot-indexed buffer; "
        "runs the speculator's host fill of idx_mapping and DFlash's input preparation on a padded batch; and reads "
        "what the runs cannot show (when the host fill runs, other writes of the same buffers). " + RULE)
    parser.epilog = ("Exit status: 0 not affected or not applicable, 1 affected, 2 could not audit (one line says "
                     "what is missing).")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--vllm", default=None, metavar="PATH",
                       help="a vLLM source tree, installation (site-packages or its vllm/ folder) or a folder of "
                            "release files (default: the installed vllm)")
    where.add_argument("--release", default=None, metavar="VERSION",
                       help="a release from the package index: its few files are read into build/vllm-trees/ (or "
                            "$LABKIT_VLLM_TREES)")
    parser.add_argument("--json", action="store_true", help="print the verdict and each part's evidence as JSON")
    parser.add_argument("--backend", choices=("auto", "interpreter", "triton"), default="auto",
                        help="'interpreter' (Triton's CPU interpreter: every access seen), 'triton' (compiled for a "
                             "CUDA GPU); 'auto' (default): 'triton' with a CUDA GPU, else 'interpreter'")


def _short(word: str, why: str, args, tree=None) -> None:
    if args.json:
        print(json.dumps({"program": PROGRAM, "verdict": word, "why": why, "exit_status": EXIT_STATUS[word],
                          "parts": None, "tree": None if tree is None else {"tree": str(tree)}}, indent=1))
    else:
        print(f"{PR}: {word}: {why}")


def run_command(args) -> int:
    """The command: one verdict, its report, its exit status. A refusal (no tree, a release the index lacks) is
    one line on stderr (raised to the command line's handler) and, under --json, JSON on stdout too."""
    from labkit.upstream.fetch import trees_folder

    try:
        tree = args.vllm
        if args.release:
            from labkit.upstream.fetch import fetch_release

            tree = fetch_release(args.release, trees_folder(), log=lambda m: print(m, file=sys.stderr))
        result = audit_tree(tree)
    except NoModelRunnerV2 as err:
        _short(NOT_APPLICABLE, f"no Model Runner V2 sampler ({err.tree} has no vllm/v1/worker/gpu/, where the "
                               "padded-row bug lives)", args, err.tree)
        return EXIT_STATUS[NOT_APPLICABLE]
    except LabkitInputError as err:
        if args.json:
            _short(UNKNOWN, str(err).splitlines()[0], args)
        raise
    print(json.dumps(result.to_json(), indent=1) if args.json else "\n".join(result.lines()))
    return result.exit_status
