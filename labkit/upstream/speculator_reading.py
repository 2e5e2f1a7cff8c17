"""Does a vLLM tree's speculator fill the padded rows of ``idx_mapping`` with -1? Read, not run.

The speculators cannot be run without the rest of vLLM (models, attention, CUDA graphs), so this
module reads their source with Python's ``ast``. In every file under
``vllm/v1/worker/gpu/spec_decode/`` it finds the functions that write the live part of a
persistent ``idx_mapping`` (``X.idx_mapping[:num_reqs].copy_(...)`` or ``X.idx_mapping[:n] = ...``;
in current releases this is ``_copy_request_inputs``, in older layouts an inline copy in
``propose``) and, in the same function, the writes of -1 after the live part
(``X.idx_mapping[num_reqs:].fill_(-1)`` or ``X.idx_mapping[num_reqs:] = -1``) or over the whole
buffer (``X.idx_mapping.fill_(-1)``), each with the ``if`` conditions it sits under.

A reading sees what the code says, not what runs: a fill under a condition (vLLM first filled only
``if self.draft_logits is not None:``) is reported with that condition, and a fill done by a
helper in another function is not seen (the report says "no" and names the function read).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

SPEC_DECODE = "vllm/v1/worker/gpu/spec_decode"
BUFFER = "idx_mapping"


@dataclass
class Write:
    line: int
    code: str
    conditions: list[str]  # e.g. ["if self.draft_logits is not None"], outermost first

    def to_json(self) -> dict:
        return {"line": self.line, "code": self.code, "conditions": self.conditions}


@dataclass
class CopyFunction:
    file: str  # relative to the tree
    function: str  # Class.method
    line: int
    live_copy: Write
    pad_fills: list[Write] = field(default_factory=list)  # -1 into [num_reqs:]
    whole_fills: list[Write] = field(default_factory=list)  # -1 into the whole buffer (a dummy run)

    @property
    def fills_padded_rows(self) -> bool:
        return bool(self.pad_fills)

    @property
    def unconditional(self) -> bool:
        """A -1 fill of the padded rows on every path through the live copy's own branch."""
        live = set(self.live_copy.conditions)
        return any(set(f.conditions) <= live for f in self.pad_fills)

    def sentence(self) -> str:
        where = f"{self.file}: {self.function} (line {self.line})"
        if not self.pad_fills:
            return f"{where} copies the live slots (line {self.live_copy.line}) and writes no -1 after them: no"
        fill = self.pad_fills[0]
        cond = " and ".join(fill.conditions)
        how = "on every step" if self.unconditional else f"only {cond}"
        extra = ""
        if self.whole_fills:
            whole = self.whole_fills[0]
            extra = f"; the whole buffer gets -1 on line {whole.line} ({' and '.join(whole.conditions) or 'always'})"
        return f"{where} fills the padded rows with -1 {how} (line {fill.line}: {fill.code}){extra}: yes"

    def to_json(self) -> dict:
        return {"file": self.file, "function": self.function, "line": self.line,
                "live_copy": self.live_copy.to_json(), "pad_fills": [w.to_json() for w in self.pad_fills],
                "whole_fills": [w.to_json() for w in self.whole_fills],
                "fills_padded_rows_with_minus_1": self.fills_padded_rows, "unconditional": self.unconditional}


def _is_buffer(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == BUFFER


def _is_minus_one(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant) and node.operand.value == 1
    return isinstance(node, ast.Constant) and node.value == -1


def _slice_kind(node) -> str | None:
    """'live' for buffer[:n], 'pad' for buffer[n:], None otherwise."""
    if not (isinstance(node, ast.Subscript) and _is_buffer(node.value) and isinstance(node.slice, ast.Slice)):
        return None
    s = node.slice
    if s.lower is None and s.upper is not None:
        return "live"
    if s.lower is not None and s.upper is None:
        return "pad"
    return None


class _Reader(ast.NodeVisitor):
    def __init__(self, rel: str, source: str):
        self.rel, self.source = rel, source
        self.scope: list[str] = []
        self.conditions: list[str] = []
        self.found: list[CopyFunction] = []
        self._writes: list[tuple[str, Write]] | None = None

    def _function(self, node):
        outer = self._writes
        outer_conditions = self.conditions
        self._writes, self.conditions = [], []
        self.scope.append(node.name)
        self.generic_visit(node)
        live = [w for kind, w in self._writes if kind == "live"]
        if live:
            self.found.append(CopyFunction(self.rel, ".".join(self.scope), node.lineno, live[0],
                                           [w for kind, w in self._writes if kind == "pad"],
                                           [w for kind, w in self._writes if kind == "whole"]))
        self.scope.pop()
        self._writes, self.conditions = outer, outer_conditions

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_If(self, node):
        test = ast.unparse(node.test)
        self.visit(node.test)
        self.conditions.append(f"if {test}")
        for child in node.body:
            self.visit(child)
        self.conditions[-1] = f"if not ({test})"
        for child in node.orelse:
            self.visit(child)
        self.conditions.pop()

    def _note(self, kind, node):
        if self._writes is not None:
            self._writes.append((kind, Write(node.lineno, ast.unparse(node), list(self.conditions))))

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("copy_", "fill_"):
            kind = _slice_kind(f.value)
            value = node.args[0] if node.args else None
            if kind == "live" and f.attr == "copy_":
                self._note("live", node)
            elif kind == "pad" and f.attr == "fill_" and value is not None and _is_minus_one(value):
                self._note("pad", node)
            elif _is_buffer(f.value) and f.attr == "fill_" and value is not None and _is_minus_one(value):
                self._note("whole", node)
        self.generic_visit(node)

    def visit_Assign(self, node):
        for target in node.targets:
            kind = _slice_kind(target)
            if kind == "live":
                self._note("live", node)
            elif kind == "pad" and _is_minus_one(node.value):
                self._note("pad", node)
        self.generic_visit(node)


def read_file(tree: Path, rel: str) -> list[CopyFunction]:
    source = (tree / rel).read_text()
    reader = _Reader(rel, source)
    reader.visit(ast.parse(source))
    return reader.found


@dataclass
class SpeculatorReading:
    files_read: list[str]
    copies: list[CopyFunction]

    @property
    def fills_padded_rows(self) -> bool | None:
        """True if every function that copies live slots also fills the padded rows with -1."""
        return all(c.fills_padded_rows for c in self.copies) if self.copies else None

    def lines(self) -> list[str]:
        if not self.files_read:
            return [f"speculator: no {SPEC_DECODE}/ in this tree"]
        if not self.copies:
            return [f"speculator: {len(self.files_read)} files under {SPEC_DECODE}/ read; none copies live slots "
                    f"into a persistent {BUFFER} (a layout the kit does not know)"]
        yes = {True: "yes", False: "no"}
        out = [f"speculator (read with Python's ast: each function that copies the live slots into "
               f"{BUFFER}[:num_reqs], and any -1 written after them in the same function):"]
        out += [f"  {c.sentence()}" for c in self.copies]
        out.append(f"speculator fills padded rows with -1: {yes[self.fills_padded_rows]}")
        return out

    def to_json(self) -> dict:
        return {"method": "python ast: functions writing idx_mapping[:n], and -1 into idx_mapping[n:] or the "
                          "whole buffer in the same function, with their if-conditions",
                "files_read": self.files_read, "copies": [c.to_json() for c in self.copies],
                "fills_padded_rows_with_minus_1": self.fills_padded_rows}


def read_speculators(tree: str | Path) -> SpeculatorReading:
    tree = Path(tree)
    folder = tree / SPEC_DECODE
    files = sorted(p.relative_to(tree).as_posix() for p in folder.rglob("*.py")) if folder.is_dir() else []
    copies = [c for rel in files for c in read_file(tree, rel)]
    return SpeculatorReading(files, copies)
