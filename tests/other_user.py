"""What another user of the box sees of our processes: every command line, read as an unprivileged
user (nobody) in a process of their own. The room's and the lab's tests use it to show that no
token is on a command line (tests/test_hub.py, tests/test_lab_secrets.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

NOBODY = 65534

# Each process's pid, a tab, its command line (NULs as spaces), and whether its environment was
# readable: a shell as nobody needs no Python (the kit's may sit under a folder only root opens).
_READ_ALL = r'''
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  line=$(tr '\0\n' '  ' < "$dir/cmdline" 2>/dev/null) || continue
  if cat "$dir/environ" >/dev/null 2>&1; then env=readable; else env=closed; fi
  printf '%s\t%s\t%s\n' "$pid" "$env" "$line"
done
'''


def command_lines(uid: int = NOBODY) -> dict[int, tuple[str, bool]]:
    """{pid: (command line, environment readable)} of every process, as user `uid` reads them."""
    done = subprocess.run(["sh", "-c", _READ_ALL], user=uid, group=uid, extra_groups=[], capture_output=True,
                          text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    found = {}
    for row in done.stdout.splitlines():
        pid, env, line = (row.split("\t", 2) + ["", ""])[:3]
        found[int(pid)] = (line, env == "readable")
    return found


def secrets_seen(secrets: list[str], uid: int = NOBODY) -> list[str]:
    """The command lines (pid: line) that hold any of `secrets`, as `uid` reads them."""
    secrets = [s for s in secrets if s]
    return [f"{pid}: {line[:200]}" for pid, (line, _) in command_lines(uid).items() if any(s in line for s in secrets)]


def pids_ever(uid: int) -> set[int]:
    """Every pid of `uid` in /proc, zombies included, by its entry's owner alone (no file read per
    pid): a process that forks and exits every millisecond shows as new pids between two calls,
    where a scan that reads each status would read its pid after it is gone."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                found.add(int(entry.name))
        except OSError:
            continue
    return found
