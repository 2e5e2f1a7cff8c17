"""FlashInfer's one-pass sampling from logits, as a peer of the kit's sampler (GPU only).

    flashinfer_sampler()   (sample, provenance) or (None, why it is not available)

Where it comes from, in this order:

1. an installed ``flashinfer`` package (``pip install flashinfer-python``):
   ``flashinfer.sampling.sampling_from_logits``;
2. FlashInfer's headers, named by ``LABKIT_FLASHINFER_INCLUDE=DIR`` (the folder that holds
   ``flashinfer/sampling.cuh``; in a FlashInfer wheel or install it is ``flashinfer/data/include``):
   the kit compiles a few lines of C++ that call FlashInfer's ``SamplingFromLogits`` template
   with ``nvcc`` (from ``CUDA_HOME`` or the PATH) into ``build/flashinfer-peer/`` and calls it
   through ctypes on torch's current stream. No FlashInfer code is copied into this repository.

Either way it is FlashInfer's kernel ``SamplingFromLogitsKernel``: one thread block per row,
Philox noise from cuRAND, a block-wide argmax. It applies no temperature and stores no q, so it
is timed beside the kit's call without q. Each row gets its own seed (FlashInfer's per-row seed
array), so rows are independent draws, which the distribution check needs.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import torch

from labkit import paths

INCLUDE_ENV = "LABKIT_FLASHINFER_INCLUDE"
BUILD_DIR = paths.BUILD / "flashinfer-peer"
ENTRY = "labkit_sampling_from_logits"

# The whole of the kit's side: one C function around FlashInfer's public template.
_WRAPPER = r"""
#include <flashinfer/sampling.cuh>
extern "C" int labkit_sampling_from_logits(float* logits, int32_t* out, uint32_t rows, uint32_t vocab,
                                           uint64_t* seeds, uint64_t* offsets, void* stream) {
  // deterministic=true; per-row seeds and offsets (strides 1)
  return static_cast<int>(flashinfer::sampling::SamplingFromLogits<float, int32_t>(
      logits, out, nullptr, rows, vocab, true, seeds, 0, offsets, 0,
      static_cast<cudaStream_t>(stream), 1, 1));
}
"""


def _nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def _release(include: Path) -> dict:
    """FlashInfer's version and commit from ``_build_meta.py`` two folders above the headers (a wheel's
    ``flashinfer/data/include`` has it at ``flashinfer/_build_meta.py``), if it is there."""
    import ast

    meta = include.resolve().parents[1] / "_build_meta.py"
    found = {}
    try:
        for node in ast.parse(meta.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in ("__version__", "__git_commit__"):
                        found[target.id.strip("_").replace("git_", "")] = node.value.value
    except (OSError, SyntaxError, IndexError):
        pass
    return found


def _header_version(include: Path) -> str:
    text = (include / "flashinfer" / "sampling.cuh").read_bytes()
    return "sampling.cuh sha256 " + hashlib.sha256(text).hexdigest()[:16]


def build_from_headers(include: Path, log=print) -> tuple[ctypes.CDLL, dict]:
    """Compile the wrapper against FlashInfer's headers (cached by header hash and GPU arch)."""
    nvcc = _nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found (set CUDA_HOME or put nvcc on the PATH)")
    arch = _arch()
    key = hashlib.sha256((_WRAPPER + _header_version(include) + arch).encode()).hexdigest()[:12]
    lib = BUILD_DIR / f"libflashinfer_peer_{key}.so"
    flags = ["-O3", "-std=c++17", f"-arch={arch}", "--expt-relaxed-constexpr", "-shared", "-Xcompiler", "-fPIC",
             "-cudart", "static"]
    if not lib.exists():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        src = BUILD_DIR / f"wrapper_{key}.cu"
        src.write_text(_WRAPPER)
        log(f"  compiling FlashInfer's SamplingFromLogits for {arch} (nvcc, once) ...")
        done = subprocess.run([nvcc, *flags, "-I", str(include), str(src), "-o", str(lib)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("nvcc failed: " + (done.stderr or done.stdout).strip()[-600:])
    dll = ctypes.CDLL(str(lib))
    fn = getattr(dll, ENTRY)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p]
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return dll, {"source": f"headers from {INCLUDE_ENV}={include}", "headers": _header_version(include),
                 **_release(include),
                 "nvcc": nvcc_version[-1] if nvcc_version else nvcc, "flags": " ".join(flags)}


def _from_headers(include: Path, log):
    dll, prov = build_from_headers(include, log)
    fn = getattr(dll, ENTRY)

    def sample(logits, temperature, seeds, positions):
        # FlashInfer samples softmax(logits): the temperature is applied first, as a caller would.
        scaled = logits if temperature is None else logits / temperature[:, None]
        rows, vocab = scaled.shape
        out = torch.empty(rows, dtype=torch.int32, device=scaled.device)
        offsets = positions.to(torch.int64)
        status = fn(scaled.data_ptr(), out.data_ptr(), rows, vocab, seeds.data_ptr(), offsets.data_ptr(),
                    torch.cuda.current_stream().cuda_stream)
        if status != 0:
            raise RuntimeError(f"FlashInfer's SamplingFromLogits returned CUDA error {status}")
        return out

    def sample_prescaled(logits, seeds, offsets, out):
        """The timed form: logits already scaled, buffers made beforehand (what a serving loop passes)."""
        fn(logits.data_ptr(), out.data_ptr(), logits.shape[0], logits.shape[1], seeds.data_ptr(), offsets.data_ptr(),
           torch.cuda.current_stream().cuda_stream)
        return out

    sample.prescaled = sample_prescaled
    return sample, prov


def _from_package():
    import flashinfer  # noqa: F401  (its absence is the caller's skip reason)
    from flashinfer.sampling import sampling_from_logits

    def sample(logits, temperature, seeds, positions):
        scaled = logits if temperature is None else logits / temperature[:, None]
        return sampling_from_logits(scaled, deterministic=True, seed=seeds, offset=positions)

    def sample_prescaled(logits, seeds, offsets, out):
        return sampling_from_logits(logits, deterministic=True, seed=seeds, offset=offsets)

    sample.prescaled = sample_prescaled
    return sample, {"source": "flashinfer package", "version": getattr(flashinfer, "__version__", "?")}


def flashinfer_sampler(log=print):
    """(sample, provenance), or (None, the reason FlashInfer cannot be had here)."""
    reasons = []
    try:
        return _from_package()
    except ImportError as err:
        reasons.append(f"no flashinfer package ({err.name or err})")
    except Exception as err:  # an installed but broken package: say so, try the headers
        reasons.append(f"the flashinfer package does not load: {type(err).__name__}: {err}"[:300])
    include = os.environ.get(INCLUDE_ENV)
    if not include:
        reasons.append(f"and {INCLUDE_ENV} is not set (the folder holding flashinfer/sampling.cuh)")
        return None, "; ".join(reasons)
    path = Path(include).expanduser()
    if not (path / "flashinfer" / "sampling.cuh").exists():
        reasons.append(f"{INCLUDE_ENV}={include} holds no flashinfer/sampling.cuh")
        return None, "; ".join(reasons)
    try:
        return _from_headers(path, log)
    except Exception as err:
        reasons.append(f"building from {path} failed: {type(err).__name__}: {err}"[:700])
        return None, "; ".join(reasons)
