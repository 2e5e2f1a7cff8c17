"""Everything that shows a record, made again from the records: ``python -m labkit refresh`` (``make refresh``).

Run it after a record changes (``python -m labkit record merge RUN.json``, ``make bench-cpu``, ``make
wheelhouse RECORD=1``), after a change to a constant a sentence restates, or after any change to what a
notebook shows. It needs nothing but the repository: the records under ``labkit/data/``, no GPU, no
network, nothing under ``build/``. In order:

    1. blocks      every ``<!-- KIND:NAME -->`` block of the notebooks' markdown and of the docs
                   (:mod:`labkit.docgen.blocks`)
    2. figures     ``figures/`` (:func:`labkit.viz.figures.write_all`)
    3. notebooks   each notebook whose inputs changed since it was last executed is executed and
                   saved, as the notebooks stage of ``make test`` runs it: on the CPU (the GPU
                   hidden, the CPU's default backend), cells tagged ``gpu`` not run and keeping
                   their stored outputs
    4. blocks      again: the agendas count the words of the notebooks as saved

A notebook's inputs are its cells (their sources and tags, never their outputs: a block rendered into
its markdown in step 1 counts), every file of the repository its kernel read while it last ran (the
kit's modules it imported, the records and models it opened), and the pins it ran under
(:data:`ENVIRONMENT`). Their hashes are kept beside the notebooks, in :data:`STAMPS`; a notebook whose
inputs hash as kept is not run again, so a second ``make refresh`` changes nothing.
``--execute 03 07`` executes and saves those notebooks whatever their hashes, ``--execute all`` every
notebook. Each step prints what it wrote, and each notebook why it ran. ``--check`` changes nothing
and exits 1 where a block differs from its rendering or a notebook's inputs changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError

GPU_TAG = "gpu"
# Where each notebook's inputs are kept, hashed (a dot file: JupyterLab's file browser does not list it).
STAMPS = paths.NOTEBOOKS / ".refresh-inputs.json"
# The pins every notebook runs under: a new torch can change what a notebook prints.
ENVIRONMENT = ("pyproject.toml", "requirements/ci.txt")
# Folders of the repository whose files are never a notebook's input: what runs leave behind.
_NOT_INPUTS = (".venv", "build", ".git", "student", "wheelhouse")


# -- what a notebook shows depends on: its inputs, hashed --------------------------------------------------

def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def cells_digest(notebook: Path) -> str:
    """The hash of what a notebook is made of: each cell's kind, source and tags (not its outputs,
    execution counts or ids, which running it rewrites)."""
    cells = json.loads(notebook.read_text())["cells"]
    made_of = [(c["cell_type"], "".join(c["source"]), sorted(c.get("metadata", {}).get("tags", []))) for c in cells]
    return _sha(json.dumps(made_of).encode())


def file_digests(files) -> dict[str, str]:
    """``{path: hash}`` of files of the repository (relative paths); ``"missing"`` for one that is gone."""
    found = {}
    for name in sorted(set(files)):
        path = paths.REPO / name
        found[name] = _sha(path.read_bytes()) if path.is_file() else "missing"
    return found


def load_stamps() -> dict:
    return json.loads(STAMPS.read_text()) if STAMPS.is_file() else {}


def save_stamps(stamps: dict) -> None:
    text = json.dumps(dict(sorted(stamps.items())), indent=1, sort_keys=True) + "\n"
    if not STAMPS.is_file() or STAMPS.read_text() != text:
        STAMPS.write_text(text)


def why_run(notebook: Path, stamps: dict) -> str | None:
    """Why `notebook` must be executed again (its inputs changed since it was), or None."""
    stamp = stamps.get(notebook.name)
    if stamp is None:
        return "no record of its inputs yet"
    if stamp.get("cells") != cells_digest(notebook):
        return "its cells changed"
    files = stamp.get("files", {})
    changed = [name for name, digest in file_digests(files).items() if files.get(name) != digest]
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return "what it reads changed: " + ", ".join(changed[:3]) + more
    return None


def _input_file(opened: str) -> str | None:
    """The repository's file behind a path the kernel opened (a module's bytecode stands for its
    source), relative to the repository; None for anything outside it or left by a run."""
    path = Path(opened)
    if not path.is_absolute():
        path = paths.NOTEBOOKS / path
    if path.parent.name == "__pycache__" and path.suffix == ".pyc":
        path = path.parent.parent / (path.name.split(".")[0] + ".py")
    try:
        relative = path.resolve().relative_to(paths.REPO.resolve())
    except ValueError:
        return None
    generated = any(part == "__pycache__" or part.endswith(".egg-info") for part in relative.parts)
    if relative.parts[0] in _NOT_INPUTS or generated or not (paths.REPO / relative).is_file():
        return None
    return relative.as_posix()


# Run first in the kernel: every file opened for reading from now on is noted (imports open the
# modules' bytecode or source, records and models are opened to be read).
_WATCH = """import sys as _labkit_sys
_labkit_opened = set()
def _labkit_note(event, args, _opened=_labkit_opened):
    if event == "open" and isinstance(args[0], str) and (args[1] is None or not set("wax+") & set(str(args[1]))):
        _opened.add(args[0])
_labkit_sys.addaudithook(_labkit_note)"""
_REPORT = "import json as _labkit_json\nprint(_labkit_json.dumps(sorted(_labkit_opened)))"


def render_blocks(write: bool = True) -> list[str]:
    """Render (or, without `write`, compare) every block of every document; lines saying what changed."""
    from labkit.docgen import blocks, numbers

    renderers = numbers.all_renderers()
    said = []
    for name in blocks.documents():
        path = paths.REPO / name
        stale = blocks.stale_blocks(path, renderers)
        if stale and write:
            blocks.write_into(path, renderers)
        said += [f"{name}: {key}" for key in stale]
    return said


def execute(notebook: Path, timeout: int = 600, save: bool = True) -> tuple[float, list[str]]:
    """Run `notebook` top to bottom on the CPU, as nbval does, and save it with its new outputs
    (unless not `save`); seconds, and the repository's files it read."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    held = {}
    for index, cell in enumerate(nb.cells):
        if GPU_TAG in cell.metadata.get("tags", []):  # not run on the CPU: its stored outputs stay
            held[index] = cell
            nb.cells[index] = nbformat.v4.new_markdown_cell("")
    nb.cells = [nbformat.v4.new_code_cell(_WATCH), *nb.cells, nbformat.v4.new_code_cell(_REPORT)]
    spec = paths.BUILD / "refresh-kernel" / "kernels" / "labkit-refresh"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "labkit (refresh)", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    # The kit of this repository, whichever one the interpreter has installed.
    env.update(CUDA_VISIBLE_DEVICES="", LABKIT_ANSWERS=str(paths.BUILD / "refresh-answers"),
               PYTHONPATH=os.pathsep.join([str(paths.REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    km = KernelManager(kernel_name="labkit-refresh",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    start = time.monotonic()
    client = NotebookClient(nb, km=km, timeout=timeout, store_widget_state=True,
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.execute(env=env)
    report = nb.cells[-1]
    opened = json.loads("".join(o.get("text", "") for o in report.outputs if o.get("name") == "stdout"))
    nb.cells = nb.cells[1:-1]
    for index, cell in held.items():
        nb.cells[index] = cell
    if save:
        nbformat.write(nb, notebook)
    files = {f for f in map(_input_file, opened) if f is not None and f != f"notebooks/{notebook.name}"}
    return time.monotonic() - start, sorted(files | set(ENVIRONMENT))


def stamp(notebook: Path, files: list[str]) -> dict:
    """What `notebook`'s outputs were made from: the hash of its cells and of each file it read."""
    return {"cells": cells_digest(notebook), "files": file_digests(files)}


def notebooks_named(names: list[str]) -> list[Path]:
    """The notebooks of ``notebooks/`` named (``03_the_fix.ipynb``, ``03_the_fix`` or ``03``); ``all``: every one."""
    every = sorted(paths.NOTEBOOKS.glob("*.ipynb"))
    if names == ["all"]:
        return every
    found = []
    for name in names:
        matches = [p for p in every if p.name == name or p.stem == name or p.name.startswith(f"{name}_")]
        if len(matches) != 1:
            known = ", ".join(p.stem for p in every)
            raise LabkitInputError(f"--execute {name}: {'no' if not matches else 'more than one'} notebook of "
                                   f"notebooks/ is called that; known: {known}, or all")
        found.append(matches[0])
    return found


def refresh_notebooks(also: list[Path] = (), log=print) -> list[Path]:
    """Execute and save each notebook whose inputs changed (and those in `also`); the ones it ran."""
    stamps = load_stamps()
    ran = []
    for notebook in sorted(paths.NOTEBOOKS.glob("*.ipynb")):
        why = "asked for (--execute)" if notebook in also else why_run(notebook, stamps)
        if why is None:
            continue
        log(f"== notebook {notebook.name}: {why}; executing on the CPU ...")
        seconds, files = execute(notebook)
        stamps[notebook.name] = stamp(notebook, files)
        save_stamps(stamps)
        ran.append(notebook)
        log(f"   saved in {seconds:.0f} s")
    return ran


def refresh(notebooks: bool = True, log=print, also: list[Path] = ()) -> None:
    from labkit.viz.figures import write_all

    log("== blocks: " + (", ".join(render_blocks()) or "all as rendered"))
    log("== figures: " + ", ".join(str(Path(p).name) for p in write_all(paths.REPO / "figures")))
    if not notebooks:
        log("== blocks again: " + (", ".join(render_blocks()) or "all as rendered"))
        return
    ran = refresh_notebooks(also, log)
    log("== notebooks: " + (", ".join(p.name for p in ran) or "every one as its inputs last made it"))
    log("== blocks again: " + (", ".join(render_blocks()) or "all as rendered"))
    if ran:  # a block the second pass rendered into a notebook it ran: that notebook runs again
        again = refresh_notebooks(log=log)
        if again:
            log("== blocks again: " + (", ".join(render_blocks()) or "all as rendered"))


# -- the command ----------------------------------------------------------------------------------------

def add_arguments(cmd) -> None:
    cmd.description = __doc__.split("\n\n")[0]
    cmd.add_argument("--check", action="store_true", help="change nothing: list the blocks that differ (exit 1)")
    cmd.add_argument("--skip-notebooks", action="store_true", help="blocks and figures only")
    cmd.add_argument("--execute", nargs="+", metavar="NOTEBOOK", default=[],
                     help="also execute and save these notebooks (03_the_fix, or 03; all: every notebook), "
                          "after a change to what they show")


def run(args) -> int:
    if args.check:
        stale = render_blocks(write=False)
        stamps = load_stamps()
        notebooks = [f"{p.name}: {why}" for p in sorted(paths.NOTEBOOKS.glob("*.ipynb"))
                     if (why := why_run(p, stamps))]
        if stale or notebooks:
            print("blocks that differ from their rendering, and notebooks whose inputs changed (make refresh):\n  "
                  + "\n  ".join(stale + notebooks))
            return 1
        print("every block of the docs and notebooks matches its rendering, and every notebook its inputs")
        return 0
    also = notebooks_named(args.execute) if args.execute else []
    refresh(notebooks=not args.skip_notebooks, also=also)
    return 0
