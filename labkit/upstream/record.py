"""The audit of the pinned releases as a record: the GPU section ``upstream_audit`` and its CPU twin.

    audit_releases(trees) -> dict     every pinned release found under `trees`, audited on this backend
    python -m labkit upstream record  write CPU_RECORD (Triton's interpreter) from build/vllm-trees/
    python -m labkit upstream record --merge-gpu FILE
                                      take the section of a GPU run's record (``python -m labkit gpu
                                      --sections upstream_audit``) into labkit/data/gpu/h200.json
    load_cpu_record() -> dict | None  the committed CPU record
    verdict_table(section) -> str     one line per release: the three verdicts (notebook 06 prints it)
    case_lines(section) -> list[str]  per release, what the padded row holding -1 touched
    renderers() / DOC                 the ``<!-- upstream:verdicts -->`` block of docs/VLLM_MAP.md,
                                      rendered from the records (``make refresh`` rewrites it)

On the GPU box the same function runs compiled, as a section of ``python -m labkit gpu``
(:mod:`labkit.gpu.sections`), from the extracted files the caller carries (``build/vllm-trees/``
or ``LABKIT_VLLM_TREES``; the box has no network). Each release's entry keeps the tree's
provenance (version, commit, the wheel's sha256), so the record says which code it ran.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path

from labkit import paths, records
from labkit.upstream.fetch import TREES, cached
from labkit.upstream.releases import RELEASES

CPU_RECORD = records.CPU_UPSTREAM
TREES_ENV = "LABKIT_VLLM_TREES"


def trees_folder() -> Path:
    return Path(os.environ.get(TREES_ENV) or TREES)


def audit_releases(trees: Path | None = None) -> dict:
    """{"releases": {version: audit JSON or {"error": ...}}, "trees": folder} for every pinned release."""
    from labkit.upstream.report import audit_tree

    folder = Path(trees) if trees is not None else trees_folder()
    out: dict = {"trees": str(folder), "releases": {}}
    for version in RELEASES:
        tree = cached(version, folder)
        if tree is None:
            out["releases"][version] = {"error": f"no extracted files of vllm=={version} under {folder}: run "
                                                 f"`python -m labkit upstream fetch` where the registry is "
                                                 f"reachable and carry {folder.name}/"}
            continue
        out["releases"][version] = audit_tree(tree).to_json()
    return out


def write_cpu_record(path: Path = CPU_RECORD, trees: Path | None = None) -> Path:
    import torch
    import triton

    from labkit import backends

    if not backends.KERNELS_INTERPRETED:
        raise SystemExit("the CPU record is the interpreter's: run with LABKIT_BACKEND=interpreter on a CPU")
    data = audit_releases(trees)
    data["trees"] = "build/vllm-trees"  # where the files were, relative to the kit (not this machine's path)
    for entry in data["releases"].values():
        if "tree" in entry:
            entry["tree"]["tree"] = "build/vllm-trees/" + Path(entry["tree"]["tree"]).name
    record = {"provenance": {"device": "cpu (Triton's interpreter)", "torch": torch.__version__,
                             "triton": triton.__version__, "python": platform.python_version(),
                             "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                             "command": "LABKIT_BACKEND=interpreter python -m labkit upstream record"},
              "upstream_audit": data}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load_cpu_record(path: Path = CPU_RECORD) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def verdict_table(section: dict | None) -> str:
    """The verdicts per release of an ``upstream_audit`` section, one line each."""
    if not section:
        return "no audit recorded"
    yes = {True: "yes", False: "no", None: "n/a"}
    lines = [f"{'vLLM':<8} {'commit':<11} {'kernel API':<17} {'masks padded rows':<18} "
             f"{'stale slots corrupt':<20} {'speculator fills -1':<19} run"]
    for version, entry in section["releases"].items():
        if "error" in entry:
            lines.append(f"{version:<8} {entry['error']}")
            continue
        v, tree = entry["verdicts"], entry["tree"]
        run = entry["kernel"]["backend"] if entry.get("kernel") else "not run"
        lines.append(f"{version:<8} {str(tree.get('commit')):<11} {str(entry['kernel_api']):<17} "
                     f"{yes[v['kernel_masks_padded_rows']]:<18} {yes[v['stale_slots_still_corrupt']]:<20} "
                     f"{yes[v['speculator_fills_padded_rows_with_minus_1']]:<19} {run}")
    return "\n".join(lines)


def case_lines(section: dict) -> list[str]:
    """Per release: what the padded row holding -1 touched outside the buffers, and what the row
    holding a live slot overwrote (the stale case's first poison), from an ``upstream_audit`` section."""
    out = []
    for version, entry in section["releases"].items():
        kernel = entry.get("kernel")
        if not kernel:
            out.append(f"vLLM {version}: {entry.get('error') or entry.get('kernel_problem')}")
            continue
        out.append(f"vLLM {version} ({kernel['backend']}):")
        out += [f"  slot -1: {s}" for s in kernel["filled"]["sentences"]] or \
            ["  slot -1: nothing outside the buffers, no live record changed"]
        out += [f"  live slot: {s}" for s in kernel["stale"]["sentences"] if "[poison stale" in s]
    return out


GPU_RECORD = records.GPU
DOC = paths.DOCS / "VLLM_MAP.md"


def gpu_section() -> dict | None:
    """The compiled run's section of the kit's GPU record, if one was recorded."""
    from labkit.viz.gpu_records import load_record, upstream_audit

    return upstream_audit(load_record())


def render_verdicts() -> str:
    cpu = load_cpu_record()
    parts = []
    if cpu:
        p = cpu["provenance"]
        parts.append(f"On the CPU ({p['device']}, torch {p['torch']}, Triton {p['triton']}, {p['date'][:10]}):\n\n"
                     "```\n" + verdict_table(cpu["upstream_audit"]) + "\n```")
    gpu = gpu_section()
    if gpu:
        p = gpu["provenance"] or {}
        parts.append(f"Compiled ({p.get('device')}, torch {p.get('torch')}, Triton {p.get('triton')}, "
                     f"{str(p.get('date'))[:10]}):\n\n```\n" + verdict_table(gpu) + "\n```")
    else:
        parts.append("Compiled on a GPU: not recorded yet (`labkit/upstream/gpu_audit.sh`).")
    return "\n\n".join(parts)


def renderers() -> dict:
    return {"upstream:verdicts": render_verdicts}


def merge_gpu_run(run_file: Path, into: Path = GPU_RECORD) -> Path:
    """Put the ``upstream_audit`` section of a GPU run's record into the kit's GPU record
    (:func:`labkit.records.merge_run`), once it holds every pinned release."""
    new = records.read(run_file)
    section = new.get("upstream_audit")
    if not isinstance(section, dict) or "error" in section:
        raise SystemExit(f"{run_file} has no usable upstream_audit section: {section!r:.300}")
    failed = [v for v, entry in section.get("releases", {}).items() if "error" in entry]
    if failed:
        raise SystemExit(f"{run_file}: the run found no files for {', '.join(failed)} (carry build/vllm-trees/)")
    records.merge_run(run_file, into, ["upstream_audit"], "audit-vllm run again")
    return into


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m labkit upstream record", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="?", default=None, help="the extracted release files (default: "
                        f"${TREES_ENV} or build/vllm-trees)")
    parser.add_argument("--merge-gpu", metavar="FILE", default=None,
                        help="a GPU run's gpu_benchmarks.json to merge into labkit/data/gpu/h200.json")
    args = parser.parse_args(argv)
    if args.merge_gpu:
        print(f"merged the upstream_audit section into {merge_gpu_run(Path(args.merge_gpu))}")
    else:
        print(write_cpu_record(trees=Path(args.trees) if args.trees else None))
    print("now render what reads it (docs/VLLM_MAP.md, notebook 06): make refresh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
