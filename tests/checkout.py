"""Which files make up this checkout, with or without git: the tests that scan or copy the tree share it.

A clone has `.git` and git lists its files. A release tarball has none; unpacked inside another
repository (a home folder kept in git, a build folder), git would answer for *that* repository and
list nothing of this tree, so git's answer counts only when git's top level is this folder.
Without it the folder is walked, build outputs skipped.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a working tree holds besides its sources (all gitignored): skipped when there is no git to ask.
BUILD_OUTPUTS = {".git", ".venv", "build", "wheelhouse", "student", "screenshots", ".pytest_cache", "__pycache__",
                 ".ruff_cache", ".ipynb_checkpoints", "my_answers"}


def git(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess | None:
    """`git args` run in `root`, or None where it is not the top of a git checkout (no git, no .git, or
    a tree inside another repository)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
    except OSError:
        return None
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root.resolve():
        return None
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def no_git_reason() -> str:
    return (f"{ROOT} is not a git checkout (no .git: a release tarball or a copy), so there is no history "
            "to check against")


def checkout_files(*, untracked: bool = False, root: Path = ROOT) -> list[str]:
    """The checkout's files, relative to `root`: git's tracked files (with `untracked`, also the new ones
    git does not ignore), or, without git, every file outside the build outputs."""
    args = ["ls-files", "-z", "--cached"] + (["--others", "--exclude-standard"] if untracked else [])
    listed = git(*args, root=root)
    if listed is not None and listed.returncode == 0:
        return [name for name in listed.stdout.split("\0") if name and (root / name).is_file()]
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not BUILD_OUTPUTS & set(p.relative_to(root).parts))
