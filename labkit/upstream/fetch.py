"""A vLLM release's few audited files, read from the package registry and cached under build/.

    index_releases() -> list[Release]          every final release on the index, with its wheel and date
    trees_folder() -> Path                      $LABKIT_VLLM_TREES, else build/vllm-trees/
    fetch_release(version, trees=None) -> Path  <trees>/<version>/ (a tree audit-vllm reads)
    python -m labkit upstream fetch [VERSION ...] [--trees FOLDER]
                                                (no VERSION: every release from the first with the
                                                sampling kernel to the newest; needs no torch)

A release's wheel is a zip of 200-500 MB, of which the audit reads a few hundred kB of Python. So the
fetcher asks the index (its JSON API, PEP 691) for the release's files, picks an x86-64 wheel
(every platform's wheel holds the same Python), and reads only the zip's directory and the members
the audit needs, by HTTP range requests: Model Runner V2's ``vllm/v1/worker/gpu/`` (the sampling
kernel, the speculators, and what they import from each other), ``vllm/triton_utils/`` and
``vllm/_version.py``. Python's zipfile checks each member's CRC-32 against the wheel's own
directory as it reads it. ``FETCHED_FROM.json`` records the wheel's name, the sha256 the index lists
for it, its upload date, and the files kept. A second call finds the folder and reads nothing.
Nothing here is ever committed (build/ is ignored).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError
from labkit.upstream.loader import KERNEL_FILE, VERSION_FILE

TREES = paths.BUILD / "vllm-trees"
TREES_ENV = "LABKIT_VLLM_TREES"  # where fetched trees are kept instead (the folder carried to a GPU box)
MARKER = "FETCHED_FROM.json"
INDEX_ENV = "LABKIT_INDEX_URL"  # a mirror of PyPI's JSON API (PEP 691), for a registry behind a proxy
DEFAULT_INDEX = "https://pypi.org/simple"
PACKAGE = "vllm"
# Model Runner V2 and Triton's wrapper, and the one constant DFlash's input preparation takes from
# attention (PAD_SLOT_ID): what the audit reads and runs.
KEPT = ("vllm/v1/worker/gpu/", "vllm/triton_utils/", "vllm/v1/attention/backends/utils.py")
FIRST = (0, 12, 0)  # the first release with Model Runner V2's sampling kernel (vllm/v1/worker/gpu/sample/gumbel.py)


class FetchError(LabkitInputError):
    """The index or the wheel could not be read; the message says which and why, in one line."""


@dataclass(frozen=True)
class Release:
    version: str
    wheel: str  # the wheel's file name
    url: str
    size: int
    sha256: str | None
    uploaded: str  # ISO date the index gives for the wheel

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.version)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def trees_folder() -> Path:
    """Where releases' files are kept: ``$LABKIT_VLLM_TREES``, else build/vllm-trees/."""
    return Path(os.environ.get(TREES_ENV) or TREES)


def wanted(name: str) -> bool:
    """Whether a wheel member is one of the files the audit reads."""
    return name == VERSION_FILE or (name.endswith(".py") and name.startswith(KEPT))


def _index_url() -> str:
    return os.environ.get(INDEX_ENV, DEFAULT_INDEX).rstrip("/")


def _open(url: str, headers: dict | None = None, timeout_s: int = 60):
    request = urllib.request.Request(url, headers={"User-Agent": "labkit-upstream-fetch", **(headers or {})})
    try:
        return urllib.request.urlopen(request, timeout=timeout_s)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or getattr(err, "code", None) or err
        raise FetchError(f"{url}: {reason}") from None


def index_releases(timeout_s: int = 60) -> list[Release]:
    """Every final release of vLLM on the index that has an x86-64 wheel, oldest first."""
    url = f"{_index_url()}/{PACKAGE}/"
    with _open(url, {"Accept": "application/vnd.pypi.simple.v1+json"}, timeout_s) as response:
        try:
            listing = json.load(response)
        except ValueError:
            raise FetchError(f"{url} did not answer with the index's JSON (PEP 691)") from None
    pattern = re.compile(rf"^{PACKAGE}-(\d+\.\d+\.\d+)(?:-\d+)?-.*x86_64\.whl$")
    found: dict[str, Release] = {}
    for f in listing.get("files", []):
        m = pattern.match(f.get("filename", ""))
        if not m or f.get("yanked"):
            continue
        version = m.group(1)
        if version not in found:  # the first x86-64 wheel of a release: every platform's holds the same Python
            found[version] = Release(version, f["filename"], f["url"], int(f.get("size") or 0),
                                     (f.get("hashes") or {}).get("sha256"), str(f.get("upload-time", ""))[:10])
    return sorted(found.values(), key=lambda r: r.key)


def audited_releases(releases: list[Release] | None = None) -> list[Release]:
    """The releases from the first with Model Runner V2's sampling kernel to the newest on the index."""
    return [r for r in (releases if releases is not None else index_releases()) if r.key >= FIRST]


def cached(version: str, trees: Path | None = None) -> Path | None:
    """`version`'s folder, if it was fetched with the files the audit reads now (a folder fetched when
    the kit kept fewer is fetched again)."""
    folder = Path(trees if trees is not None else trees_folder()) / version
    if not ((folder / MARKER).is_file() and (folder / VERSION_FILE).is_file()):
        return None
    try:
        kept = json.loads((folder / MARKER).read_text()).get("kept")
    except (OSError, ValueError):
        return None
    return folder if kept == list(KEPT) else None


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


class _RangeReader(io.RawIOBase):
    """A remote file, read by HTTP range requests: what zipfile needs to read a wheel's directory and a
    few of its members without the whole wheel."""

    def __init__(self, url: str, size: int, timeout_s: int):
        self.url, self.size, self.position, self.timeout_s = url, size, 0, timeout_s

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = (offset if whence == 0 else self.position + offset if whence == 1 else self.size + offset)
        return self.position

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.position)
        if n <= 0:
            return 0
        span = f"bytes={self.position}-{self.position + n - 1}"
        with _open(self.url, {"Range": span}, self.timeout_s) as response:
            if response.status != 206:
                raise FetchError(f"{self.url}: the server answered {response.status} to a range request")
            data = response.read()
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def fetch_release(version: str, trees: Path | None = None, *, timeout_s: int = 60, log=None,
                  releases: list[Release] | None = None) -> Path:
    """The folder of `version`'s audited files (under `trees`, default :func:`trees_folder`), read from the
    index once if it is not cached."""
    trees = Path(trees if trees is not None else trees_folder())
    hit = cached(version, trees)
    if hit:
        return hit
    with _locked(trees):
        hit = cached(version, trees)  # another process may have fetched it while this one waited
        if hit:
            return hit
        known = releases if releases is not None else index_releases(timeout_s)
        release = next((r for r in known if r.version == version), None)
        if release is None:
            newest = ", ".join(r.version for r in known[-3:])
            raise FetchError(f"the index has no x86-64 wheel of {PACKAGE}=={version} (its newest: {newest})")
        return _extract(release, trees, timeout_s, log)


def _extract(release: Release, trees: Path, timeout_s: int, log) -> Path:
    if log:
        log(f"reading {release.wheel}'s audited files from the index ({release.size / 1e6:.0f} MB wheel, a few "
            "hundred kB read) ...")
    with tempfile.TemporaryDirectory(dir=trees, prefix=f".{release.version}-") as tmp:
        staging = Path(tmp) / "tree"
        try:
            with zipfile.ZipFile(io.BufferedReader(_RangeReader(release.url, release.size, timeout_s),
                                                   buffer_size=1 << 16)) as wheel:
                members = [m for m in wheel.namelist() if wanted(m)]
                if VERSION_FILE not in members:
                    raise FetchError(f"{release.wheel} has no {VERSION_FILE}: not a vLLM wheel the kit can read")
                for member in members:
                    wheel.extract(member, staging)  # zipfile checks the member's CRC-32 as it reads it
        except (zipfile.BadZipFile, OSError) as err:
            raise FetchError(f"{release.wheel}: {err}") from None
        (staging / MARKER).write_text(json.dumps({
            "package": PACKAGE, "version": release.version, "wheel": release.wheel, "url": release.url,
            "wheel_sha256_listed": release.sha256, "uploaded": release.uploaded,
            "files": sorted(members), "kept": list(KEPT),
            "has_sampling_kernel": KERNEL_FILE in members,
            "how": "the index's JSON API (PEP 691), then HTTP range requests for the wheel's directory and these "
                   "members; each member's CRC-32 checked against the wheel's directory"}, indent=1))
        folder = trees / release.version
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    return folder


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m labkit upstream fetch",
                                     description="Read vLLM releases' audited files from the package index into "
                                                 f"${TREES_ENV} or build/vllm-trees/ (a few hundred kB each, by range "
                                                 "requests). Needs no torch: run it where the index is reachable and "
                                                 "carry the folder to a machine without a network.")
    parser.add_argument("versions", nargs="*", help="releases to fetch (default: every release from "
                                                    f"{'.'.join(map(str, FIRST))} to the newest on the index)")
    parser.add_argument("--trees", default=None, metavar="FOLDER",
                        help=f"where to keep them (default: ${TREES_ENV}, else build/vllm-trees)")
    args = parser.parse_args(argv)
    folder = Path(args.trees) if args.trees else trees_folder()
    try:
        # The index is asked only for what is not in the folder already (none of it, offline, if all is)
        known = None if args.versions and all(cached(v, folder) for v in args.versions) else index_releases()
        versions = args.versions or [r.version for r in audited_releases(known)]
        for version in versions:
            print(fetch_release(version, folder, releases=known, log=lambda m: print(m, file=sys.stderr)))
    except FetchError as err:
        print(f"python -m labkit upstream fetch: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # python -m labkit.upstream.fetch: the same command
    sys.exit(main())
