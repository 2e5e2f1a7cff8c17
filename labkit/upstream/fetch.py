"""A vLLM release's few audited files, fetched from the package registry with pip and cached under build/.

    fetch_release(version, trees=TREES) -> Path     build/vllm-trees/<version>/ (a tree audit-vllm reads)
    python -m labkit upstream fetch [VERSION ...]   fetch the pinned releases (labkit.upstream.releases)

pip downloads the release's wheel (no dependencies, for CPython 3.12 on manylinux x86_64: the
sampling kernel is pure Python, so any platform's wheel holds the same file) into a temporary
folder under build/; only the files the audit reads are extracted (``vllm/_version.py``, the
sampling kernel, the speculators under ``spec_decode/``), the wheel is deleted, and
``FETCHED_FROM.json`` records the wheel's name and sha256. A second call finds the folder and
downloads nothing. Nothing here is ever committed (build/ is ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from labkit import paths
from labkit.upstream.loader import KERNEL_FILE, VERSION_FILE
from labkit.upstream.releases import RELEASES
from labkit.upstream.speculator_reading import SPEC_DECODE

PROGRAM = "python -m labkit upstream fetch"
TREES = paths.BUILD / "vllm-trees"
MARKER = "FETCHED_FROM.json"
PIP_PLATFORM = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")


class FetchError(RuntimeError):
    """pip could not fetch the release; `.pip_output` holds what it said."""

    def __init__(self, message: str, pip_output: str = ""):
        super().__init__(message)
        self.pip_output = pip_output


def wanted(name: str) -> bool:
    """Whether a wheel member is one of the files the audit reads."""
    return name in (KERNEL_FILE, VERSION_FILE) or (name.startswith(SPEC_DECODE + "/") and name.endswith(".py"))


def cached(version: str, trees: Path = TREES) -> Path | None:
    folder = Path(trees) / version
    return folder if (folder / MARKER).is_file() and (folder / KERNEL_FILE).is_file() else None


@contextlib.contextmanager
def _locked(trees: Path):
    """One fetch at a time per folder: parallel test workers share build/vllm-trees/."""
    trees.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): fetches are rare enough to go unlocked
        yield
        return
    with open(trees / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch_release(version: str, trees: Path = TREES, *, timeout_s: int = 60, log=None) -> Path:
    """The folder of `version`'s audited files, downloading the wheel once if it is not cached."""
    hit = cached(version, trees)
    if hit:
        return hit
    trees = Path(trees)
    with _locked(trees):
        hit = cached(version, trees)  # another process may have fetched it while this one waited
        return hit or _download(version, trees, timeout_s, log)


def _download(version: str, trees: Path, timeout_s: int, log) -> Path:
    with tempfile.TemporaryDirectory(dir=trees, prefix=f".wheel-{version}-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *PIP_PLATFORM,
               "--timeout", str(timeout_s), "--retries", "1", "--dest", tmp, f"vllm=={version}"]
        if log:
            log(f"fetching vllm=={version} with pip (about 300 MB, deleted after extraction) ...")
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("vllm-*.whl"))
        if done.returncode != 0 or not wheels:
            raise FetchError(f"pip download vllm=={version} failed (exit {done.returncode})",
                             (done.stdout + done.stderr)[-4000:])
        wheel = wheels[0]
        digest = hashlib.sha256()
        with wheel.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        staging = Path(tmp) / "tree"
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if wanted(m)]
            if KERNEL_FILE not in members:
                raise FetchError(f"vllm=={version}'s wheel has no {KERNEL_FILE}: not a release with Model Runner "
                                 "V2's sampling kernel")
            for m in members:
                zf.extract(m, staging)
        wheel.unlink()
        (staging / MARKER).write_text(json.dumps({"package": "vllm", "version": version, "wheel": wheel.name,
                                                  "wheel_sha256": digest.hexdigest(), "files": sorted(members),
                                                  "command": "pip download --no-deps --only-binary=:all: "
                                                  + " ".join(PIP_PLATFORM) + f" vllm=={version}"}, indent=1))
        folder = trees / version
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    return folder


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="Fetch vLLM releases' audited files into "
                                     f"{TREES.relative_to(paths.REPO)}/ and print their folders.")
    parser.add_argument("versions", nargs="*", metavar="VERSION",
                        help=f"vLLM releases (default: the pinned ones, {', '.join(RELEASES)})")
    for version in parser.parse_args(argv).versions or list(RELEASES):
        try:
            print(fetch_release(version, log=lambda m: print(m, file=sys.stderr)))
        except FetchError as err:
            print(f"{PROGRAM}: {err}\n{err.pip_output}", file=sys.stderr)
            return 1
    return 0
