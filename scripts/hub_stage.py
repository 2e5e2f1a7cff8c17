"""The hub stage of `make test`: tests/test_hub.py, run from a place the room can serve its learners from.

A room gives each learner's server its own /tmp, /var/tmp, /dev/shm and /run/lock, so it refuses to
start from a checkout under one of them (a common place to clone into), and tests/test_hub.py skips
there. Where that is what stands in the way and this is root with mounts allowed (the only case in
which the room gives servers folders of their own), the checkout is bind-mounted on a new folder
outside them, /srv/labkit-hub-PID (or under /opt, /mnt): the same files, its venv included, nothing
copied; the test runs there, and the mount and the folder are removed afterwards, on a failure or
Ctrl-C too. Where the test still cannot run (not root, no hub extra, a home closed to other users),
pytest collects nothing and exits 5: the stage says why in one line and passes, as a skip.

    .venv/bin/python scripts/hub_stage.py [PYTEST OPTIONS ...]      (from the checkout's root)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/test_hub.py"
PLACES = ("/srv", "/opt", "/mnt")  # outside every folder a learner's server gets a copy of
NOTHING_COLLECTED = 5  # pytest's exit status when every test module skipped itself


def hidden_folder() -> str | None:
    """The shared folder this checkout lies under, where a room would give servers their own copy of
    it (root, mounts allowed); None where the checkout can be served from where it is."""
    sys.path.insert(0, str(ROOT / "room"))
    try:
        from labkit_room import sandbox
    except ImportError:  # the room is not installed here: tests/test_hub.py says so itself
        return None

    hidden = sandbox.hidden_by_private_folders(ROOT)
    if not hidden or os.geteuid() != 0 or sandbox.can_mount():
        return None
    return hidden


def bind_elsewhere() -> Path:
    """A new folder outside the shared ones with this checkout bind-mounted on it."""
    for parent in map(Path, PLACES):
        if not parent.is_dir():
            continue
        place = parent / f"labkit-hub-{os.getpid()}"
        place.mkdir(mode=0o755)
        done = subprocess.run(["mount", "--bind", str(ROOT), str(place)], capture_output=True, text=True)
        if done.returncode == 0:
            return place
        place.rmdir()
        raise OSError(f"mount --bind {ROOT} {place} failed: {done.stderr.strip() or done.returncode}")
    raise OSError(f"none of {', '.join(PLACES)} exists to mount the checkout on")


def unbind(place: Path) -> None:
    if subprocess.run(["umount", str(place)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(place)], capture_output=True)  # a process still inside
    try:
        place.rmdir()
    except OSError as err:
        print(f"== stage hub: could not remove {place} ({err.strerror}): remove it by hand", flush=True)


def run_test(where: Path, options: list[str]) -> int:
    """pytest on the hub test from `where` (the venv seen through it), its output passed on as it comes;
    pytest's 'nothing collected' becomes one line that says why, and a pass."""
    prefix, python = Path(sys.prefix), Path(sys.executable)
    for base in (ROOT, Path.cwd()):  # the venv inside the checkout: the same venv, seen from `where`
        if prefix.is_relative_to(base):
            python = where / prefix.relative_to(base) / "bin" / "python"
            break
    proc = subprocess.Popen([str(python), "-m", "pytest", "-rs", *options, TEST], cwd=where,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        print(line, end="", flush=True)
    status = proc.wait()
    if status != NOTHING_COLLECTED:
        return status
    reasons = [m.group(1) for line in lines if (m := re.match(r"SKIPPED \[\d+\] [^:]+:\d+: (.*)", line.strip()))]
    print(f"== stage hub: not run here: {reasons[0] if reasons else 'pytest collected no test'}", flush=True)
    return 0


def main(options: list[str]) -> int:
    # Ended by make (SIGTERM, or SIGINT from scripts/timed): unwind, so that the mount is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hidden = hidden_folder()
    if not hidden:
        return run_test(ROOT, options)
    try:
        place = bind_elsewhere()
    except OSError as err:
        print(f"== stage hub: this checkout is under {hidden}, which a room gives each learner a copy of, and it "
              f"could not be mounted elsewhere ({err}): the test runs here", flush=True)
        return run_test(ROOT, options)
    print(f"== stage hub: this checkout is under {hidden}, which a room gives each learner a copy of: the test "
          f"runs from {place}, the same checkout mounted there", flush=True)
    try:
        return run_test(place, options)
    finally:
        unbind(place)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
