"""The kit's measured records: where each lives, how one is written, and how a new run joins one.

Every number the kit teaches comes from a JSON record under ``labkit/data/`` (the docs render
them, :mod:`labkit.docgen`). This module is the one place that knows their files, writes them
whole, stamps where and when a section was measured, and merges the sections of a new run into a
record (``python -m labkit record merge RUN.json``). It imports nothing of the kit but its paths,
so both the GPU runs (:mod:`labkit.gpu`) and the vLLM audit (:mod:`labkit.upstream`) write
through it without importing each other.

A record holds its current sections and, under ``superseded``, only the earlier runs its readers
cite: every run of a section whose spread over runs is the claim (:data:`EVERY_RUN`), and an entry
marked ``cited_by`` (the doc or notebook that quotes it). Any other run a merge replaces leaves the
record; the repository's history keeps it (``git log -p`` on the record's file).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
from pathlib import Path
from typing import Callable

from labkit import paths
from labkit.errors import LabkitInputError

GPU = paths.DATA / "gpu" / "runs.json"  # every section of ``python -m labkit gpu``, each with the run it came from
CPU_COMMANDS = paths.DATA / "cpu" / "command_times.json"  # make bench-cpu: commands' wall times
CPU_NOTEBOOKS = paths.DATA / "cpu" / "notebook_times.json"  # each notebook's run time (the agendas)
CPU_DOWNLOADS = paths.DATA / "cpu" / "downloads.json"  # what a fresh make lab downloads
CPU_UPSTREAM = paths.DATA / "cpu" / "upstream_audit.json"  # audit-vllm on the releases, interpreted
CPU_FAMILY = paths.DATA / "cpu" / "family.json"  # the case book's cases on the CPU (python -m labkit family)

# Sections whose every run is data: the docs quote the spread over runs (the race's winner, the
# graph's speed-up over eager launches on each host), so a merge keeps the runs it replaces.
EVERY_RUN = ("graphs", "race", "race_blocks")
STAMP_KEYS = ("device", "driver", "cuda", "torch", "triton", "python", "git_commit", "command", "kernel_defaults")


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def output_of(cmd: list[str]) -> str | None:
    """A command's stdout, or None if it is missing, fails or hangs (provenance is best-effort)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def kit_commit(tree: Path | None = None, full: bool = False) -> dict:
    """The commit of the kit's own repository at `tree` (default: this checkout) and whether its
    tracked files differ from it: ``{"git_commit": ..., "git_dirty": ...}``. Every record takes its
    commit here. Only a repository whose top is the kit's tree counts: a copy of the kit inside
    another repository has no commit of its own (LABKIT_SOURCE_COMMIT names it, as for a copy of the
    working tree without .git); where neither says, the commit is None."""
    tree = Path(tree) if tree is not None else paths.REPO
    top = output_of(["git", "-C", str(tree), "rev-parse", "--show-toplevel"])
    if top is not None and Path(top).resolve() == tree.resolve():
        commit = output_of(["git", "-C", str(tree), "rev-parse", *([] if full else ["--short"]), "HEAD"])
        dirty = output_of(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"])
        return {"git_commit": commit, "git_dirty": bool(dirty) if dirty is not None else None}
    named = os.environ.get("LABKIT_SOURCE_COMMIT")
    return {"git_commit": named or None, "git_dirty": None}


def commit_label(tree: Path | None = None) -> str:
    """:func:`kit_commit` in one word for a record's provenance: ``abc1234``,
    ``abc1234+uncommitted changes``, or ``unknown``."""
    found = kit_commit(tree)
    if not found["git_commit"]:
        return "unknown"
    return found["git_commit"] + ("+uncommitted changes" if found["git_dirty"] else "")


def read(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except ValueError as err:  # a record half-written or edited by hand: say which file, in one line
        raise LabkitInputError(f"{path} is not a JSON record: {err}") from None


def write(path: Path, record: dict) -> None:
    """Write the record whole, through a temporary file: a run killed mid-write keeps the last one."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, path)


def section_stamp(invocation: dict, date: str | None = None) -> dict:
    """Where, when and by what one section was measured: kept per section in
    ``record["section_provenance"]``, because a record gathers sections from several runs, and each
    figure's caption names its own section's."""
    stamp = {k: invocation.get(k) for k in STAMP_KEYS}
    stamp["date"] = date or utc_now()
    return stamp


def add_command(record: dict, command: str) -> dict:
    """Note one more invocation that added sections to an existing record."""
    prov = record.setdefault("provenance", {})
    commands = prov.setdefault("commands", [prov["command"]] if "command" in prov else [])
    commands.append(command)
    prov["date_last_section"] = utc_now()
    return record


def merge_sections(base: dict, new: dict, names, why: str) -> list[str]:
    """Take sections `names` of the record `new` into `base`; returns a line per replaced run.

    A replaced run of an :data:`EVERY_RUN` section moves, with its provenance and `why`, to
    ``base["superseded"][name]`` (oldest first); any other replaced run leaves the record (the
    repository's history keeps it), but for earlier runs marked ``cited_by``, which stay. The new
    section gets its stamp in ``base["section_provenance"]`` (from ``new["section_provenance"]``,
    else from ``new["provenance"]``)."""
    stamps = base.setdefault("section_provenance", {})
    said = []
    for name in names:
        if name not in new:
            raise KeyError(f"the new record has no section {name!r}")
        if name in base:
            old = {"data": base[name], "provenance": stamps.get(name), "superseded_because": why}
            when = str((stamps.get(name) or {}).get("date", "?"))[:10]
            if name in EVERY_RUN:
                base.setdefault("superseded", {}).setdefault(name, []).append(old)
                said.append(f"{name}: the run of {when} stays under superseded (every run of it is data)")
            else:
                said.append(f"{name}: the run of {when} leaves the record (git log -p keeps it)")
        base[name] = new[name]
        stamps[name] = new.get("section_provenance", {}).get(name) or section_stamp(
            new["provenance"], new["provenance"].get("date"))
        if name in new.get("section_seconds", {}):
            base.setdefault("section_seconds", {})[name] = new["section_seconds"][name]
    return said


def merge_rows(old_rows: list[dict], old_provenance: dict | None, rows: list[dict], provenance: dict,
               key: Callable[[dict], object]) -> list[dict]:
    """The rows of a record of rows (a room per size, say) after a run: the run's `rows`, each stamped
    with the run's `provenance` (machine, commit, date, command), and every old row whose `key` the run
    did not measure again, keeping its own stamp (a row written before rows had one takes its record's
    `old_provenance`). Rows from several machines and commits each keep where they were measured;
    sorted by `key`."""
    measured = {key(row) for row in rows}
    kept = [{**row, "provenance": row.get("provenance") or old_provenance} for row in old_rows
            if key(row) not in measured]
    return sorted(kept + [{**row, "provenance": provenance} for row in rows], key=key)


def usable_sections(run: dict) -> list[str]:
    """The sections of a run's record that hold a measurement (a section that failed records its error)."""
    skip = {"provenance", "section_provenance", "section_seconds", "superseded", "notes"}
    return [k for k, v in run.items() if k not in skip and not (isinstance(v, dict) and "error" in v)]


def merge_run(run_file: Path, into: Path = GPU, sections: list[str] | None = None,
              why: str = "measured again") -> list[str]:
    """Merge `sections` (default: every usable one) of the run's record at `run_file` into the record
    `into`; returns what happened, a line per section."""
    run = read(run_file)
    if "provenance" not in run:
        raise LabkitInputError(f"{run_file} is not a record of a run: it has no provenance")
    usable = usable_sections(run)
    names = list(sections) if sections else usable
    bad = [n for n in names if n not in usable]
    if bad:
        failed = [n for n in bad if n in run]
        raise LabkitInputError(f"{run_file} has no usable section {', '.join(bad)}"
                         + (f" ({', '.join(failed)} failed in that run)" if failed else "")
                         + f"; it has: {', '.join(usable) or 'none'}")
    if not names:
        raise LabkitInputError(f"{run_file} holds no usable section")
    base = read(into) if Path(into).exists() else {"provenance": dict(run["provenance"])}
    said = merge_sections(base, run, names, why)
    add_command(base, str(run["provenance"].get("command", "?")))
    write(into, base)
    return [*said, *(f"{n}: new" for n in names if not any(s.startswith(n + ":") for s in said))]


# -- the command: python -m labkit record ... --------------------------------------------------------

def add_arguments(record) -> None:
    record.description = ("Take sections of a run's record (python -m labkit gpu --out DIR wrote "
                          "DIR/gpu_benchmarks.json) into a record under labkit/data/ (default: the GPU record). "
                          "Then `make refresh` renders the docs, figures and notebooks from it.")
    actions = record.add_subparsers(dest="action", required=True)
    merge = actions.add_parser("merge", help="merge a run's sections into a record")
    merge.add_argument("run", help="the run's record (gpu_benchmarks.json)")
    merge.add_argument("--sections", default="", help="comma-separated sections (default: every usable one)")
    merge.add_argument("--into", default=str(GPU.relative_to(paths.REPO)),
                       help="the record to merge into (default: %(default)s)")
    merge.add_argument("--why", default="measured again", help="why, kept beside a replaced run that stays")


def run(args) -> int:
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    into = Path(args.into)
    for line in merge_run(Path(args.run), paths.REPO / into if not into.is_absolute() else into, sections,
                          args.why):
        print(line)
    print(f"merged into {args.into}; now render what reads it: make refresh")
    return 0
