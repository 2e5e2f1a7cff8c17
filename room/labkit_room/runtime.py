"""What the learners' processes run: an interpreter they may execute, the kit, and their folder.

The hub runs as root, but each learner's server runs as that learner, so everything it runs must
be reachable by an ordinary user: every folder above it searchable by others (mode o+x) and the
files readable. A Python installed under /root (pyenv's default, mode 0700) is not. Then
:func:`learner_python` copies that same interpreter and its standard library (not its
site-packages) into a world-readable folder once, and makes a small virtual environment on it
that sees the kit's own site-packages: the learners run the very build and packages the kit
was installed with. JupyterLab's assets and server configuration are found through
JUPYTER_PATH and JUPYTER_CONFIG_PATH (:func:`jupyter_env`), since that environment's own prefix
holds none.

The kit itself reaches the learners as a copy of the ``labkit`` and ``labkit_room`` packages alone
(:func:`kit_copy`): their kernels import the same code as the hub, and the instructor edition
of the notebooks beside it in the repository is not on their path.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import labkit
import labkit_room
from labkit import paths

# How the room starts Python in a learner's name (their server, their kernels): the current folder
# (their home, their notebooks' folder) not on sys.path (-P) and no user site-packages (-s), so a
# module or .pth file the learner writes there is never imported in its place.
SAFE_PYTHON_FLAGS = ("-P", "-s")


def reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can reach `path` (every folder above it o+x, the path
    itself o+r; o+x too for an executable or a folder)."""
    path = Path(path).resolve()
    for parent in list(path.parents)[::-1]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return False
    mode = path.stat().st_mode
    need = stat.S_IROTH | (stat.S_IXOTH if path.is_dir() or mode & stat.S_IXUSR else 0)
    return mode & need == need


def first_unreachable(path: Path) -> Path | None:
    path = Path(path).resolve()
    for candidate in [*list(path.parents)[::-1], path]:
        if not reachable_by_others(candidate):
            return candidate
    return None


def site_dirs() -> list[str]:
    """The site-packages folders of the environment the hub runs in."""
    return [d for d in site.getsitepackages() if Path(d).is_dir()]


def learner_python(runtime: Path) -> tuple[str, dict[str, str]]:
    """(interpreter, extra environment) that the learners' servers run with."""
    exe = Path(sys.executable)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if reachable_by_others(exe) and reachable_by_others(stdlib):
        return str(exe), {}
    for folder in site_dirs():
        if not reachable_by_others(Path(folder)):
            raise RuntimeError(
                f"the learners cannot reach the kit's packages in {folder} ({first_unreachable(Path(folder))} is "
                "closed to other users): install the kit outside /root, e.g. in /opt or /srv, and start the hub there")
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    copy = runtime / f"python-{sys.version.split()[0]}"
    if not (copy / ".complete").exists():
        shutil.rmtree(copy, ignore_errors=True)
        (copy / "bin").mkdir(parents=True)
        (copy / "lib").mkdir()
        shutil.copy2(base / "bin" / version, copy / "bin" / version)
        for lib in (base / "lib").glob("libpython*"):  # a shared build's libpython, found by LD_LIBRARY_PATH
            shutil.copy2(lib, copy / "lib" / lib.name, follow_symlinks=False)
        shutil.copytree(base / "lib" / version, copy / "lib" / version, symlinks=True,
                        ignore=shutil.ignore_patterns("site-packages", "test", "idlelib", "tkinter", "turtledemo"))
        (copy / "lib" / version / "site-packages").mkdir()
        (copy / ".complete").touch()
    env_dir = runtime / "venv"
    env_lib = {"LD_LIBRARY_PATH": str(copy / "lib")}
    # The venv names its interpreter and the kit's site-packages by absolute path: one made where this
    # checkout lay before (a bind mount of another name: scripts/hub_stage.py) points at nothing now.
    made_for = json.dumps({"interpreter": str(copy / "bin" / version), "site": site_dirs()})
    complete = env_dir / ".complete"
    if not complete.exists() or complete.read_text() != made_for:
        shutil.rmtree(env_dir, ignore_errors=True)
        subprocess.run([str(copy / "bin" / version), "-m", "venv", "--without-pip", str(env_dir)],
                       check=True, env={**os.environ, **env_lib})
        # The kit's own site-packages, .pth files and all (an editable install's finder with them).
        pth = env_dir / "lib" / version / "site-packages" / "labkit_hub_kit_env.pth"
        pth.write_text("".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs()))
        complete.write_text(made_for)
    _open_to_all(runtime)
    return str(env_dir / "bin" / "python"), env_lib


def has_lab() -> bool:
    import importlib.util

    return importlib.util.find_spec("jupyterlab") is not None


def kernel_launcher(runtime: Path) -> Path:
    """The copy of :mod:`labkit_room.kernel_launcher` in the learners' kit (:func:`kit_copy`)."""
    return runtime / "kit" / "labkit_room" / "kernel_launcher.py"


def room_kernel_spec(runtime: Path, python: str, launcher: Path | None = None) -> Path:
    """The kernel spec every learner's kernel starts from: ``python3``, whose namespaces are made by
    :mod:`labkit_room.kernel_launcher` (under ``-I -S``: nothing of the environment's, no
    site-packages, so no thread before it), which then starts ``python -m labkit_room.kernel``
    (the room's limits first). `launcher`: the launcher's path, the kit copy's by default. Returns the
    data folder to put first on the learners' JUPYTER_PATH, where Jupyter looks for kernel specs
    before any other."""
    data = runtime / "jupyter"
    spec = data / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        # -P: not the notebook's folder first on sys.path, -s: no user site-packages (and no .pth
        # file of the learner's run before the kernel has its own network): the kernel that starts
        # is the room's, whatever the learner wrote into their home.
        "argv": [python, "-I", "-S", str(launcher or kernel_launcher(runtime)), "--",
                 python, *SAFE_PYTHON_FLAGS, "-m", "labkit_room.kernel", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python",
        "metadata": {"debugger": True}}, indent=1))
    _open_to_all(data)
    return data


def jupyter_env(kernel_data: Path | None = None) -> dict[str, str]:
    """Where the learners' kernel spec (`kernel_data`, first), JupyterLab's assets and the server's
    extension configuration live (the environment that has jupyterlab installed), for a learner's
    server that may run from another prefix. Without JupyterLab (a box that carried only the Jupyter
    server), only the kernel spec."""
    first = [str(kernel_data)] if kernel_data else []
    if not has_lab():
        return {"JUPYTER_PATH": first[0]} if first else {}
    import jupyterlab

    prefix = Path(jupyterlab.__file__).resolve().parents[4]  # <prefix>/lib/pythonX.Y/site-packages/jupyterlab
    return {"JUPYTER_PATH": os.pathsep.join([*first, str(prefix / "share" / "jupyter")]),
            "JUPYTERLAB_DIR": str(prefix / "share" / "jupyter" / "lab"),
            "JUPYTER_CONFIG_PATH": str(prefix / "etc" / "jupyter")}


def learner_config_dir(runtime: Path) -> Path:
    """An empty configuration folder of the room's (root's, readable by all), the learners' servers'
    JUPYTER_CONFIG_DIR: no learner can put a file in it, so no server of theirs reads a configuration
    of the learner's writing (the hub's disable_user_config leaves JupyterLab's labconfig readable)."""
    folder = runtime / "learner-config"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o755)
    # Jupyter's one-time migration of an IPython 3 configuration writes this mark into the config folder
    # once the home has ~/.ipython (any kernel makes it): marked here, nothing is migrated or written.
    (folder / "migrated").write_text("")
    _open_to_all(folder)
    return folder


def resource_usage_extension() -> str | None:
    """The memory gauge's server extension (jupyter-resource-usage), where it is installed. Installed
    as a wheel into a folder on PYTHONPATH (the GPU box), its own configuration that enables it is not
    on Jupyter's path: the room enables it by name instead."""
    import importlib.util

    return "jupyter_resource_usage" if importlib.util.find_spec("jupyter_resource_usage") else None


def hub_pythonpath(kit_root: Path) -> list[str]:
    """The hub's own PYTHONPATH entries, but the kit's source tree: packages a box carries as wheels
    into a folder on PYTHONPATH (the GPU box) must reach the learners' servers too."""
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return [e for e in entries if Path(e).resolve() != Path(kit_root).resolve()]


# What a learner's server and kernel import, by top-level package: without byte-code beside them,
# every server and kernel start compiles each module again in memory (a learner cannot write
# __pycache__ into the room's root-owned folders), seconds of CPU per start that a room of late
# learners pays at once.
LEARNER_PACKAGES = ("jupyterhub", "jupyter_server", "jupyter_client", "jupyter_core", "jupyter_events",
                    "jupyter_resource_usage", "jupyterlab", "jupyterlab_server", "tornado", "traitlets", "zmq",
                    "ipykernel", "IPython", "comm", "nbformat", "nbconvert", "jinja2", "sqlalchemy", "psutil",
                    "torch", "triton", "numpy", "matplotlib", "ipywidgets")  # the kit's own: kit_copy


def compile_bytecode(folder: Path) -> None:
    """Write the byte-code of every module under `folder`, on every core (files that are not Python 3
    source, templates and py2 leftovers, are skipped as pip skips them)."""
    import compileall

    compileall.compile_dir(str(folder), quiet=2, workers=0)


def packages_without_bytecode(names: tuple[str, ...] = LEARNER_PACKAGES) -> list[Path]:
    """The folders of the packages in `names` installed here whose ``__init__`` has no byte-code beside
    it (an install with pip's --no-compile, uv's default): what :func:`compile_learner_packages` compiles."""
    import importlib.util

    missing = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin or not spec.submodule_search_locations or not spec.origin.endswith(".py"):
            continue
        if not Path(importlib.util.cache_from_source(spec.origin)).is_file():
            missing.append(Path(spec.origin).parent)
    return missing


def compile_learner_packages(log=print, names: tuple[str, ...] = LEARNER_PACKAGES) -> list[Path]:
    """Compile the byte-code of the learners' packages that have none, where root owns their folder
    (the room runs as root; byte-code written as root into a folder someone else owns would be
    theirs no longer: for those, the command to run as their owner is said instead). Returns the
    folders compiled."""
    import time

    done = []
    for folder in packages_without_bytecode(names):
        if folder.stat().st_uid != os.geteuid():
            log(f"{folder} has no byte-code: each learner's server and kernel compiles it at every start "
                f"(as its owner: python -m compileall -q {folder})")
            continue
        t0 = time.monotonic()
        compile_bytecode(folder)
        done.append(folder)
        log(f"compiled the byte-code of {folder} ({time.monotonic() - t0:.0f} s, once)")
    return done


def kit_copy(runtime: Path) -> Path:
    """A fresh copy of the ``labkit`` and ``labkit_room`` packages the hub runs, with their byte-code,
    for the learners' PYTHONPATH, and beside them the student edition of notebook 07: the checkers
    read each exercise's starting code from that notebook (:mod:`labkit.workshop.exercises.starting_code`),
    and the student edition holds it without the solutions."""
    import nbformat

    from labkit.workshop.editions.student import student_notebook
    from labkit.workshop.exercises.record import NOTEBOOK

    target = runtime / "kit"
    shutil.rmtree(target, ignore_errors=True)
    for package in (labkit, labkit_room):  # the kit, and the room's kernel and server extensions
        shutil.copytree(Path(package.__file__).parent, target / package.__name__,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (target / "notebooks").mkdir()
    nbformat.write(student_notebook(nbformat.read(paths.NOTEBOOKS / NOTEBOOK, as_version=4)),
                   target / "notebooks" / NOTEBOOK)
    # Its byte-code too: the learners cannot write it there, and would compile the kit at every start.
    compile_bytecode(target)
    _open_to_all(runtime)
    return target


def build_learner_folder(out: Path, src: Path | None = None) -> None:
    """What one learner opens, fresh: the folder :func:`labkit.workshop.editions.student.build_learner_folder`
    builds (the student edition and the docs it links that answer nothing; no test configuration)."""
    from labkit.workshop.editions.student import build_learner_folder as learners_folder

    src = src or Path(labkit.__file__).resolve().parents[1] / "notebooks"
    learners_folder(out, src, fresh=True)


def _open_to_all(folder: Path) -> None:
    """Folders o+rx and files o+r under `folder` (the runtime learners read, never their homes)."""
    for path in [folder, *folder.rglob("*")]:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        extra = stat.S_IROTH | stat.S_IRGRP
        if stat.S_ISDIR(mode) or mode & stat.S_IXUSR:
            extra |= stat.S_IXOTH | stat.S_IXGRP
        os.chmod(path, stat.S_IMODE(mode) | extra)
