"""How many learners one box holds: N learners run notebook 00 and 01's repro at the same moment.

For each N (--learners 1,4,8): a real room (`python -m labkit hub start`, as root), N learners
logged in over HTTP with their servers started (not timed: the room opens before the session);
then, released together by a barrier, each learner opens a kernel and runs every code cell of
their own notebook 00 and notebook 01, and then the repro the way `python -m labkit repro` runs
it (triton with real CUDA graphs on a GPU, torch on a CPU). Printed per N: time to each
learner's first output and to their last cell (median, worst), memory per learner (peak RSS of
their server and kernel together), and on a GPU the GPU memory per learner (the caching
allocator's peak) and whether every learner saw the corruption under the buggy graphs and 50 of
50 right with the fix. A benchmark, not a test: it prints figures and asserts no speed.

    sudo .venv/bin/python -m labkit hub bench --learners 1,4,8 [--record]

--record writes room/labkit_room/data/cpu.json (room/labkit_room/data/gpu.json on a GPU) with
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


def _peak_rss(uid: int) -> int:
    """Sum of VmHWM (peak resident memory) of a learner's processes, bytes."""
    total = 0
    for pid in pids_of(uid):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def _warm_kernel(person: Learner) -> str:
    """The kernel of the session the room's warm-up opened on notebook 00 (JupyterLab finds it so)."""
    sessions = person.server_api("GET", "/sessions").json()
    return next(s["kernel"]["id"] for s in sessions if s.get("path") == room.START_NOTEBOOK)


def _learner_run(person: Learner, barrier: threading.Barrier, out: dict, start: str = "cold") -> None:
    """One learner from the moment they sit down: cold, their server and a kernel start then; warm,
    the room started both before (hub start --warm) and the learner's notebook attaches to it."""
    folder = Path(pwd.getpwnam(person.name).pw_dir) / room.LEARNER_FOLDER
    cells = workload.cells(folder)
    barrier.wait()
    t0 = time.monotonic()
    if start == "warm":
        kernel = person.kernel(_warm_kernel(person))
    else:
        person.start_server()
        kernel = person.kernel(person.start_kernel())
    first = None
    errors = []
    try:
        for code in cells:
            result = kernel.execute(code, timeout_s=1200)
            if first is None and result.first_output_s is not None:
                first = time.monotonic() - t0 - result.seconds + result.first_output_s
            if result.error:
                errors.append(f"{result.error['ename']}: {result.error['evalue']}")
        line = next(x for x in result.text().splitlines() if x.startswith(workload.REPRO_MARK))
        repro = json.loads(line.removeprefix(workload.REPRO_MARK))
    finally:
        kernel.close()
    out[person.name] = {"first_output_s": first, "last_cell_s": time.monotonic() - t0, "errors": errors,
                        "peak_rss_bytes": _peak_rss(pwd.getpwnam(person.name).pw_uid), **repro}


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench(n: int, extra: list[str], start: str = "cold") -> dict:
    """A room of `n`, every learner running at once from a barrier: `start` cold (each learner's server
    and kernel start when they sit down) or warm (the room started both when it opened)."""
    # The room's HTTP and websocket clients: imported where a room runs, so --help needs neither.
    from labkit_room.client import Learner, RoomProcess

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
    path = record.ROOM_GPU if kind == "gpu" else record.ROOM_CPU
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
                        help="write the record (room/labkit_room/data/cpu.json or gpu.json)")
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
        if args.record:  # after every size: a call cut short by its time limit keeps the sizes it measured
            _write_record(args, argv, extra, rows)
    return 0

