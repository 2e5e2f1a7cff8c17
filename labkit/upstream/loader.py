"""Find a vLLM tree and load its Gumbel sampling kernel file alone, without importing the rest of vLLM.

    find_tree(path=None) -> Path          the folder that holds ``vllm/`` (default: the installed vllm)
    tree_provenance(tree) -> dict         version and commit (``vllm/_version.py``, else git), file hash
    load_vllm_sampling(tree) -> module    ``vllm/v1/worker/gpu/sample/gumbel.py``, executed with a shim

The kernel file imports only ``torch`` and ``from vllm.triton_utils import HAS_TRITON, tl, tldevice,
triton``. Importing the real ``vllm.triton_utils`` would import ``vllm`` (and, in newer releases,
``vllm.envs`` and the platform detection), which needs vLLM's compiled extensions and its pinned
torch. So while the file executes, ``sys.modules`` holds a synthetic ``vllm`` package with one
synthetic ``vllm.triton_utils`` module that hands over this process's Triton; both entries are
put back as they were afterwards. The file is executed from where it lies in the tree, so Triton
(compiled or interpreted) reads each ``@triton.jit`` function's source from that file.

One difference under Triton's CPU interpreter: it has no libdevice, so ``tldevice.log1p`` (used by
releases up to mid-2026 for the Gumbel transform) is given as ``log(1 + x)``. That changes noise
values in the last bits, never an address, a mask or which row stores where.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import subprocess
import sys
import types
from pathlib import Path

from labkit import backends
from labkit.errors import LabkitInputError

KERNEL_FILE = "vllm/v1/worker/gpu/sample/gumbel.py"
VERSION_FILE = "vllm/_version.py"
SHIM_MODULE = "vllm.triton_utils"
SHIM_NAMES = ("HAS_TRITON", "tl", "tldevice", "triton")
_LOADED: dict[tuple[str, str], types.ModuleType] = {}


class NoVllmTree(LabkitInputError):
    """No vLLM tree where one was asked for (or none installed)."""


def find_tree(path: str | Path | None = None) -> Path:
    """The folder that holds ``vllm/v1/worker/gpu/sample/gumbel.py``.

    `path` may be that folder (a source checkout, a site-packages, the tests' extracted files), the
    ``vllm`` package folder itself, or the kernel file. Without `path`: the installed ``vllm``,
    located without importing it.
    """
    if path is None:
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise NoVllmTree("no vLLM is installed in this Python; pass --vllm PATH (a vLLM source tree "
                             "or installation)")
        candidates = [Path(p).parent for p in spec.submodule_search_locations]
    else:
        given = Path(path).expanduser()
        if not given.exists():
            raise NoVllmTree(f"--vllm {path}: no such file or folder")
        given = given.resolve()
        if given.is_dir():
            candidates = [given, given.parent]  # the tree, or its vllm/ package folder
        else:
            candidates = [given.parents[5]] if given.as_posix().endswith(KERNEL_FILE) else []
    for root in candidates:
        if (root / KERNEL_FILE).is_file():
            return root
    where = path if path is not None else candidates[0] if candidates else "the installed vllm"
    raise NoVllmTree(f"{where} holds no {KERNEL_FILE}: not a vLLM tree with Model Runner V2's sampling "
                     "kernel (vLLM releases from mid-2026 on have it)")


def _literal_assignments(path: Path) -> dict[str, object]:
    """Module-level ``name = literal`` assignments of a Python file, without executing it."""
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = value
    return out


def _git_commit(tree: Path) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and (tree / ".git").exists() else None


def tree_provenance(tree: str | Path) -> dict:
    """What the audited file is: the tree's version and commit, how they were read, the file's sha256."""
    tree = Path(tree)
    kernel = tree / KERNEL_FILE
    prov: dict = {"tree": str(tree), "kernel_file": KERNEL_FILE,
                  "kernel_sha256": hashlib.sha256(kernel.read_bytes()).hexdigest()}
    version_file = tree / VERSION_FILE
    if version_file.is_file():
        values = _literal_assignments(version_file)
        commit = values.get("commit_id") or values.get("__commit_id__")
        prov["version"] = values.get("version") or values.get("__version__")
        # setuptools-scm writes the commit as 'g' + short hash
        prov["commit"] = commit[1:] if isinstance(commit, str) and commit.startswith("g") else commit
        prov["version_from"] = VERSION_FILE
    git = _git_commit(tree)
    if git:
        prov["commit"], prov["commit_from"] = git, "git rev-parse HEAD"
    elif prov.get("commit"):
        prov["commit_from"] = VERSION_FILE
    else:
        prov["commit"], prov["commit_from"] = None, "unknown: no vllm/_version.py and no git checkout"
    fetched = tree / "FETCHED_FROM.json"
    if fetched.is_file():
        import json

        prov["fetched_from"] = json.loads(fetched.read_text())
    return prov


def kernel_imports(path: Path) -> list[str]:
    """What the kernel file imports, as ``module`` or ``module:name`` strings."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out += [f"{node.module}:{a.name}" for a in node.names]
    return out


def _check_imports(path: Path) -> None:
    foreign = [name for name in kernel_imports(path)
               if not (name.split(".")[0].split(":")[0] in ("torch", "__future__", "typing", "math")
                       or (name.startswith(SHIM_MODULE + ":") and name.split(":")[1] in SHIM_NAMES))]
    if foreign:
        raise LabkitInputError(f"{path} imports {', '.join(foreign)}: the kit loads a kernel file that needs only "
                               f"torch and {SHIM_MODULE} ({', '.join(SHIM_NAMES)}), as vLLM's releases "
                               "0.24.0 to 0.33.0 do; this tree's file needs more")


def _libdevice():
    import triton.language.extra.libdevice as libdevice

    if not backends.KERNELS_INTERPRETED:
        return libdevice
    from labkit.upstream import interpreter_libdevice

    return interpreter_libdevice.with_fallbacks(libdevice)


def _shim() -> dict[str, types.ModuleType]:
    import triton
    import triton.language as tl

    package = types.ModuleType("vllm")
    package.__path__ = []  # a package with nothing in it: only the shim below can be imported from it
    utils = types.ModuleType(SHIM_MODULE)
    utils.__doc__ = "labkit's stand-in for vllm.triton_utils: this process's Triton, nothing else"
    utils.HAS_TRITON, utils.triton, utils.tl, utils.tldevice = True, triton, tl, _libdevice()
    package.triton_utils = utils
    return {"vllm": package, SHIM_MODULE: utils}


@contextlib.contextmanager
def _shimmed_vllm():
    shim = _shim()
    saved = {name: sys.modules.get(name) for name in shim}
    sys.modules.update(shim)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_vllm_sampling(tree: str | Path | None = None) -> types.ModuleType:
    """vLLM's ``sample/gumbel.py`` from `tree` (see :func:`find_tree`), as a module of this process.

    Loaded once per file content and backend; the module is named ``labkit_vllm_gumbel_<sha8>`` and
    its ``__file__`` is the file in the tree.
    """
    if not backends.HAS_TRITON:
        raise LabkitInputError("vLLM's sampling kernel is a Triton kernel, and Triton is not installed here "
                               "(it installs on Linux)")
    root = find_tree(tree)
    path = root / KERNEL_FILE
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = (digest, "interpreter" if backends.KERNELS_INTERPRETED else "compiled")
    if key in _LOADED:
        return _LOADED[key]
    try:
        _check_imports(path)
    except SyntaxError as err:
        raise LabkitInputError(f"{path} is not Python the kit can read: SyntaxError: {err.msg} "
                               f"(line {err.lineno})") from err
    name = f"labkit_vllm_gumbel_{digest[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with _shimmed_vllm():
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:
            sys.modules.pop(name, None)
            raise LabkitInputError(f"{path} did not load with the kit's stand-in for {SHIM_MODULE}: "
                                   f"{type(err).__name__}: {err}") from err
    _LOADED[key] = module
    return module
