"""The Makefile's first step: every variable a user may set, checked before anything runs.

    python3 scripts/check_make_vars.py LABKIT_BACKEND=... JOBS=... TORCH=... WHEELHOUSE=... INSTALLER=... \
        [--goals GOALS]

Prints an empty line when every value is usable; otherwise the first bad value's problem, in one
line that names the variable, its value and the choices, which the Makefile turns into its error
(``Makefile:N: *** ...  Stop.``, exit status 2, before any recipe runs). It runs with the machine's
own Python before the set-up has made the venv, so it uses the standard library only: the backends
are read from labkit/backends.py's source, the torch builds and the wheelhouse rule come from
labkit/tools/setup.py (the set-up's own checks, which need nothing else either).
"""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# labkit/__init__.py imports the backends, and with them torch, which this Python need not have: the
# set-up's module is reached through a bare stand-in for the package (where labkit is not imported yet).
if "labkit" not in sys.modules:
    _package = types.ModuleType("labkit")
    _package.__path__ = [str(REPO / "labkit")]
    sys.modules["labkit"] = _package

from labkit.tools.setup import installer_problem, torch_problem, wheelhouse_problem  # noqa: E402  (the package, just stood in)


def backends() -> tuple[str, ...]:
    """labkit.backends.BACKENDS, read from its source (importing it would need torch)."""
    tree = ast.parse((REPO / "labkit" / "backends.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BACKENDS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError("labkit/backends.py defines no BACKENDS")


def backend_problem(value: str) -> str | None:
    """The same rule and words as labkit.backends at import: empty (the kit chooses) or one of BACKENDS."""
    choices = backends()
    if not value.strip() or value.strip().lower() in choices:
        return None
    return (f"LABKIT_BACKEND={value!r} is not a backend; choose one of {', '.join(choices)}, or unset it to let "
            "labkit choose")


def jobs_problem(value: str) -> str | None:
    if value.strip().isdigit() and int(value) >= 1:
        return None
    return (f"JOBS={value!r} is not a number of test processes; choose a whole number from 1 up (JOBS=1: one "
            "process, in file order), or leave it unset for this machine's CPUs, at most 4")


def problems(values: dict[str, str], goals: list[str]) -> list[str]:
    found = [backend_problem(values.get("LABKIT_BACKEND", "")), jobs_problem(values.get("JOBS", "1")),
             torch_problem(values.get("TORCH", "cpu")), installer_problem(values.get("INSTALLER", "auto"))]
    # `make wheelhouse WHEELHOUSE=DIR` fills DIR: there it is a destination, not a folder to install from.
    if values.get("WHEELHOUSE") and "wheelhouse" not in goals:
        found.append(wheelhouse_problem(values["WHEELHOUSE"]))
    return [p for p in found if p]


def main(argv: list[str]) -> int:
    goals: list[str] = []
    values: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg == "--goals":
            goals = next(args, "").split()
        else:
            name, _, value = arg.partition("=")
            values[name] = value
    found = problems(values, goals)
    print(found[0] if found else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
