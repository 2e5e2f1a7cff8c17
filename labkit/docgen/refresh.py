"""Everything that shows a record, made again from the records: ``python -m labkit refresh`` (``make refresh``).

Run it after a record changes (``python -m labkit record merge RUN.json``, ``make bench-cpu``, ``make
wheelhouse RECORD=1``) or after a change to a constant a sentence restates. In order:

    1. blocks      every ``<!-- KIND:NAME -->`` block of the notebooks' markdown and of the docs
                   (:mod:`labkit.docgen.blocks`)
    2. figures     ``figures/`` (:func:`labkit.viz.figures.write_all`)
    3. notebooks   each notebook that reads a record (imports one of :data:`RECORD_READERS`) is
                   executed and saved, as the notebooks stage of ``make test`` runs it: on the CPU
                   (the GPU hidden, the CPU's default backend), cells tagged ``gpu`` not run and
                   keeping their stored outputs
    4. blocks      again: the agendas count the words of the notebooks as saved

``--execute 03 07`` executes and saves those notebooks too (after a change to what they show), ``--execute
all`` every notebook. Each step prints what it wrote. ``--check`` changes nothing and exits 1 where a block differs from
its rendering.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from pathlib import Path

from labkit import paths
from labkit.errors import LabkitInputError

# The modules through which notebooks read records: every GPU record through labkit.viz.gpu_records,
# the audit of the vLLM releases through labkit.upstream.record.
RECORD_READERS = ("labkit.viz.gpu_records", "labkit.viz.timing_plots", "labkit.viz.race_plots",
                  "labkit.upstream.record")
GPU_TAG = "gpu"


def _imports(code: str) -> set[str]:
    # IPython's magics (%matplotlib, !pip) are not Python: left out before parsing.
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def reads_a_record(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text())["cells"]
    imported = set().union(*(_imports("".join(c["source"])) for c in cells if c["cell_type"] == "code"))
    return bool(imported & set(RECORD_READERS))


def record_notebooks() -> list[Path]:
    return [p for p in sorted(paths.NOTEBOOKS.glob("*.ipynb")) if reads_a_record(p)]


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


def execute(notebook: Path, timeout: int = 600) -> float:
    """Run `notebook` top to bottom on the CPU, as nbval does, and save it with its new outputs; seconds."""
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
    spec = paths.BUILD / "refresh-kernel" / "kernels" / "labkit-refresh"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "labkit (refresh)", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env.update(CUDA_VISIBLE_DEVICES="", LABKIT_ANSWERS=str(paths.BUILD / "refresh-answers"))
    km = KernelManager(kernel_name="labkit-refresh",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    start = time.monotonic()
    client = NotebookClient(nb, km=km, timeout=timeout, store_widget_state=True,
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.execute(env=env)
    for index, cell in held.items():
        nb.cells[index] = cell
    nbformat.write(nb, notebook)
    return time.monotonic() - start


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


def refresh(notebooks: bool = True, log=print, also: list[Path] = ()) -> None:
    from labkit.viz.figures import write_all

    log("== blocks: " + (", ".join(render_blocks()) or "all as rendered"))
    log("== figures: " + ", ".join(str(Path(p).name) for p in write_all(paths.REPO / "figures")))
    if notebooks:
        for notebook in sorted(set(record_notebooks()) | set(also)):
            log(f"== notebook {notebook.name}: executing on the CPU ...")
            log(f"   saved in {execute(notebook):.0f} s")
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
        if stale:
            print("blocks that differ from their rendering (make refresh):\n  " + "\n  ".join(stale))
            return 1
        print("every block of the docs and notebooks matches its rendering")
        return 0
    also = notebooks_named(args.execute) if args.execute else []
    refresh(notebooks=not args.skip_notebooks, also=also)
    return 0
