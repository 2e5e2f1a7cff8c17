"""compute-sanitizer's memcheck on the sampling kernel: the fix reads nothing out of bounds, the
fill alone does.

The host fill alone is not safe: the kernel must also stop every slot-indexed access of a padded
row. Without that ("fill only"), the row reads ``temperature[-1]`` and ``seeds[-1]`` and stores ``q[-1]``: bytes
just before those buffers. With its checks on (``validate=True``, the default) the kit refuses that
launch on every backend; with them off, on a GPU, memcheck sees the accesses.
:func:`memcheck` runs :mod:`labkit.gpu.sanitizer_probe` under

    compute-sanitizer --tool memcheck --report-api-errors no --launch-timeout 0 \\
        python -m labkit.gpu.sanitizer_probe CASE

for ``fixed`` (expect 0 errors), ``fill_only`` (expect invalid ``__global__`` reads) and
``stale_slot``, the bug itself (expect 0 errors: every access is in bounds, while the probe sees the
padded row's values land in a live request's q, as the padding-invariance audit does), and counts
what it reports. API errors are left out of the count (CUDA libraries probe for optional
entry points and memcheck would count those); memory errors are all counted.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from labkit import paths
from labkit.gpu.sanitizer_probe import CASES

OVERRIDE = "LABKIT_COMPUTE_SANITIZER"  # a path to the binary, where it is not found by itself
MEMCHECK_OPTIONS = ("--tool", "memcheck", "--report-api-errors", "no", "--launch-timeout", "0")
TIMEOUT_S = 300
EXPECTED = {"fixed": "0 errors: a padded row's masked loads and store touch no memory",
            "fill_only": "invalid __global__ reads (temperature[-1], seeds[-1]); the q[-1] store as well if "
                         "the kernel gets that far before memcheck stops it",
            "stale_slot": "0 errors, while the padded row's values land in live slot 7's q (probe.audit): every "
                          "access is in bounds, so memcheck cannot see the bug; the audit's comparison does"}
_REPO = paths.REPO


def _candidates() -> list[str]:
    found = [os.environ.get(OVERRIDE), shutil.which("compute-sanitizer")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.append(str(Path(os.environ[var]) / "bin" / "compute-sanitizer"))
    found += sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"), reverse=True)
    # pip's NVIDIA wheels (nvidia-cuda-sanitizer-api) keep it inside site-packages.
    for entry in sys.path:
        found += glob.glob(os.path.join(entry, "nvidia", "*", "compute-sanitizer", "compute-sanitizer"))
        found += glob.glob(os.path.join(entry, "nvidia", "*", "bin", "compute-sanitizer"))
    return [c for c in found if c]


def find_compute_sanitizer() -> str | None:
    """The compute-sanitizer binary: $LABKIT_COMPUTE_SANITIZER, PATH, $CUDA_HOME/bin, /usr/local/cuda*/bin."""
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def parse_memcheck(output: str) -> dict:
    """Counts from memcheck's report, and the probe's own line (``PROBE {json}``)."""
    summary = re.search(r"ERROR SUMMARY:\s*(\d+)\s+error", output)
    probe = None
    for line in output.splitlines():
        if line.startswith("PROBE "):
            probe = json.loads(line[len("PROBE "):])
    findings = [line.strip() for line in output.splitlines() if line.startswith("=========") and
                ("Invalid" in line or "Address" in line or "bytes before" in line or "bytes after" in line)]
    return {"errors": int(summary.group(1)) if summary else None,
            "invalid_reads": len(re.findall(r"Invalid __global__ read", output)),
            "invalid_writes": len(re.findall(r"Invalid __global__ write", output)),
            "probe": probe, "excerpt": findings[:12]}


def probe_environment() -> dict:
    env = dict(os.environ)
    # Each tensor its own cudaMalloc, so that memcheck's allocation bounds are the tensors' bounds.
    env.update(PYTORCH_NO_CUDA_MEMORY_CACHING="1", LABKIT_BACKEND="triton", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(_REPO), env.get("PYTHONPATH")) if p))
    return env


def memcheck(case: str, binary: str | None = None, timeout_s: int = TIMEOUT_S) -> dict:
    """Run the probe for `case` under memcheck; counts, the probe's report, and an excerpt."""
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}, got {case!r}")
    binary = binary or find_compute_sanitizer()
    if binary is None:
        raise FileNotFoundError(f"compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda*/bin); "
                                f"set {OVERRIDE}=/path/to/compute-sanitizer")
    cmd = [binary, *MEMCHECK_OPTIONS, sys.executable, "-m", "labkit.gpu.sanitizer_probe", case]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=_REPO,
                              env=probe_environment())
        output, returncode = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as err:
        output, returncode = _text(err.stdout) + _text(err.stderr), None
    result = {"case": case, "command": " ".join(cmd[1:]), "returncode": returncode,
              "seconds": round(time.perf_counter() - t0, 1), **parse_memcheck(output)}
    if result["probe"] is None:
        result["output_tail"] = output[-2000:]
    return result


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def sanitizer_version(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else None


def sanitizer_section(log=print) -> dict:
    """The record's "sanitizer": both cases under memcheck, with the binary and its version."""
    binary = find_compute_sanitizer()
    if binary is None:
        raise FileNotFoundError(f"compute-sanitizer not found; set {OVERRIDE}=/path/to/compute-sanitizer")
    out = {"binary": binary, "version": sanitizer_version(binary), "options": list(MEMCHECK_OPTIONS),
           "expected": EXPECTED}
    for case in CASES:
        out[case] = memcheck(case, binary)
        r = out[case]
        log(f"  {case}: {r['errors']} errors ({r['invalid_reads']} invalid reads, {r['invalid_writes']} invalid "
            f"writes) in {r['seconds']} s; probe {r['probe']}")
    return out
