"""labkit: a hands-on lab for vLLM PR #47066, stale idx_mapping rows under padded CUDA graphs."""

import sys as _sys

from labkit.errors import EnvironmentValueError as _EnvironmentValueError

# Besides the version, what labkit.backends gives a notebook: ``labkit.backend()``, ``labkit.describe()``, ...
__all__ = ["__version__", "backend", "default_device", "describe", "set_backend"]


def _run_as_module() -> tuple[str, str] | None:
    """(module, command) while ``python -m labkit[.submodule] COMMAND ...`` imports this package, else None.

    runpy imports the package before it runs the module, so an error raised here (a bad
    LABKIT_BACKEND) cannot be caught there; until runpy sets ``sys.argv[0]`` to the module's path it is "-m".
    """
    argv = getattr(_sys, "orig_argv", [])
    if _sys.argv[:1] != ["-m"] or "-m" not in argv[:-1]:
        return None
    at = argv.index("-m")
    module = argv[at + 1]
    if module != "labkit" and not module.startswith("labkit."):
        return None
    return module, next((a for a in argv[at + 2:] if not a.startswith("-")), "")


def _in_jupyter_server() -> bool:
    """Whether a Jupyter server imports the kit: it loads labkit.tools.lab_server as an extension (the
    lab's, and every learner's server in a room) and runs no lesson code, while torch would add
    hundreds of MiB to every learner's server (more with CUDA's libraries) and seconds to its start."""
    server = _sys.modules.get("jupyter_server.serverapp")  # imported by a server before its extensions
    return server is not None and server.ServerApp.initialized()


# `python -m labkit` (labkit/__main__.py) imports the backends itself, for the commands that run
# kernels: `lab` and `setup` run before the venv exists, on a Python without torch. A Jupyter server
# needs none of them (above). Everywhere else labkit.backends comes first: it sets TRITON_INTERPRET
# before anything imports triton.
_RUN_AS = _run_as_module()
if (_RUN_AS is None or _RUN_AS[0] != "labkit") and not _in_jupyter_server():
    try:
        from labkit.backends import backend, default_device, describe, set_backend
    except _EnvironmentValueError as _err:
        if _RUN_AS is not None:  # the command's one line and exit code 2, as for any bad argument
            print(f"{' '.join(['python -m', *_RUN_AS]).strip()}: error: {_err}", file=_sys.stderr)
            raise SystemExit(2) from None
        raise _err.with_traceback(None) from None  # the message says it all: no frames inside the kit


def __getattr__(name: str):
    """The backend functions where the import above was skipped: from labkit.backends when first asked for."""
    if name in __all__:
        from labkit import backends

        return getattr(backends, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The one place the version is written; pyproject.toml reads it ([tool.setuptools.dynamic]).
__version__ = "0.1.0"
