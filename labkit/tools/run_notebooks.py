"""Execute notebooks top to bottom and report cells that raised, without comparing outputs.

For GPU boxes. There the padded and the live row race for the same q (docs/MECHANICS.md): at
real vocabulary sizes q comes out a different patchwork of both on every run, so the corruption
counts that nbval compares with the CPU's outputs legitimately differ. Usage:

    python -m labkit run-notebooks [notebooks/*.ipynb] [--timeout 600]

Exit status 1 if any notebook had an error.
"""

from __future__ import annotations

import argparse
import glob
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def run_notebook(path: str, timeout: int) -> str | None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": "notebooks"}})
    try:
        client.execute()
    except CellExecutionError as err:
        return str(err).strip().splitlines()[-1]
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit run-notebooks", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=sorted(glob.glob("notebooks/*.ipynb")))
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.paths:
        start = time.perf_counter()
        error = run_notebook(path, args.timeout)
        status = "ok" if error is None else f"ERROR: {error}"
        failed += error is not None
        print(f"{path:<50} {time.perf_counter() - start:6.1f} s  {status}", flush=True)
    return 1 if failed else 0

