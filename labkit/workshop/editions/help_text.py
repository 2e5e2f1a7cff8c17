"""What ``?`` and Tab show of the kit: for one module, for the whole package, for a kernel's names.

A learner explores: ``labkit.<Tab>`` offers the kit's modules, ``labkit.kernels.<Tab>`` a module's
names, and ``?`` on any of them shows its docstring, its signature with its defaults, its repr.
:func:`module_help` lists what one module offers that way (two levels: its names, and a class's
methods); :func:`package_help` does it for every module of the package, whether or not a notebook
imports it, since Tab reaches them all; :func:`namespace_inspection` runs inside a kernel, on the
names a learner's cells made. The secrecy scan (:mod:`labkit.workshop.editions.secrecy`) reads
these texts for the exercises' answers; ``??`` (the source) is the learner's choice and is not read.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

INSPECT_MARKER = "labkit-inspect: "

def labkit_imports(source: str) -> list[str]:
    """The kit's modules a cell's code imports from, in order: ``import labkit.x`` gives labkit.x,
    ``from labkit.x import y`` gives labkit.x (and labkit.x.y where y is a module)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "labkit"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "labkit":
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names
                      if _module_exists(f"{node.module}.{alias.name}")]
    return list(dict.fromkeys(found))


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def module_help(name: str) -> list[tuple[str, str]]:
    """What ``?`` and Tab show of the kit's module `name`, as (where, text) pairs: the module's
    docstring and member names (for a package, its submodules' names and docstrings too); for each
    public member of the kit, its docstring and signature with its defaults (a class's: of its
    public methods and properties too); for each other public value, its repr."""
    module = importlib.import_module(name)
    found = [(f"{name}?", inspect.getdoc(module) or "")]
    names = [n for n in dir(module) if not n.startswith("_")]
    if hasattr(module, "__path__"):
        for sub in _submodules(module):
            names.append(sub.name)
            found.append((f"{name}.{sub.name}?", sub.doc))
    found.append((f"{name}.<Tab>", " ".join(sorted(set(names)))))
    for attr in sorted(set(names)):
        value = getattr(module, attr, None)
        if value is None or inspect.ismodule(value):
            if inspect.ismodule(value) and _is_labkit(value):
                found.append((f"{name}.{attr}?", inspect.getdoc(value) or ""))
            continue
        if _is_labkit(value):
            found += _member_help(f"{name}.{attr}", value)
        elif not callable(value) and not isinstance(value, type):
            found.append((f"{name}.{attr}", _safe_repr(value)))
    return found


@dataclass(frozen=True)
class _Submodule:
    name: str
    doc: str


def _submodules(package) -> list[_Submodule]:
    """A package's submodules and their docstrings, read from their files (importing them could start
    what the learner never asked for)."""
    found = []
    for folder in package.__path__:
        for path in sorted(Path(folder).iterdir()):
            stem = path.stem if path.suffix == ".py" else path.name if (path / "__init__.py").is_file() else None
            if not stem or stem.startswith("_"):
                continue
            source = path if path.suffix == ".py" else path / "__init__.py"
            try:
                doc = ast.get_docstring(ast.parse(source.read_text())) or ""
            except (OSError, SyntaxError, UnicodeDecodeError):
                doc = ""
            found.append(_Submodule(stem, doc))
    return found


def _member_help(where: str, value) -> list[tuple[str, str]]:
    found = [(f"{where}?", inspect.getdoc(value) or "")]
    if callable(value):
        try:
            found.append((f"signature of {where}", f"{where.rsplit('.', 1)[-1]}{inspect.signature(value)}"))
        except (TypeError, ValueError):
            pass
    if not callable(value) or not isinstance(value, type):
        if not callable(value):
            found.append((f"{where}", _safe_repr(value)))
        return found
    for attr, member in vars(value).items():
        if attr.startswith("_"):
            continue
        member = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        if callable(member) and _is_labkit(member):
            found.append((f"{where}.{attr}?", inspect.getdoc(member) or ""))
            try:
                found.append((f"signature of {where}.{attr}", f"{attr}{inspect.signature(member)}"))
            except (TypeError, ValueError):
                pass
    return found


def _safe_repr(value) -> str:
    try:
        return repr(value)[:4000]
    except Exception as err:  # noqa: BLE001 - a repr that fails shows its error, which is what a learner sees
        return f"<repr failed: {type(err).__name__}: {err}>"


# --- the whole package: every module Tab reaches --------------------------------------------------

def package_modules(package: str = "labkit") -> list[str]:
    """Every module of `package` by name, packages before their modules, found on disk (a package's
    folder and its subfolders), whether or not anything imports it."""
    root = importlib.import_module(package)
    found = [package]
    for info in pkgutil.iter_modules(root.__path__, f"{package}."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        found += package_modules(info.name) if info.ispkg and _imports(info.name) else [info.name]
    return found


def _imports(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:  # noqa: BLE001 - a module that cannot be imported here shows only its file's docstring
        return False


def package_help(package: str = "labkit") -> list[tuple[str, str]]:
    """What ``?`` and Tab show of every module of `package` (:func:`module_help` of each, in
    :func:`package_modules`' order). A module that cannot be imported in this environment (one that
    runs only inside JupyterHub, say) still shows its name and its docstring, read from its file."""
    found = []
    for name in package_modules(package):
        if _imports(name):
            found += module_help(name)
        else:
            spec = importlib.util.find_spec(name)
            doc = ""
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                try:
                    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
                except (OSError, SyntaxError, UnicodeDecodeError):
                    doc = ""
            found.append((f"{name}?", doc))
    return found


# --- what one `?` shows in a kernel: docstrings, signatures and reprs of the names a cell made ------

_SKIP_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def _is_labkit(obj) -> bool:
    if inspect.ismodule(obj):
        return obj.__name__.split(".")[0] == "labkit"
    module = getattr(obj, "__module__", None) if callable(obj) else type(obj).__module__
    return isinstance(module, str) and module.split(".")[0] == "labkit"


def _holds_labkit(obj) -> bool:
    if isinstance(obj, Mapping):
        return any(_is_labkit(v) for v in obj.values())
    return isinstance(obj, (list, tuple)) and any(_is_labkit(v) for v in obj)


def inspected(name: str, obj) -> dict:
    """What ``name?`` and ``name`` at the prompt show: the docstring, the signature, the repr."""
    seen = {"name": name, "doc": (inspect.getdoc(obj) or "") if _is_labkit(obj) else ""}
    if callable(obj) and not inspect.ismodule(obj):
        try:
            seen["signature"] = f"{name}{inspect.signature(obj)}"
        except Exception:  # noqa: BLE001 - no signature to show (a builtin, a jitted kernel)
            pass
    try:
        seen["repr"] = repr(obj)[:4000]
    except Exception as err:  # noqa: BLE001 - a repr that fails shows its error, which is what a learner sees
        seen["repr"] = f"<repr failed: {type(err).__name__}: {err}>"
    return seen


def namespace_inspection(namespace: Mapping) -> list[dict]:
    """For every name of `namespace` that is labkit's (a module, function, class or object of the kit,
    or a table of them): what ``?`` shows of it; for a module, of each public name in it too (what
    ``module.<Tab>`` offers, then ``?``). Submodules of a module are a second step, not shown."""
    found = []
    for name, obj in sorted(namespace.items()):
        if name.startswith("_") or name in _SKIP_NAMES or not (_is_labkit(obj) or _holds_labkit(obj)):
            continue
        found.append(inspected(name, obj))
        if inspect.ismodule(obj):
            public = getattr(obj, "__all__", None) or [n for n in dir(obj) if not n.startswith("_")]
            for attr in public:
                value = getattr(obj, attr, None)
                if value is not None and not inspect.ismodule(value) and (_is_labkit(value) or _holds_labkit(value)
                                                                          or not callable(value)):
                    found.append(inspected(f"{name}.{attr}", value))
    return found


def inspect_namespace() -> None:
    """In a running IPython kernel: print one ``labkit-inspect:`` line per name
    :func:`namespace_inspection` finds in the user's namespace (:func:`seen_in_cell` reads them)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("inspect_namespace() runs inside an IPython kernel")
    for seen in namespace_inspection(shell.user_ns):
        print(INSPECT_MARKER + json.dumps(seen), flush=True)
