"""The smallest memory limit a room may set, as measured: one learner's work (notebooks 00 and 01,
then 01's repro; room/bench/workload.py) run in one kernel-like process under RLIMIT_DATA, the
limit the room's spawner sets (:mod:`labkit_room.spawner`), bisected to the smallest that passes.

Why a measure and not a guess: what a kernel needs depends on the torch build far more than on
the kit: the CUDA build of torch holds several times the data segment of the CPU build, so one
floor for both either wastes a laptop-sized server or refuses every kernel on the GPU box (the
record holds both). And numpy's OpenBLAS reserves buffers per thread: the room sets
``OPENBLAS_NUM_THREADS=1`` (:func:`labkit_room.room.math_threads_env`), and this measure runs with
the room's thread settings, and once with the threads left alone to show what that saves.

    python -m labkit hub kernel-memory            # print the figures for this machine
    python -m labkit hub kernel-memory --record   # and write room/labkit_room/data/kernel_memory.json

The record holds one entry per torch build ("cpu", "cuda"); :data:`labkit_room.room.MIN_MEMORY_GIB`
names each build's floor and a test checks the record's needs sit under it with room to spare.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import workload
from labkit import paths, records
from labkit_room.limits import GPU_SHARE_ENV
from labkit_room.record import KERNEL_MEMORY
from labkit_room.room import math_threads_env, torch_build

PROG = "python -m labkit hub kernel-memory"
RECORD = KERNEL_MEMORY
MIB = 2**20
RESOLUTION_MIB = 16
# The share of the GPU a kernel gets in a room of three (what the record was measured with).
GPU_SHARE = {GPU_SHARE_ENV: "0.3000"}

# Run in the child: each cell in an IPython shell (the kernels' own cell runner, magics included),
# VmData (what RLIMIT_DATA counts) sampled meanwhile, one JSON line at the end.
_CHILD = r"""
import json, sys, threading, time
def vmdata():
    for line in open("/proc/self/status"):
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
peak = [vmdata()]
def sample():
    while True:
        peak[0] = max(peak[0], vmdata()); time.sleep(0.005)
threading.Thread(target=sample, daemon=True).start()
from IPython.core.interactiveshell import InteractiveShell
class Shell(InteractiveShell):
    def enable_gui(self, gui=None):  # no event loop to hook: figures render inline, as in a kernel
        pass
shell = Shell.instance()
for number, code in enumerate(json.load(sys.stdin)):
    result = shell.run_cell(code, silent=True)
    if not result.success:
        err = result.error_in_exec or result.error_before_exec
        print("LABKIT_MEMORY " + json.dumps({"ok": False, "cell": number, "error": repr(err)[:300]}), flush=True)
        sys.exit(1)
print("LABKIT_MEMORY " + json.dumps({"ok": True, "peak_vmdata": max(peak[0], vmdata())}), flush=True)
"""


def thread_env(threads: int | None) -> dict[str, str]:
    """This environment with the math libraries' threads as a room sets them (`threads` per kernel),
    or as left alone (None)."""
    env = {k: v for k, v in os.environ.items() if k not in math_threads_env(1)}
    return env if threads is None else {**env, **math_threads_env(threads)}


def run_once(cells: list[str], env: dict[str, str], limit: int | None) -> dict:
    """One learner's work in a fresh process, under RLIMIT_DATA = `limit` bytes (None: no limit)."""
    def preexec():
        if limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(cells), env=env, cwd=paths.NOTEBOOKS,
                          capture_output=True, text=True, preexec_fn=preexec, timeout=1800)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("LABKIT_MEMORY ")), None)
    if line is None:  # died before it could say: an allocator's abort at import, a segfault
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        return {"ok": False, "error": f"exit {proc.returncode}: {last[:300]}"}
    return json.loads(line.removeprefix("LABKIT_MEMORY "))


def smallest_limit(cells: list[str], env: dict[str, str], say=print) -> dict:
    """The smallest RLIMIT_DATA (to RESOLUTION_MIB) under which the work passes, and its sampled peak."""
    free = run_once(cells, env, None)
    if not free["ok"]:
        raise RuntimeError(f"the workload fails with no limit at all: {free['error']}")
    peak = free["peak_vmdata"]
    step = RESOLUTION_MIB * MIB
    lo = peak // step * step  # a limit at or under the sampled peak: expected to fail
    hi = lo + step
    while not run_once(cells, env, hi)["ok"]:  # the sampled peak misses short spikes: widen up
        say(f"    fails at {hi / MIB:.0f} MiB; widening")
        if hi > 64 * 2**30:
            raise RuntimeError("the workload fails under every data limit up to 64 GiB")
        lo, hi = hi, hi + 2 * (hi - lo)
    gap = step
    while lo > 0 and run_once(cells, env, lo)["ok"]:  # the peak of another run: step down (doubling) to a fail
        say(f"    {lo / MIB:.0f} MiB: passes")
        lo, hi, gap = max(0, lo - gap), lo, 2 * gap
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        ok = run_once(cells, env, mid)["ok"]
        say(f"    {mid / MIB:.0f} MiB: {'passes' if ok else 'fails'}")
        lo, hi = (lo, mid) if ok else (mid, hi)
    return {"peak_vmdata_mib": round(peak / MIB), "smallest_limit_mib": round(hi / MIB)}


def measure(say=print) -> dict:
    """This machine's entry: the smallest limit with the room's threads at all cores and at one, and
    the sampled peak with the threads left alone (what OPENBLAS_NUM_THREADS=1 saves)."""
    build = torch_build()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cells = workload.cells(paths.NOTEBOOKS)
    rows = []
    for threads in sorted({cores, 1}, reverse=True):
        env = {**thread_env(threads), **GPU_SHARE}
        say(f"  {threads} thread(s) per kernel, as a room sets them:")
        t0 = time.monotonic()
        rows.append({"threads": threads, **smallest_limit(cells, env, say), "seconds": round(time.monotonic() - t0)})
        say(f"    needs {rows[-1]['smallest_limit_mib']} MiB (sampled peak {rows[-1]['peak_vmdata_mib']} MiB)")
    alone = run_once(cells, {**thread_env(None), **GPU_SHARE}, None)
    entry = {"build": build, "threads": rows, "threads_left_alone_peak_vmdata_mib": round(alone["peak_vmdata"] / MIB),
             "workload": [*workload.NOTEBOOKS, "01's repro (workload.REPRO)"],
             "gpu_memory_fraction": float(GPU_SHARE[GPU_SHARE_ENV]), "provenance": _provenance()}
    say(f"  threads left alone ({cores}): sampled peak {entry['threads_left_alone_peak_vmdata_mib']} MiB")
    return entry


def _provenance() -> dict:
    import torch

    commit = records.commit_label()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"command": f"{PROG} --record",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
            "machine": f"{len(os.sched_getaffinity(0))} cores ({cpu})" + (f", {gpu}" if gpu else ", no GPU"),
            "python": platform.python_version(), "torch": torch.__version__}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true",
                        help=f"write {RECORD.relative_to(paths.REPO)} (this build's entry)")
    args = parser.parse_args(argv)
    print(f"one learner's work under RLIMIT_DATA, torch build {torch_build()!r}:", flush=True)
    entry = measure(lambda text: print(text, flush=True))
    if args.record:
        record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        record[entry["build"]] = entry
        RECORD.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
        if os.environ.get("OUT"):  # a GPU box run from elsewhere: what is under $OUT comes back
            shutil.copy(RECORD, Path(os.environ["OUT"]) / RECORD.name)
        print(f"wrote {RECORD.relative_to(paths.REPO)}")
    return 0

