"""What a vLLM tree's DFlash drafter pads its per-sample mapping with, read with Python's ``ast``.

A DFlash drafter samples ``num_reqs_padded * k`` rows in one launch and maps each sample row to a
request's slot through ``sample_idx_mapping``; the sampling kernel stores each row's q by that slot.
Its rows past the live ones are padding, written by the input-preparation kernel
(``_prepare_dflash_inputs_kernel``, from 0.34.0 a helper it calls). A pad of 0 is request slot 0: every
padded sample row stores its q over slot 0's (the third part of PR #47066 changed it: docs/VLLM_MAP.md).

:mod:`labkit.upstream.dflash_run` runs the preparation and decides by what it wrote; this reading is
the evidence (each store's file and line) and the answer where the run cannot be made. In every file
under ``vllm/v1/worker/gpu/spec_decode/`` it finds each store into a ``sample_idx_mapping``
(``tl.store(..._sample_idx_mapping_ptr + ..., VALUE)`` in a kernel, or a slice of it filled or assigned
on the host) and whether VALUE is a constant (the pad) or a request's slot (the live rows).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import LabkitInputError
from labkit.upstream.loader import parse
from labkit.upstream.speculator_reading import SPEC_DECODE

BUFFER = "sample_idx_mapping"


@dataclass(frozen=True)
class PadStore:
    file: str  # relative to the tree
    line: int
    code: str
    value: int | None  # the constant written; None: a request's slot (a live row)
    where: str  # "kernel" (tl.store), "host" (a slice filled or assigned) or "init" (the whole buffer filled)

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "code": self.code, "value": self.value, "where": self.where}


@dataclass
class DFlashReading:
    files_read: list[str]
    stores: list[PadStore]
    unreadable: list[str] = field(default_factory=list)  # one line per file the kit could not read

    @property
    def present(self) -> bool:
        return bool(self.stores) or any("/dflash" in f for f in self.files_read)

    @property
    def pads(self) -> list[PadStore]:
        """The constant stores past the live rows (a whole-buffer fill only says how the buffer starts)."""
        return [s for s in self.stores if s.value is not None and s.where != "init"]

    @property
    def pad_value(self) -> int | None:
        """The pad (None: none found); a tree that pads with more than one value gives the first
        that is not the fix's."""
        values = [s.value for s in self.pads]
        if not values:
            return None
        return next((v for v in values if v != -1), -1)

    def part(self) -> dict:
        """DFlash's part of the verdict: state 'absent', the fix's pad, 'pads slot N' or 'unknown', with evidence."""
        if not self.present and not self.unreadable:
            return {"state": "absent", "says": "no DFlash drafter in this tree", "evidence": []}
        pads = [s.to_json() for s in self.pads]
        if self.pad_value is None:
            why = ("; ".join(self.unreadable) if self.unreadable else
                   f"no constant store into {BUFFER} past the live rows found")
            return {"state": "unknown", "says": f"DFlash's pad not found: {why}", "evidence": pads}
        if self.pad_value == -1:
            return {"state": "pads -1", "says": f"DFlash pads {BUFFER} with -1", "evidence": pads}
        first = next(s for s in self.pads if s.value == self.pad_value)
        return {"state": f"pads slot {self.pad_value}",
                "says": f"DFlash pads {BUFFER} with {self.pad_value} ({first.file}:{first.line}): every padded "
                        f"sample row stores its q over slot {self.pad_value}'s", "evidence": pads}

    def to_json(self) -> dict:
        return {"method": f"python ast: every store into {BUFFER} (kernel tl.store or host slice) and its value",
                "files_read": self.files_read, "stores": [s.to_json() for s in self.stores],
                "unreadable": self.unreadable, "part": self.part()}


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _targets_buffer(node) -> bool:
    return any(BUFFER in name for name in _names(node))


def _constant(node, constants: dict[str, int]) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return -value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def read_file(tree: Path, rel: str) -> list[PadStore]:
    module = parse(tree / rel)
    constants = {t.id: v for node in module.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)
                 for v in [_constant(node.value, {})] if v is not None}
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr == "store" and len(node.args) >= 2 and _targets_buffer(node.args[0]):
                found.append(PadStore(rel, node.lineno, ast.unparse(node), _constant(node.args[1], constants),
                                      "kernel"))
            elif f.attr == "fill_" and node.args and _targets_buffer(f.value):
                value = _constant(node.args[0], constants)
                if value is not None:
                    where = "host" if isinstance(f.value, ast.Subscript) else "init"
                    found.append(PadStore(rel, node.lineno, ast.unparse(node), value, where))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and _targets_buffer(t)
                                                  for t in node.targets):
            value = _constant(node.value, constants)
            if value is not None:
                found.append(PadStore(rel, node.lineno, ast.unparse(node), value, "host"))
    return found


def read_dflash(tree: str | Path) -> DFlashReading:
    tree = Path(tree)
    folder = tree / SPEC_DECODE
    files = sorted(p.relative_to(tree).as_posix() for p in folder.rglob("*.py")) if folder.is_dir() else []
    stores, unreadable = [], []
    for rel in files:
        try:
            stores += read_file(tree, rel)
        except LabkitInputError as err:
            if "/dflash" in rel:  # a file of another drafter that cannot be read says nothing of DFlash
                unreadable.append(str(err))
    return DFlashReading(files, stores, unreadable)
