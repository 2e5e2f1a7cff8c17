"""labkit: a hands-on lab for vLLM PR #47066, stale idx_mapping rows under padded CUDA graphs."""

import sys as _sys

from labkit.errors import EnvironmentValueError as _EnvironmentValueError


def _command_line() -> str | None:
    """``python -m labkit ...`` (or a labkit submodule) while it imports this package, else None.

    runpy imports the package before it runs labkit/__main__.py, so an error raised here (a bad
    LABKIT_BACKEND) cannot be caught there; until runpy sets ``sys.argv[0]`` to the module's path it is "-m".
    """
    argv = getattr(_sys, "orig_argv", [])
    if _sys.argv[:1] != ["-m"] or "-m" not in argv[:-1]:
        return None
    at = argv.index("-m")
    module = argv[at + 1]
    if module != "labkit" and not module.startswith("labkit."):
        return None
    command = next((a for a in argv[at + 2:] if not a.startswith("-")), "")
    return " ".join(["python -m", module, command]).strip()


# labkit.backends comes first: it sets TRITON_INTERPRET before anything imports triton.
try:
    from labkit.backends import backend, default_device, describe, set_backend
except _EnvironmentValueError as _err:
    _cli = _command_line()
    if _cli is not None:  # the command's one line and exit code 2, as for any bad argument
        print(f"{_cli}: error: {_err}", file=_sys.stderr)
        raise SystemExit(2) from None
    raise _err.with_traceback(None) from None  # the message says it all: no frames inside the kit

__all__ = ["__version__", "backend", "default_device", "describe", "set_backend"]

# The one place the version is written; pyproject.toml reads it ([tool.setuptools.dynamic]).
__version__ = "0.1.0"
