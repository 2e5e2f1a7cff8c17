"""A hostile learner, for the room's own tests and bench: run in a learner's kernel, it does what
starves a shared box -- busy processes, processes that fill memory past the learner's cap, files
that fill /dev/shm and the home, forks until refused -- then holds its busy processes while
another learner works, and ends them all.

    python room/bench/neighbour.py --out SUMMARY.json --stop STOPFILE [--busy 6] [--hold-s 600]

It writes SUMMARY.json twice: once everything is running (``"holding": true``), so the measure of
the other learner can begin, and once it has ended what it started. Every number in it is what
the box answered, not what was asked: how many forks it got, how each memory process ended, how
many bytes /dev/shm and the home took before they refused. tests/test_hub.py asserts the room's
limits from them; ``python -m labkit hub bench --neighbour`` records them beside the other
learner's times (room/bench/hub_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MIB = 2**20
# One memory process touches this much, under any per-process limit a room sets, so only the
# learner's group can stop them; together they pass the learner's memory (MEM_LIMIT).
MEMORY_PROCESS_MIB = 900


# What the learner's group may end first: everything the neighbour starts (its own default after
# that, so the coordinator that writes the summary outlives them).
FIRST_TO_GO = 1000

_FILL = """
import json, sys
path, limit = sys.argv[1], int(sys.argv[2])
chunk, written, error = bytes(2**20), 0, None
try:
    with open(path, 'wb') as fh:
        while written < limit:
            fh.write(chunk); fh.flush(); written += len(chunk)
except OSError as err:
    error = err.strerror or str(err)
print(json.dumps({'bytes': written, 'error': error}))
"""


def _oom_score(value: int) -> None:
    with open("/proc/self/oom_score_adj", "w") as fh:
        fh.write(str(value))


def _child(args: list[str], **kwargs) -> subprocess.Popen:
    """A process of the neighbour's, first in the OOM killer's order."""
    return subprocess.Popen([sys.executable, *args], preexec_fn=lambda: _oom_score(FIRST_TO_GO), **kwargs)


def _fill(path: Path, limit_bytes: int) -> dict:
    """Write `path` until the box refuses or `limit_bytes`, in a child; what was written and why it
    stopped (a file in a tmpfs counts in the writer's memory: its group may end the writer first)."""
    proc = _child(["-c", _FILL, str(path), str(limit_bytes)], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        return {"bytes": path.stat().st_size if path.exists() else 0, "error": f"writer ended ({proc.returncode})"}
    return json.loads(out)


def _memory_processes() -> list[int]:
    """Each process touches MEMORY_PROCESS_MIB page by page; returns each one's exit status
    (-9: the OOM killer; 1: a MemoryError)."""
    code = (f"import sys\nparts = []\ntry:\n    for _ in range({MEMORY_PROCESS_MIB // 64}):\n"
            "        parts.append(bytearray(64 * 2**20))\n    import time; time.sleep(5)\n"
            "except MemoryError:\n    sys.exit(1)\n")
    learner_memory = int(os.environ.get("MEM_LIMIT") or 4 * 2**30)
    count = learner_memory // (MEMORY_PROCESS_MIB * MIB) + 2
    procs = [_child(["-c", code]) for _ in range(count)]
    return [p.wait() for p in procs]


def _fork_until_refused(cap: int = 100_000) -> tuple[list[int], str | None]:
    """Fork sleeping children until the box refuses; returns their pids and the refusal."""
    children = []
    try:
        while len(children) < cap:
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                time.sleep(3600)
                os._exit(0)
            children.append(pid)
    except OSError as err:
        return children, err.strerror or str(err)
    return children, None


def _write(out: Path, summary: dict) -> None:
    """The summary, whole (a reader never sees it half-written)."""
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(summary))
    os.replace(tmp, out)


def run(out: Path, stop: Path, busy: int, hold_s: float, disk_limit: int) -> dict:
    try:
        _oom_score(0)  # below what it starts: a kernel's children begin above it
    except OSError:
        pass
    summary: dict = {"holding": False, "pid": os.getpid()}
    # A little room kept for the summary itself: the fills below take the rest of the disk.
    reserve = out.with_name(out.name + ".reserve")
    reserve.write_bytes(bytes(MIB))
    busy_procs = [_child(["-c", "while True: pass"]) for _ in range(busy)]
    summary["busy_processes"] = len(busy_procs)
    summary["memory_process_exits"] = _memory_processes()
    fills = [Path("/dev/shm") / f"neighbour-{os.getpid()}", Path.home() / f"neighbour-fill-{os.getpid()}"]
    summary["shm"] = _fill(fills[0], disk_limit)
    summary["home"] = _fill(fills[1], disk_limit)
    reserve.unlink()
    children, refusal = _fork_until_refused()
    summary["forks"] = {"started": len(children), "refused": refusal}
    summary["holding"] = True
    _write(out, summary)
    deadline = time.monotonic() + hold_s
    while not stop.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    for proc in busy_procs:
        proc.kill()
        proc.wait()
    for name in fills:
        name.unlink(missing_ok=True)
    summary["holding"] = False
    summary["ended"] = True
    _write(out, summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python room/bench/neighbour.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the summary's JSON file")
    parser.add_argument("--stop", required=True, help="a file whose appearance ends the run")
    parser.add_argument("--busy", type=int, default=6, help="busy processes (default %(default)s)")
    parser.add_argument("--hold-s", type=float, default=600, help="the longest it holds them (default %(default)s)")
    parser.add_argument("--fill-mib", type=int, default=64 * 1024, help="the most it writes to each of /dev/shm "
                        "and the home, MiB (default: until refused)")
    args = parser.parse_args(argv)
    run(Path(args.out), Path(args.stop), args.busy, args.hold_s, args.fill_mib * MIB)
    return 0


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended and not yet waited for by its parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_for(out: Path, pid: int, key: str, timeout_s: float) -> dict:
    """The summary at `out` once it says `key` (holding, ended); an error at once if the neighbour
    (`pid`) ended before, with what it had written."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = running(pid)
        summary = json.loads(out.read_text()) if out.exists() else {}
        if summary.get(key):
            return summary
        if not alive:
            raise RuntimeError(f"the neighbour ended before it was {key}: {summary or 'no summary'}")
        time.sleep(0.5)
    raise RuntimeError(f"the neighbour was not {key} after {timeout_s:.0f} s")


def start_cell(out: str, stop: str, busy: int = 6) -> str:
    """The cell a learner's kernel runs to start the neighbour in the background: this file's own
    source, passed with -c (no installed package holds it, and the learner need not read the checkout)."""
    source = Path(__file__).read_text()
    return (f"import subprocess, sys\n_neighbour = subprocess.Popen([sys.executable, '-c', {source!r}, "
            f"'--out', {out!r}, '--stop', {stop!r}, '--busy', '{busy}'], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\nprint(_neighbour.pid)")


if __name__ == "__main__":
    sys.exit(main())
