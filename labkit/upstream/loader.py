"""Find a vLLM tree and load its Gumbel sampling kernel, with what it imports from vLLM, without importing vLLM.

    find_tree(path=None) -> Path            the folder that holds ``vllm/`` (default: the installed vllm)
    tree_provenance(tree) -> dict           version and commit (``vllm/_version.py``, else git), file hash
    load_vllm_sampling(tree) -> module      ``vllm/v1/worker/gpu/sample/gumbel.py``, executed with its imports
    load_partial(tree, module, names)       the named definitions of one vLLM file, and what they need
    read_source(path) / parse(path)         a file's text and syntax tree, or one line on why not

Importing ``vllm`` runs its platform detection and needs its compiled extensions and pinned torch,
so the kit never imports it. The kernel file imports ``torch`` and ``vllm.triton_utils`` (Triton
itself), and in newer releases a helper or two from other files of Model Runner V2 (0.34.0 takes
``draft_logits_row`` from ``spec_decode/draft_logits.py``, whose other imports reach far into vLLM).
So while the file executes, ``sys.modules`` holds a synthetic ``vllm.triton_utils`` that hands over
this process's Triton, and each other vLLM module the file imports from, built from that module's
own file in the tree with only the definitions the file asks for and the ones those use (read with
``ast``). A name that needs more of vLLM than that is refused in one line, naming what it needs.
Every entry is put back as it was afterwards. Definitions keep their file and line numbers, so
Triton (compiled or interpreted) reads each ``@triton.jit`` function's source from the tree.

One difference under Triton's CPU interpreter: it has no libdevice, so ``tldevice.log1p`` (used by
some releases for the Gumbel transform) is given as ``log(1 + x)``. That changes noise values in the
last bits, never an address, a mask or which row stores where.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import importlib.util
import subprocess
import sys
import types
from pathlib import Path

from labkit.errors import LabkitInputError

KERNEL_FILE = "vllm/v1/worker/gpu/sample/gumbel.py"
VERSION_FILE = "vllm/_version.py"
SHIM_MODULE = "vllm.triton_utils"
SHIM_NAMES = ("HAS_TRITON", "tl", "tldevice", "triton")
_LOADED: dict[tuple[str, str], types.ModuleType] = {}


class NoVllmTree(LabkitInputError):
    """No vLLM tree where one was asked for (or none installed)."""


class NoModelRunnerV2(LabkitInputError):
    """A vLLM tree without Model Runner V2 (``vllm/v1/worker/gpu/``): its sampler is not the one the bug is in."""

    def __init__(self, tree: Path):
        self.tree = tree
        super().__init__(f"{tree} is a vLLM tree without Model Runner V2 (no vllm/v1/worker/gpu/): no Model Runner V2 "
                         "sampler")


MODEL_RUNNER_V2 = "vllm/v1/worker/gpu"


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
    for root in candidates:
        # A vLLM package without Model Runner V2 at all (releases before it): not the sampler the bug is in.
        # One that has Model Runner V2 but no sampling kernel where the kit reads it is not that: it falls
        # through to the error below (could not audit).
        if ((root / VERSION_FILE).is_file() or (root / "vllm" / "__init__.py").is_file()) \
                and not (root / MODEL_RUNNER_V2).exists():
            raise NoModelRunnerV2(root)
    where = path if path is not None else candidates[0] if candidates else "the installed vllm"
    raise NoVllmTree(f"{where} holds no {KERNEL_FILE}: not a vLLM tree with Model Runner V2's sampling kernel")


def _literal_assignments(path: Path) -> dict[str, object]:
    """Module-level ``name = literal`` assignments of a Python file, without executing it."""
    out: dict[str, object] = {}
    for node in parse(path).body:
        if isinstance(node, ast.Assign):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
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
                  "kernel_sha256": hashlib.sha256(kernel.read_bytes()).hexdigest() if kernel.is_file() else None}
    version_file = tree / VERSION_FILE
    if version_file.is_file():
        try:
            values = _literal_assignments(version_file)
        except LabkitInputError as err:  # the version is unknown; the audit of the rest goes on
            values = {}
            prov["version_problem"] = str(err).splitlines()[0]
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


def read_source(path: Path) -> str:
    """A file's text, or one line on why it cannot be read (a folder where a file should be, bytes that
    are not UTF-8, no permission)."""
    path = Path(path)
    if path.is_dir():
        raise LabkitInputError(f"{path} is a folder where the kit expects a Python file")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise LabkitInputError(f"{path} is not UTF-8 text: byte {err.object[err.start]:#04x} at offset "
                               f"{err.start}") from None
    except OSError as err:
        raise LabkitInputError(f"{path}: {err.strerror or err}") from None


_PARSED: dict[str, ast.Module] = {}


def parse(path: Path) -> ast.Module:
    """A file's syntax tree, or one line naming the syntax error and its line. Parsed once per content: the
    audit reads each speculator file several times, and a release matrix or a corpus of edited copies
    reads the same files in many trees. Callers never change the tree they get (:func:`load_partial`
    changes a copy)."""
    source = read_source(path)
    key = hashlib.sha256(source.encode()).hexdigest()
    if key not in _PARSED:
        if len(_PARSED) > 4096:
            _PARSED.clear()
        _PARSED[key] = _parse(path, source)
    return _PARSED[key]


def _parse(path: Path, source: str) -> ast.Module:
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise LabkitInputError(f"{path} is not Python the kit can read: SyntaxError: {err.msg} (line "
                               f"{err.lineno})") from None
    except ValueError as err:  # a NUL byte
        raise LabkitInputError(f"{path} is not Python the kit can read: {err}") from None


def kernel_imports(path: Path) -> list[str]:
    """What the kernel file imports, as ``module`` or ``module:name`` strings."""
    out = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out += [f"{node.module}:{a.name}" for a in node.names]
    return out


class CannotLoad(LabkitInputError):
    """A vLLM file needs more of vLLM than the kit can stand in for."""


def _module_file(root: Path, module: str) -> Path | None:
    base = root / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level(tree: ast.Module) -> dict[str, ast.stmt]:
    """Each name a module defines at top level, and the statement that defines it."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                found[(alias.asname or alias.name).split(".")[0]] = node
    return found


def _without_host_annotations(tree: ast.Module) -> ast.Module:
    """`tree` with the annotations of its undecorated top-level functions removed. A host function's
    annotations name vLLM's own types (``InputBatch``, ``InputBuffers``), whose files import vLLM's
    configuration and more, and calling the function never reads them. A ``@triton.jit`` function
    keeps its own: Triton reads ``tl.constexpr`` from them."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list:
            node.returns = None
            for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                arg.annotation = None
            for arg in (node.args.vararg, node.args.kwarg):
                if arg is not None:
                    arg.annotation = None
    return tree


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_ALLOWED_OUTSIDE = ("torch", "math", "typing", "__future__", "dataclasses", "functools", "enum", "collections",
                    "numpy")


def load_partial(root: Path, module: str, names, done: dict | None = None) -> types.ModuleType:
    """``module`` (a dotted vLLM name) as a module holding `names` and every definition they use, from its
    file under `root`; imports from other vLLM files are built the same way, ``vllm.triton_utils`` is the
    kit's stand-in, and the few standard or numeric packages the code needs are imported as they are."""
    done = {} if done is None else done
    if module == SHIM_MODULE:
        return _shim()[SHIM_MODULE]
    path = _module_file(root, module)
    if path is None:
        raise CannotLoad(f"{module} is not in the tree ({root}): the kit reads only files it has")
    tree = _without_host_annotations(copy.deepcopy(parse(path)))
    top = _top_level(tree)
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        if name not in top:
            raise CannotLoad(f"{module} ({path.name}) defines no {name}")
        wanted.add(name)
        node = top[name]
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            todo += [n for n in _names_used(node) if n in top and n != name]
    key = (str(path), frozenset(wanted))
    if key in done:
        return done[key]
    namespace = types.ModuleType(module)
    namespace.__file__ = str(path)
    for name in sorted(wanted):
        node = top[name]
        if isinstance(node, ast.ImportFrom) and node.module:
            source = node.module if node.level == 0 else _relative(module, node.module, node.level)
            attr = next(a.name for a in node.names if (a.asname or a.name) == name)
            namespace.__dict__[name] = _import_name(root, source, attr, module, done)
        elif isinstance(node, ast.Import):
            alias = next(a for a in node.names if (a.asname or a.name).split(".")[0] == name)
            if alias.name.split(".")[0] not in _ALLOWED_OUTSIDE:
                raise CannotLoad(f"{module} needs {alias.name}, which the kit does not load for vLLM's files")
            namespace.__dict__[name] = importlib.import_module(alias.name if alias.asname else name)
    body = [node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))
            and any(top.get(n) is node for n in wanted)]
    code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")
    try:
        exec(code, namespace.__dict__)
    except Exception as err:
        raise CannotLoad(f"{module}: {', '.join(sorted(wanted))} did not load: {type(err).__name__}: {err}") from None
    done[key] = namespace
    return namespace


def _relative(module: str, target: str, level: int) -> str:
    return ".".join(module.split(".")[:-level] + [target])


def _import_name(root: Path, source: str, attr: str, importer: str, done: dict):
    if source.split(".")[0] == "vllm":
        return getattr(load_partial(root, source, [attr], done), attr)
    if source.split(".")[0] in _ALLOWED_OUTSIDE:
        return getattr(importlib.import_module(source), attr)
    raise CannotLoad(f"{importer} needs {source}:{attr}, which the kit does not load for vLLM's files")


def _libdevice():
    import triton.language.extra.libdevice as libdevice

    from labkit import backends

    if not backends.KERNELS_INTERPRETED:
        return libdevice
    from labkit.upstream import interpreter_libdevice

    return interpreter_libdevice.with_fallbacks(libdevice)


def _shim() -> dict[str, types.ModuleType]:
    import triton
    import triton.language as tl

    package = types.ModuleType("vllm")
    package.__path__ = []  # a package with nothing in it: only the modules below can be imported from it
    utils = types.ModuleType(SHIM_MODULE)
    utils.__doc__ = "labkit's stand-in for vllm.triton_utils: this process's Triton, nothing else"
    utils.HAS_TRITON, utils.triton, utils.tl, utils.tldevice = True, triton, tl, _libdevice()
    package.triton_utils = utils
    return {"vllm": package, SHIM_MODULE: utils}


def _vllm_modules(root: Path, tree: ast.Module) -> dict[str, types.ModuleType]:
    """sys.modules entries for everything the kernel file imports from vLLM: the stand-in, each other
    module built from its file (with only what is imported from it), and empty packages above them."""
    modules = _shim()
    done: dict = {}
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm"):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "vllm" for a in node.names):
                raise CannotLoad(f"the kernel file imports {', '.join(a.name for a in node.names)} whole; the kit "
                                 "loads only names taken from vLLM's modules")
            continue
        if node.module == SHIM_MODULE:
            unknown = [a.name for a in node.names if a.name not in SHIM_NAMES]
            if unknown:
                raise CannotLoad(f"the kernel file takes {', '.join(unknown)} from {SHIM_MODULE}; the kit's stand-in "
                                 f"has {', '.join(SHIM_NAMES)}")
            continue
        modules[node.module] = load_partial(root, node.module, [a.name for a in node.names], done)
        parts = node.module.split(".")
        for i in range(2, len(parts)):
            package = ".".join(parts[:i])
            if package not in modules:
                empty = types.ModuleType(package)
                empty.__path__ = []
                modules[package] = empty
    return modules


@contextlib.contextmanager
def _vllm_in_sys_modules(modules: dict[str, types.ModuleType]):
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_vllm_sampling(tree: str | Path | None = None) -> types.ModuleType:
    """vLLM's ``sample/gumbel.py`` from `tree` (see :func:`find_tree`), as a module of this process, with
    what it imports from vLLM (see the module's docstring).

    Loaded once per content of the file and of the tree's files it imports from, and per backend; the
    module is named ``labkit_vllm_gumbel_<sha8>`` and
    its ``__file__`` is the file in the tree.
    """
    from labkit import backends  # here, not at import: fetching a release's files needs no torch

    if not backends.HAS_TRITON:
        raise LabkitInputError("vLLM's sampling kernel is a Triton kernel, and Triton is not installed here "
                               "(it installs on Linux)")
    root = find_tree(tree)
    path = root / KERNEL_FILE
    source = read_source(path)
    digest = hashlib.sha256(source.encode()).hexdigest()
    # The module holds the kernel file and what it takes from the tree's other files: a change to one of
    # those (a helper kernel edited) is another module.
    helpers = hashlib.sha256()
    for name in sorted({i.split(":")[0] for i in kernel_imports(path) if i.startswith("vllm.")}):
        helper = _module_file(root, name)
        helpers.update(name.encode() + (helper.read_bytes() if helper is not None else b""))
    key = (digest, helpers.hexdigest(), "interpreter" if backends.KERNELS_INTERPRETED else "compiled")
    if key in _LOADED:
        return _LOADED[key]
    modules = _vllm_modules(root, parse(path))
    name = f"labkit_vllm_gumbel_{digest[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with _vllm_in_sys_modules(modules):
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:
            sys.modules.pop(name, None)
            raise LabkitInputError(f"{path} did not load with the kit's stand-in for {SHIM_MODULE}: "
                                   f"{type(err).__name__}: {err}") from err
    _LOADED[key] = module
    return module
