"""The JSON record a GPU run writes: provenance first, then one key per section.

A record is what :mod:`labkit.viz.timing_plots` plots on any machine (copies live in
``labkit/data/gpu/``), so it carries everything needed to judge its numbers later: device,
driver, CUDA, torch and Triton versions, the date, the command, and the git commit.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from pathlib import Path

from labkit import paths

RECORD_NAME = "gpu_benchmarks.json"
PROGRAM = "python -m labkit gpu"
TIMING_NOTE = ("CUDA events per iteration, median. kernel.ms: a CUDA graph holding one call, replayed with "
               "the L2 flushed (256 MiB write) before each replay (cold GPU time, no Python); "
               "kernel.eager_ms: the same calls launched from Python; kernel.graph_ms: warm replays of 20 "
               "calls / 20, interleaved masked/unmasked")


def _output_of(cmd: list[str]) -> str | None:
    """A command's stdout, or None if it is missing, fails or hangs (provenance is best-effort)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _nvidia_smi() -> dict:
    smi = _output_of(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                      "--format=csv,noheader"])
    parts = [p.strip() for p in smi.splitlines()[0].split(",")] if smi else []
    driver, max_sm, max_mem, power = (parts + [None] * 4)[:4]
    return {"driver": driver, "max_sm_clock": max_sm, "max_mem_clock": max_mem, "power_limit": power}


def _git() -> dict:
    root = paths.REPO
    commit = _output_of(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
    dirty = _output_of(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
    if commit is None and os.environ.get("LABKIT_SOURCE_COMMIT"):
        # A copy of the working tree without .git (a lent GPU machine): the caller says which.
        commit, dirty = os.environ["LABKIT_SOURCE_COMMIT"], None
    return {"git_commit": commit, "git_dirty": bool(dirty) if dirty is not None else None}


def command_line(argv: list[str]) -> str:
    return " ".join([PROGRAM, *argv])


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(command: str) -> dict:
    """Where and when a record was made (needs a CUDA device)."""
    import torch
    import triton

    from labkit.kernels import gumbel_tuning as tuning

    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "compute_capability": f"{props.major}.{props.minor}",
        **_nvidia_smi(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": utc_now(),
        "command": command,
        **_git(),
        "kernel_defaults": {"block_v": tuning.GPU_BLOCK_V, "num_warps": tuning.GPU_NUM_WARPS,
                            "fast_math": tuning.GPU_FAST_MATH, "single_pass": tuning.SINGLE_PASS,
                            "dependent_launch": tuning.DEPENDENT_LAUNCH},
        "timing": TIMING_NOTE,
    }


def read_record(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def write_record(path: Path, record: dict) -> None:
    """Write the record whole, through a temporary file: a run killed mid-write keeps the last one."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


STAMP_KEYS = ("device", "driver", "cuda", "torch", "triton", "python", "git_commit", "command")


def section_stamp(invocation: dict, date: str | None = None) -> dict:
    """Where, when and by what one section was measured: kept per section in
    ``record["section_provenance"]``, because a record gathers sections from several runs (and
    machines), and each figure's caption names its own section's."""
    stamp = {k: invocation.get(k) for k in STAMP_KEYS}
    stamp["date"] = date or utc_now()
    return stamp


def merge_sections(base: dict, new: dict, names, why: str) -> dict:
    """Take sections `names` of the record `new` into `base`, keeping what they replace.

    Each replaced section moves, with its provenance, to ``base["superseded"][name]`` (a list,
    oldest first) with `why`; the new one gets its stamp in ``base["section_provenance"]`` (from
    ``new["section_provenance"]``, else from ``new["provenance"]``)."""
    stamps = base.setdefault("section_provenance", {})
    for name in names:
        if name not in new:
            raise KeyError(f"the new record has no section {name!r}")
        if name in base:
            old = {"data": base[name], "provenance": stamps.get(name), "superseded_because": why}
            base.setdefault("superseded", {}).setdefault(name, []).append(old)
        base[name] = new[name]
        stamps[name] = new.get("section_provenance", {}).get(name) or section_stamp(
            new["provenance"], new["provenance"].get("date"))
        if name in new.get("section_seconds", {}):
            base.setdefault("section_seconds", {})[name] = new["section_seconds"][name]
    return base


def add_command(record: dict, command: str) -> dict:
    """Note one more invocation that added sections to an existing record."""
    prov = record.setdefault("provenance", {})
    commands = prov.setdefault("commands", [prov["command"]] if "command" in prov else [])
    commands.append(command)
    prov["date_last_section"] = utc_now()
    return record
