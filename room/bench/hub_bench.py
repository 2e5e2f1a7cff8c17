"""How many learners one box holds: N learners run notebook 00 and 01's repro at the same moment.

For each N (--learners 1,4,8): a real room (`python -m labkit hub start`, as root), N learners
logged in over HTTP with their servers started (not timed: the room opens before the session);
then, released together by a barrier, each learner opens a kernel and runs every code cell of
their own notebook 00 and notebook 01, and then the repro the way `python -m labkit repro` runs
it (triton with real CUDA graphs on a GPU, torch on a CPU). Printed per N: time to each
learner's first output and to their last cell (median, worst), memory per learner (peak RSS of
their server and kernel together), and on a GPU the GPU memory per learner (the caching
allocator's peak) and whether every learner saw the corruption under the buggy graphs and 50 of
50 right with the fix. Where the first output's time goes, cut on one clock: the server's start
(spawn to its answer), the kernel's (to its kernel_info reply), the first cell's imports and its
own work (the cell runs as its imports, then the rest); the CPU seconds a learner's server and
kernel spent by then; and their memory apart (RSS as each part ends, peak, PSS at the end, what
the kernel imported, whether it made a CUDA context). A benchmark, not a test: it prints figures
and asserts no speed.

    sudo .venv/bin/python -m labkit hub bench --learners 1,4,8 [--record]

--record writes room/labkit_room/data/cpu.json (room/labkit_room/data/gpu_box_rooms.json on a GPU) with
its provenance; `python -m labkit docs --write` renders it into docs/INSTRUCTOR_GUIDE.md.

    sudo .venv/bin/python -m labkit hub bench --neighbour [--record]

measures instead what one hostile learner costs another: in a room of two, learner B runs
notebook 00 in an idle room, then again while learner A runs busy processes, fills memory past
A's cap, fills /dev/shm and A's home and forks until refused (room/bench/neighbour.py);
it prints B's times and their ratio, what each of A's attempts was allowed, and which limits the box
enforced. --record writes room/labkit_room/data/neighbour_cpu.json (neighbour_gpu.json on a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pwd
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import workload
from labkit import paths, records
from labkit.errors import LabkitInputError
from labkit_room import room
from labkit_room.accounts import pids_of

if TYPE_CHECKING:
    from labkit_room.client import Learner

PROG = "python -m labkit hub bench"


# Which of a learner's processes is which, by its command line.
ROLES = (("jupyterhub.singleuser", "server"), ("labkit_room.kernel", "kernel"))


def _processes(uid: int) -> list[dict]:
    """A learner's processes with their role (server, kernel, other), peak and current resident memory
    and proportional share (PSS: shared pages, torch's libraries say, split between the processes
    that map them), bytes."""
    found = []
    for pid in pids_of(uid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if ":" in line)
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
            ticks = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]  # utime, stime
        except OSError:
            continue
        pss = next((int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:")), 0)
        role = next((name for mark, name in ROLES if mark in cmdline), "other")
        found.append({"pid": pid, "role": role, "peak_rss": int(status.get("VmHWM", "0 kB").split()[0]) * 1024,
                      "rss": int(status.get("VmRSS", "0 kB").split()[0]) * 1024, "pss": pss,
                      "cpu_s": sum(map(int, ticks)) / os.sysconf("SC_CLK_TCK")})
    return found


def _by_role(processes: list[dict], what: str) -> dict[str, float]:
    """`what` of a learner's `processes` (:func:`_processes`) summed per role: peak_rss, rss, pss in MiB,
    cpu_s in CPU seconds."""
    out: dict[str, float] = {}
    for proc in processes:
        out[proc["role"]] = out.get(proc["role"], 0) + proc[what]
    if what == "cpu_s":
        return {role: round(total, 2) for role, total in sorted(out.items())}
    return {role: round(total / 2**20) for role, total in sorted(out.items())}


# What the kernel holds once the learner's work is done: the packages it imported (top-level names,
# the heavy ones by name) and whether torch made a CUDA context (hundreds of MiB of host memory).
KERNEL_HOLDS = """\
import json as _json, sys as _sys
_top = sorted({_m.split(".")[0] for _m in _sys.modules})
_cuda = "torch" in _sys.modules and _sys.modules["torch"].cuda.is_initialized()
print("LABKIT_HOLDS " + _json.dumps({"modules": len(_sys.modules), "cuda_initialised": bool(_cuda),
      "heavy": [_m for _m in ("torch", "triton", "numpy", "matplotlib", "ipywidgets", "scipy", "pandas", "PIL",
                              "sympy", "jedi", "debugpy") if _m in _top]}))
"""


def _warm_kernel(person: Learner) -> str:
    """The kernel of the session the room's warm-up opened on notebook 00 (JupyterLab finds it so)."""
    sessions = person.server_api("GET", "/sessions").json()
    return next(s["kernel"]["id"] for s in sessions if s.get("path") == room.START_NOTEBOOK)


def first_output_split(t0: float, server: float, kernel: float, imports: float, first: float) -> dict:
    """A cold (or warm) start's time to first output cut where each part ends, on one clock: the
    server answering (`server`), the kernel answering kernel_info (`kernel`), the first cell's imports
    done (`imports`), its first output (`first`). The parts add up to the whole by construction."""
    marks = [t0, server, kernel, imports, first]
    if any(b < a for a, b in zip(marks, marks[1:], strict=False)):
        raise ValueError(f"the marks of a start are out of order: {marks}")
    return {"server_start_s": server - t0, "kernel_start_s": kernel - server, "imports_s": imports - kernel,
            "first_cell_s": first - imports, "first_output_s": first - t0}


def _learner_run(person: Learner, barrier: threading.Barrier, out: dict, start: str = "cold") -> None:
    """One learner from the moment they sit down: cold, their server and a kernel start then; warm,
    the room started both before (hub start --warm) and the learner's notebook attaches to it.
    The first cell runs as its imports, then the rest (workload.split_imports), so that its time to
    first output splits into server start, kernel start, imports and the cell's own work."""
    folder = Path(pwd.getpwnam(person.name).pw_dir) / room.LEARNER_FOLDER
    uid = pwd.getpwnam(person.name).pw_uid
    cells = workload.cells(folder)
    imports, rest = workload.split_imports(cells[0])
    memory: dict = {}
    paused = 0.0  # time spent reading the learner's memory, left out of their times

    def sample(stage: str) -> None:
        nonlocal paused
        t = time.monotonic()
        memory[stage] = _by_role(_processes(uid), "rss")
        paused += time.monotonic() - t

    def now() -> float:
        return time.monotonic() - paused

    barrier.wait()
    t0 = now()
    if start == "warm":
        t_server = t0
        kernel = person.kernel(_warm_kernel(person))
    else:
        person.start_server()
        t_server = now()
        sample("server_ready_rss")
        kernel = person.kernel(person.start_kernel())
    errors, t_first, cpu_at_first = [], None, {}
    try:
        kernel.kernel_info(timeout_s=1200)
        t_kernel = now()
        sample("kernel_ready_rss")
        results = [kernel.execute(imports, timeout_s=1200)] if imports.strip() else []
        t_imports = now()
        if results and results[0].first_output_s is not None:  # an import that prints: the first output
            t_first = t_kernel + results[0].first_output_s
        sample("imports_done_rss")
        for code in [rest, *cells[1:]]:
            if not code.strip():
                continue
            t_sent = now()
            result = kernel.execute(code, timeout_s=1200)
            results.append(result)
            if t_first is None and result.first_output_s is not None:
                t_first = t_sent + result.first_output_s
                cpu_at_first = _by_role(_processes(uid), "cpu_s")  # the CPU the start cost, per process (low noise)
        errors = [f"{r.error['ename']}: {r.error['evalue']}" for r in results if r.error]
        line = next(x for x in result.text().splitlines() if x.startswith(workload.REPRO_MARK))
        repro = json.loads(line.removeprefix(workload.REPRO_MARK))
        t_last = now()
        holds = kernel.execute(KERNEL_HOLDS, timeout_s=120).text()
        memory["kernel_holds"] = json.loads(holds.split("LABKIT_HOLDS ", 1)[1]) if "LABKIT_HOLDS " in holds else None
        # Read while the kernel runs: once it is closed its peak goes with it.
        processes = _processes(uid)
        memory["peak_rss"], memory["pss"] = _by_role(processes, "peak_rss"), _by_role(processes, "pss")
        peak_bytes = sum(p["peak_rss"] for p in processes)
    finally:
        kernel.close()
    split = first_output_split(t0, t_server, t_kernel, min(t_imports, t_first), t_first) if t_first else None
    out[person.name] = {"first_output_s": split and split["first_output_s"], "split": split,
                        "last_cell_s": t_last - t0,
                        "errors": errors, "peak_rss_bytes": peak_bytes, "memory": memory,
                        "cpu_at_first_output_s": cpu_at_first, **repro}


def _median_split(per: list[dict]) -> dict:
    """Each part of the start, median over the learners, and the worst learner's split (the one whose
    first output came last): its parts add up to the row's worst first output."""
    splits = [p["split"] for p in per if p["split"]]
    worst = max(splits, key=lambda s: s["first_output_s"])
    return {"median": {k: round(statistics.median(s[k] for s in splits), 2) for k in worst},
            "worst_learner": {k: round(v, 2) for k, v in worst.items()}}


def _memory_split(per: list[dict]) -> dict:
    """Per role (server, kernel, other), the median over the learners in MiB: resident memory when the
    server answered, when the kernel answered, when the kit was imported, at its peak, and the PSS at
    the end; and what the kernel held at the end."""
    def med(stage: str) -> dict:
        got = [p["memory"][stage] for p in per if p["memory"].get(stage)]
        roles = sorted({r for g in got for r in g})
        return {r: round(statistics.median(g.get(r, 0) for g in got)) for r in roles} if got else {}

    holds = [p["memory"].get("kernel_holds") for p in per if p["memory"].get("kernel_holds")]
    return {"server_ready_rss": med("server_ready_rss"), "kernel_ready_rss": med("kernel_ready_rss"),
            "imports_done_rss": med("imports_done_rss"), "peak_rss": med("peak_rss"), "end_pss": med("pss"),
            "kernel_holds": holds[0] if holds else None}


PARTS = (("server_start_s", "server start"), ("kernel_start_s", "kernel start"), ("imports_s", "imports"),
         ("first_cell_s", "first cell"))


def describe_split(split: dict) -> str:
    """'first output 13.5 s (worst learner) = server start 4.1 + kernel start 2.0 + ...; median ...'."""
    def said(parts: dict) -> str:
        return f"{parts['first_output_s']:.1f} s = " + " + ".join(f"{name} {parts[k]:.1f}" for k, name in PARTS)

    return f"first output, worst learner: {said(split['worst_learner'])}; median of each part: {said(split['median'])}"


def describe_memory(memory: dict) -> str:
    """One line: each role's resident memory at each stage, the PSS at the end, what the kernel held."""
    stages = (("server_ready_rss", "server up"), ("kernel_ready_rss", "kernel up"),
              ("imports_done_rss", "kit imported"), ("peak_rss", "peak"), ("end_pss", "PSS at the end"))
    holds = memory.get("kernel_holds") or {}
    return ("memory (MiB, median learner): " + "; ".join(
        f"{name} {', '.join(f'{role} {mib}' for role, mib in memory[key].items())}"
        for key, name in stages if memory.get(key))
        + (f"; the kernel held {holds['modules']} modules ({', '.join(holds['heavy'])}), CUDA context "
           f"{'made' if holds['cuda_initialised'] else 'none'}" if holds else ""))


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench(n: int, extra: list[str], start: str = "cold") -> dict:
    """A room of `n`, every learner running at once from a barrier: `start` cold (each learner's server
    and kernel start when they sit down) or warm (the room started both when it opened)."""
    # The room's HTTP and websocket clients: imported where a room runs, so --help needs neither.
    from labkit_room.client import Learner, RoomProcess

    # The learners' browsers, which run on their own laptops in a room, run here on the box: ahead of the
    # learners' processes, as the hub does, so that a start's figures are the room's, not this client's
    # wait for a core among 60 busy processes.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, room.HUB_NICE)

    with tempfile.TemporaryDirectory(prefix="labkit-bench-hub-") as tmp:
        os.chmod(tmp, 0o700)
        t_open = time.monotonic()
        hub = RoomProcess(Path(tmp) / "state", n, *extra, *(["--warm"] if start == "warm" else []))
        try:
            passwords = hub.wait_open(timeout_s=1200)
            spawn_s = time.monotonic() - t_open  # the room's opening, with its warm-up where there is one
            people = [Learner(hub.url, name, passwords[name]) for name in room.learner_names(n)]
            for person in people:
                person.login()
                person.new_token()
            load_before = _loadavg()
            barrier = threading.Barrier(n)
            out: dict = {}
            threads = [threading.Thread(target=_learner_run, args=(p, barrier, out, start)) for p in people]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            load_after = _loadavg()
        finally:
            hub.close()
    proxy = next((line.split("proxy: ", 1)[1].strip() for line in hub.output if "proxy: " in line), "?")
    per = [out[name] for name in sorted(out)]
    if len(per) != n:
        raise RuntimeError(f"only {len(per)} of {n} learners finished (see the output above)")
    firsts = [p["first_output_s"] for p in per]
    lasts = [p["last_cell_s"] for p in per]
    gpu = [p["gpu_peak_bytes"] for p in per if p["gpu_peak_bytes"] is not None]
    return {
        "learners": n, "start": start, "room_opened_s": round(spawn_s, 1), "proxy": proxy,
        "first_output_s": {"median": round(statistics.median(firsts), 2), "worst": round(max(firsts), 2)},
        "last_cell_s": {"median": round(statistics.median(lasts), 1), "worst": round(max(lasts), 1)},
        "first_output_split_s": _median_split(per),
        "cpu_at_first_output_s": {
            role: round(statistics.median(p["cpu_at_first_output_s"].get(role, 0) for p in per), 2)
            for role in sorted({r for p in per for r in p["cpu_at_first_output_s"]})},
        "memory_split_mib": _memory_split(per),
        "memory_per_learner_mib": {"median": round(statistics.median(p["peak_rss_bytes"] for p in per) / 2**20),
                                   "worst": round(max(p["peak_rss_bytes"] for p in per) / 2**20)},
        "gpu_memory_per_learner_mib": ({"median": round(statistics.median(gpu) / 2**20),
                                        "worst": round(max(gpu) / 2**20)} if gpu else None),
        "backend": sorted({p["backend"] for p in per}),
        "every_learner_saw_corruption": all(p["buggy_corrupted"] > 0 for p in per),
        "every_learner_fixed_all": all(p["fixed_corrupted"] == 0 for p in per),
        "fixed_right": f"{min(p['responses'] - p['fixed_corrupted'] for p in per)} of {per[0]['responses']}",
        "buggy_corrupted": sorted(p["buggy_corrupted"] for p in per),
        "errors": sorted({e for p in per for e in p["errors"]}),
        "load_average": {"before": load_before, "after": load_after},
        "client_nice": os.getpriority(os.PRIO_PROCESS, 0),  # this client's priority, which the hub's matches
    }


def _notebook_00_seconds(person: Learner) -> tuple[float, list[str]]:
    """B's notebook 00 in a new kernel of theirs, from the kernel's start to the last cell's end."""
    folder = Path(pwd.getpwnam(person.name).pw_dir) / room.LEARNER_FOLDER
    from labkit_room.client import notebook_cells

    cells = notebook_cells(folder / room.START_NOTEBOOK)
    t0 = time.monotonic()
    with person.new_kernel() as kernel:
        results = [kernel.execute(code, timeout_s=1200) for code in cells]
    return time.monotonic() - t0, [f"{r.error['ename']}: {r.error['evalue']}" for r in results if r.error]


def neighbour_bench(extra: list[str], repeats: int) -> dict:
    """B's notebook 00, `repeats` times in an idle room of two and `repeats` times beside A's
    neighbour (room/bench/neighbour.py); what A got, and what the box enforced."""
    import neighbour
    from labkit_room import groups
    from labkit_room.client import Learner, RoomProcess

    with tempfile.TemporaryDirectory(prefix="labkit-bench-neighbour-") as tmp:
        os.chmod(tmp, 0o700)
        hub = RoomProcess(Path(tmp) / "state", 2, *extra)
        try:
            passwords = hub.wait_open()
            a, b = (Learner(hub.url, name, passwords[name]) for name in room.learner_names(2))
            for person in (a, b):
                person.login()
                person.new_token()
                person.start_server()
            idle = [_notebook_00_seconds(b) for _ in range(repeats)]
            home = Path(pwd.getpwnam(a.name).pw_dir)
            out, stop = home / ".room" / "neighbour.json", home / ".room" / "neighbour.stop"
            with a.new_kernel() as kernel:
                pid = int(kernel.execute(neighbour.start_cell(str(out), str(stop))).text().split()[-1])
            neighbour.wait_for(out, pid, "holding", 600)
            state = json.loads((hub.state / "state.json").read_text())
            hierarchy = groups.Hierarchy.from_json(state["hierarchy"])
            usage = hierarchy.usage(state["room_id"], a.name) if hierarchy.enforces else {}
            load = _loadavg()
            try:
                busy = [_notebook_00_seconds(b) for _ in range(repeats)]
            finally:
                stop.touch()
            summary = neighbour.wait_for(out, pid, "ended", 120)
            enforced = json.loads((hub.state / "enforced.json").read_text())
        finally:
            hub.close()
    idle_s, busy_s = [t for t, _ in idle], [t for t, _ in busy]
    return {"idle_s": [round(t, 2) for t in idle_s], "busy_s": [round(t, 2) for t in busy_s],
            "ratio": round(statistics.median(busy_s) / statistics.median(idle_s), 2),
            "errors_of_b": sorted({e for _, errors in idle + busy for e in errors}),
            "neighbour": summary, "group_of_a_while_holding": usage, "load_average_while_busy": load,
            "enforced": enforced, "cgroups": hierarchy.describe()}


def _provenance(args, argv: list[str], extra) -> dict:
    from importlib.metadata import version

    import torch

    import labkit

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    python = sys.executable
    if python.startswith(str(paths.REPO)):
        python = os.path.relpath(python, paths.REPO)
    return {"command": f"{PROG.replace('python', python, 1)} {shlex.join(argv)} (as root)",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": args.commit,
            "machine": f"{len(os.sched_getaffinity(0))} cores ({cpu}), {memory_gib:.0f} GiB"
                       + (f", {gpu}" if gpu else ", no GPU"),
            "shared_cpu": args.shared_note, "python": platform.python_version(), "torch": torch.__version__,
            "jupyterhub": version("jupyterhub"), "labkit": labkit.__version__, "hub_args": extra}


def _write_neighbour_record(args, argv: list[str], extra: list[str], result: dict) -> None:
    import torch

    from labkit import records
    from labkit_room import record

    path = record.ROOM_NEIGHBOUR_GPU if torch.cuda.is_available() else record.ROOM_NEIGHBOUR_CPU
    records.write(path, {"provenance": _provenance(args, argv, extra), **result})
    if os.environ.get("OUT"):  # a GPU box run from elsewhere: what is under $OUT comes back
        shutil.copy(path, Path(os.environ["OUT"]) / path.name)
    print(f"wrote {path.relative_to(paths.REPO)}", flush=True)


def _write_record(args, argv: list[str], extra: list[str], rows: list[dict]) -> None:
    import torch

    from labkit_room import record

    kind = "gpu" if torch.cuda.is_available() else "cpu"
    path = record.ROOM_GPU_BOX if kind == "gpu" else record.ROOM_CPU
    provenance = _provenance(args, argv, extra)
    old = json.loads(path.read_text()) if args.merge and path.exists() else {"rooms": []}
    rows = records.merge_rows(old["rooms"], old.get("provenance"), rows, provenance,
                              key=lambda r: (r["learners"], r.get("start", "cold")))
    path.write_text(json.dumps({"provenance": provenance, "rooms": rows}, indent=1) + "\n")
    if os.environ.get("OUT"):  # a GPU box run from elsewhere: what is under $OUT comes back
        shutil.copy(path, Path(os.environ["OUT"]) / path.name)
    print(f"wrote {path.relative_to(paths.REPO)}", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", default="1,4,8", help="comma-separated room sizes (default 1,4,8)")
    parser.add_argument("--start", default="cold,warm",
                        help="cold (servers and kernels start when the learners sit down), warm (hub start --warm "
                             "started them before), or both (default cold,warm)")
    parser.add_argument("--record", action="store_true",
                        help="write the record (room/labkit_room/data/cpu.json, or gpu_box_rooms.json on a GPU)")
    parser.add_argument("--proxy", default="auto", choices=("auto", "node", "python"))
    parser.add_argument("--memory", default=None, help="per-learner memory limit passed to the hub (e.g. 3G)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the record's other room sizes (a box whose calls run one size at a time)")
    parser.add_argument("--shared-note", default="", help="what else ran on the box (recorded with the figures)")
    parser.add_argument("--neighbour", action="store_true",
                        help="instead: learner B's notebook 00 in an idle room and beside a hostile learner A")
    parser.add_argument("--repeats", default="2", help="with --neighbour: runs of notebook 00 each way (default 2)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise LabkitInputError("the hub creates a system user per learner: run it as root (sudo)")
    sizes = [int(x) for x in args.learners.split(",")]
    starts = [x.strip() for x in args.start.split(",") if x.strip()]
    if not starts or any(x not in ("cold", "warm") for x in starts):
        raise LabkitInputError(f"--start {args.start!r}: cold, warm, or cold,warm")
    # The tree the figures come from, read before the runs (an edit during them would not be in it).
    args.commit = records.commit_label()
    extra = ["--proxy", args.proxy] + (["--memory", args.memory] if args.memory else [])
    if args.neighbour:
        try:
            repeats = int(args.repeats)
        except ValueError:
            repeats = 0
        if repeats < 1:
            raise LabkitInputError(f"--repeats {args.repeats!r}: a whole number of runs, 1 or more")
        result = neighbour_bench(extra, repeats)
        print(f"B's notebook 00: {result['idle_s']} s in an idle room, {result['busy_s']} s beside A "
              f"(x{result['ratio']:.2f}); B's errors: {result['errors_of_b'] or 'none'}; A got: "
              f"{json.dumps(result['neighbour'])}; groups: {result['cgroups']}", flush=True)
        if args.record:
            _write_neighbour_record(args, argv, extra, result)
        return 0
    rows = []
    for n, start in [(n, start) for n in sizes for start in starts]:
        print(f"== {n} learner(s), {start} ...", flush=True)
        row = bench(n, extra, start)
        row["measured"] = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {args.commit}"
        rows.append(row)
        gpu = row["gpu_memory_per_learner_mib"]
        first, last = row["first_output_s"], row["last_cell_s"]
        every = row["every_learner_saw_corruption"] and row["every_learner_fixed_all"]
        print(f"   first output {first['median']:.1f} s median, {first['worst']:.1f} worst; "
              f"last cell {last['median']:.0f} s median, {last['worst']:.0f} worst; "
              f"memory {row['memory_per_learner_mib']['median']} MiB per learner"
              + (f"; GPU {gpu['median']} MiB per learner" if gpu else "")
              + f"; buggy corrupted {row['buggy_corrupted']}, fixed {row['fixed_right']} right"
              + f" ({'every' if every else 'NOT every'} learner); load average "
              + " ".join(map(str, row["load_average"]["before"]))
              + (f"; ERRORS {row['errors']}" if row["errors"] else ""), flush=True)
        print("   " + describe_split(row["first_output_split_s"]), flush=True)
        print("   " + describe_memory(row["memory_split_mib"]), flush=True)
        print("   CPU seconds of a learner's processes by their first output (median learner): "
              + ", ".join(f"{role} {cpu:.2f}" for role, cpu in row["cpu_at_first_output_s"].items()), flush=True)
        if args.record:  # after every size: a call cut short by its time limit keeps the sizes it measured
            _write_record(args, argv, extra, rows)
    return 0

