"""The release matrix: every vLLM release from the first with Model Runner V2's sampling kernel to the newest
on the index, audited, as a record; and its rendering.

    python -m labkit upstream matrix [--record] [--releases A,B]   fetch and audit, print (and record) it
    audit_releases(trees, versions) -> dict     one section: each release's verdict, parts and evidence
    load_cpu_record() -> dict | None            the committed record (Triton's interpreter)
    matrix_table(section) -> str                a line per release: the verdict first, then each part
    render_matrix() / renderers()               the ``<!-- upstream:matrix -->`` block of docs/VLLM_MAP.md

The CPU record (``labkit/data/cpu/upstream_audit.json``) is written by ``python -m labkit upstream
matrix --record`` under ``LABKIT_BACKEND=interpreter``: every release's few files read from the
index (:mod:`labkit.upstream.fetch`), then the whole audit (:mod:`labkit.upstream.report`). On the
GPU box, which has no network, the same audit runs compiled as a section of ``python -m labkit gpu``
(:mod:`labkit.gpu.sections`) over the trees carried in ``build/vllm-trees/`` (or
``LABKIT_VLLM_TREES``), and ``python -m labkit record merge`` takes it into the GPU record.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
import textwrap
import time
from pathlib import Path

from labkit import records
from labkit.upstream.fetch import (
    TREES_ENV,
    FetchError,
    audited_releases,
    cached,
    fetch_release,
    index_releases,
    trees_folder,
)

CPU_RECORD = records.CPU_UPSTREAM
DOC = records.paths.DOCS / "VLLM_MAP.md"


def _entry(tree: Path) -> dict:
    """One release's row of the matrix: the verdict, each part with its evidence, and where the files came from."""
    from labkit.upstream.report import audit_tree

    audit = audit_tree(tree)
    word, why = audit.verdict()
    fetched = audit.provenance.get("fetched_from") or {}
    return {"verdict": word, "why": why, "parts": audit.parts(),
            "kernel_api": None if audit.api is None else audit.api.name,
            "backend": None if audit.kernel is None else audit.kernel.backend,
            "commit": audit.provenance.get("commit"), "uploaded": fetched.get("uploaded"),
            "wheel": fetched.get("wheel"), "wheel_sha256_listed": fetched.get("wheel_sha256_listed"),
            "report": audit.lines()[2:]}  # the whole report but its verdict and this machine's path


def audit_releases(trees: Path | None = None, versions=None, log=None) -> dict:
    """{"releases": {version: entry or {"error": ...}}, "trees": folder}: the releases already in `trees`
    (default: every one there), audited on this process's backend."""
    folder = Path(trees) if trees is not None else trees_folder()
    if versions is None:
        versions = sorted((p.name for p in folder.iterdir() if cached(p.name, folder)),
                          key=lambda v: tuple(int(x) for x in v.split("."))) if folder.is_dir() else []
    out: dict = {"trees": str(folder), "releases": {}}
    for version in versions:
        tree = cached(version, folder)
        if tree is None:
            out["releases"][version] = {"error": f"no files of vllm=={version} under {folder}: run `python -m labkit "
                                                 f"upstream fetch {version}` where the index is reachable and carry "
                                                 f"{folder.name}/"}
            continue
        start = time.monotonic()
        out["releases"][version] = _entry(tree)
        if log:
            entry = out["releases"][version]
            log(f"{version}: {entry['verdict']} ({time.monotonic() - start:.0f} s)")
    return out


def matrix(trees: Path | None = None, versions=None, log=None) -> dict:
    """Fetch (where missing) and audit every release from the first with the sampling kernel to the newest."""
    folder = Path(trees) if trees is not None else trees_folder()
    known = index_releases()
    wanted = list(versions) if versions else [r.version for r in audited_releases(known)]
    for version in wanted:
        fetch_release(version, folder, releases=known, log=log)
    section = audit_releases(folder, wanted, log=log)
    section["index"] = {"releases_from_first_kernel": [r.version for r in audited_releases(known)],
                        "newest": known[-1].version if known else None}
    return section


def write_cpu_record(section: dict, seconds: float, path: Path = CPU_RECORD) -> Path:
    import torch
    import triton

    from labkit import backends

    if not backends.KERNELS_INTERPRETED:
        raise SystemExit("the CPU record is the interpreter's: run with LABKIT_BACKEND=interpreter on a CPU")
    section = dict(section, trees="build/vllm-trees")  # where the files were, relative to the kit
    record = {"provenance": {"device": "cpu (Triton's interpreter)", "torch": torch.__version__,
                             "triton": triton.__version__, "python": platform.python_version(),
                             "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                             "command": "LABKIT_BACKEND=interpreter python -m labkit upstream matrix --record",
                             "seconds": round(seconds), **records.kit_commit()},
              "upstream_audit": section}
    records.write(path, record)
    return path


def load_cpu_record(path: Path = CPU_RECORD) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


# What each word of the matrix means: printed under the table, so a reader need not guess why two
# rows say different things.
_LEGEND = (
    ("masks -1", "the kernel, run with a padded row holding -1, touched nothing outside its buffers"),
    ("unmasked", "that run read or wrote slot -1 (outside the buffers)"),
    ("-1", "the run of the host step (or of DFlash's preparation) left -1 in the padded rows at replay"),
    ("none", "nothing writes the padded rows of idx_mapping: they keep a live request's stale slot"),
    ("slot N", "a padded row holds slot N, so it stores its q over that request's"),
    ("n/a", "not weighed: the kernel stores nothing by slot, so no padded row can overwrite a live q"),
    ("not judged", "the part could not be shown (the report says why; the verdict is then could not audit)"),
)


def _part_word(part: dict) -> str:
    state = part["state"]
    words = {"no slot store": "stores nothing by slot", "masked": "masks -1", "unmasked": "unmasked",
             "skips live rows": "skips live rows",
             "fills": "-1", "no fill": "none", "absent": "no DFlash", "pads -1": "-1", "unknown": "not judged"}
    if state in words:
        return words[state]
    for prefix, word in (("pads slot ", "slot "), ("keeps stale slot ", "stale slot "), ("pads ", "")):
        if state.startswith(prefix):
            return word + state.removeprefix(prefix)
    return "?"


def _weighed(parts: dict, name: str) -> str:
    """A part's word, or n/a where the verdict does not weigh it (a kernel that stores nothing by slot)."""
    if parts["kernel"]["state"] == "no slot store" and name != "kernel":
        return "n/a"
    return _part_word(parts[name])


def matrix_table(section: dict | None) -> str:
    """One line per release: the verdict first, then what decided it, part by part; then what the words mean."""
    if not section:
        return "no audit recorded"
    lines = [f"{'vLLM':<8} {'uploaded':<10} {'verdict':<15} {'kernel (q by slot)':<22} {'host fill':<10} DFlash pad"]
    shown = set()
    for version, entry in section["releases"].items():
        if "error" in entry:
            lines.append(f"{version:<8} {'':<10} {'could not audit':<15} {entry['error'][:80]}")
            continue
        kernel, host, dflash = (_weighed(entry["parts"], n) for n in ("kernel", "host_fill", "dflash_pad"))
        shown |= {kernel, host, dflash}
        lines.append(f"{version:<8} {str(entry.get('uploaded') or ''):<10} {entry['verdict']:<15} "
                     f"{kernel:<22} {host:<10} {dflash}")
    legend = [f"  {word:<10} {meaning}" for word, meaning in _LEGEND
              if word in shown or (word == "slot N" and any(w.startswith(("slot ", "stale slot ")) for w in shown))]
    return "\n".join(lines + (["", "words:"] + legend if legend else []))


def first_of(section: dict, verdict: str) -> str | None:
    return next((v for v, e in section["releases"].items() if e.get("verdict") == verdict), None)


def summary(section: dict) -> str:
    """Which releases are affected, from when to when, in words (the record's own dates)."""
    rel = section["releases"]
    affected = [v for v, e in rel.items() if e.get("verdict") == "affected"]
    fixed = [v for v, e in rel.items() if e.get("verdict") == "not affected"]
    na = [v for v, e in rel.items() if e.get("verdict") == "not applicable"]
    unknown = [v for v, e in rel.items() if "error" in e or e.get("verdict") == "could not audit"]
    words = []
    if na:
        words.append(f"{na[0]} to {na[-1]} store nothing by slot (not applicable)" if len(na) > 1 else
                     f"{na[0]} stores nothing by slot (not applicable)")
    if affected:
        words.append(f"{affected[0]} (uploaded {rel[affected[0]].get('uploaded')}) to {affected[-1]} (uploaded "
                     f"{rel[affected[-1]].get('uploaded')}) are affected" if len(affected) > 1 else
                     f"{affected[0]} is affected")
    if fixed:
        words.append(f"{fixed[0]} (uploaded {rel[fixed[0]].get('uploaded')}) to {fixed[-1]} are not affected"
                     if len(fixed) > 1 else f"{fixed[0]} is not affected")
    if unknown:
        words.append(f"could not audit {', '.join(unknown)}")
    return "; ".join(words) + "."


def gpu_section() -> dict | None:
    """The compiled run's section of the kit's GPU record, if one was recorded."""
    from labkit.viz.gpu_records import load_record, upstream_audit

    return upstream_audit(load_record())


def render_matrix() -> str:
    cpu = load_cpu_record()
    parts = []
    if cpu:
        p, section = cpu["provenance"], cpu["upstream_audit"]
        newest = section.get("index", {}).get("newest")
        said = (f"Every release from the first with Model Runner V2's sampling kernel to the newest on the index "
                f"when it ran ({newest}), in Triton's CPU interpreter ({p['date'][:10]}, torch {p['torch']}, Triton "
                f"{p['triton']}; `{p['command']}`, {p.get('seconds', '?')} s): " + summary(section))
        parts.append(textwrap.fill(said, 100, break_long_words=False, break_on_hyphens=False)
                     + "\n\n```\n" + matrix_table(section) + "\n```")
    gpu = gpu_section()
    if gpu:
        p = gpu["provenance"] or {}
        given = len(gpu.get("releases", {}))
        parts.append(f"Compiled ({p.get('device')}, torch {p.get('torch')}, Triton {p.get('triton')}, "
                     f"{str(p.get('date'))[:10]}), the {given} releases whose files it was given:"
                     "\n\n```\n" + matrix_table(gpu) + "\n```")
    else:
        parts.append("Compiled on a GPU: not recorded yet (docs/MAINTAINING.md says how).")
    return "\n\n".join(parts)


def renderers() -> dict:
    return {"upstream:matrix": render_matrix}


def main(argv=None) -> int:
    import argparse

    from labkit import backends

    parser = argparse.ArgumentParser(prog="python -m labkit upstream matrix", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", default="", help="comma-separated releases (default: every one from the first "
                                                       "with the sampling kernel to the newest on the index)")
    parser.add_argument("--trees", default=None, help=f"where the releases' files are kept (default: ${TREES_ENV} "
                                                      "or build/vllm-trees)")
    parser.add_argument("--record", action="store_true", help=f"write {CPU_RECORD.relative_to(records.paths.REPO)} "
                                                              "(Triton's interpreter only)")
    args = parser.parse_args(argv)
    if not backends.HAS_TRITON:
        print("python -m labkit upstream matrix: error: vLLM's kernels are Triton kernels, and Triton is not "
              "installed here", file=sys.stderr)
        return 2
    start = time.monotonic()
    versions = [v.strip() for v in args.releases.split(",") if v.strip()] or None
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731 - progress, one line a release
    try:
        section = matrix(Path(args.trees) if args.trees else None, versions, log=log)
    except FetchError as err:
        print(f"python -m labkit upstream matrix: error: {err}", file=sys.stderr)
        return 2
    print(matrix_table(section))
    print(summary(section))
    if args.record:
        print(f"wrote {write_cpu_record(section, time.monotonic() - start)}; then: make refresh")
    return 0
