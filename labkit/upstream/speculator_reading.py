"""Which function of a vLLM tree's speculator copies the live slots into ``idx_mapping``, and what it writes after.

What this reading finds is the evidence and the function to run: :mod:`labkit.upstream.host_step_run`
runs it in the kit's scenario, and only that run (or the one form it names) decides the part. The
shape of a statement says nothing of its bound, its buffer, a later write or its condition under graphs.

The speculators as a whole cannot be run without the rest of vLLM (models, attention, CUDA graphs),
so this module reads their source with Python's ``ast``. In every file under
``vllm/v1/worker/gpu/spec_decode/`` it finds the functions that write the live part of a
persistent ``idx_mapping`` (``X.idx_mapping[:num_reqs].copy_(...)``, ``X.idx_mapping[:n] = ...``, or
the same through a local name bound to that slice; in current releases this is
``_copy_request_inputs``, in older layouts an inline copy in ``propose``) and, in the same function,
the fix's writes after the live part (a ``fill_`` or an assignment of ``X.idx_mapping[num_reqs:]``) or over
the whole buffer (docs/VLLM_MAP.md shows them, after the exercises), each with the ``if`` conditions it sits under.

A fill done by a helper in the same file (a method of the class or a function of the module, given
the buffer or reaching it through ``self``) is followed and counted, named as such. A call that
hands ``idx_mapping`` to a function of another file is not followed: the report names it, and the
part cannot be judged from this file alone. A file that cannot be read is named, not skipped.
A reading sees what the code says, not what runs: a fill under a condition (vLLM first filled only
``if self.draft_logits is not None:``) is reported with that condition.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import LabkitInputError
from labkit.upstream.loader import parse

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
    pad_fills: list[Write] = field(default_factory=list)  # -1 into [num_reqs:], here or in a helper of this file
    whole_fills: list[Write] = field(default_factory=list)  # -1 into the whole buffer (a dummy run)
    unfollowed: list[Write] = field(default_factory=list)  # calls handing idx_mapping to another file's function

    @property
    def fills_padded_rows(self) -> bool:
        return bool(self.pad_fills)

    @property
    def unconditional(self) -> bool:
        """The fix's fill of the padded rows on every path through the live copy's own branch."""
        live = set(self.live_copy.conditions)
        return any(set(f.conditions) <= live for f in self.pad_fills)

    def sentence(self) -> str:
        where = f"{self.file}: {self.function} (line {self.line})"
        if not self.pad_fills and self.unfollowed:
            calls = "; ".join(f"line {c.line}: {c.code}" for c in self.unfollowed)
            return (f"{where} copies the live slots (line {self.live_copy.line}), writes no -1 after them itself, "
                    f"and hands idx_mapping to a function of another file ({calls}): could not follow")
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
                "unfollowed_calls": [w.to_json() for w in self.unfollowed],
                "fills_padded_rows_with_minus_1": self.fills_padded_rows, "unconditional": self.unconditional}


def _is_buffer(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == BUFFER


def _is_minus_one(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant) and node.operand.value == 1
    return isinstance(node, ast.Constant) and node.value == -1


def _slice_kind(node, aliases: dict[str, str] | None = None, params: set[str] | None = None) -> str | None:
    """'live' for buffer[:n], 'pad' for buffer[n:], 'whole' for the buffer itself, None otherwise. `aliases`:
    local names bound to one of those; `params`: a helper's parameters, each of which may be the buffer."""
    if isinstance(node, ast.Name):
        if aliases and node.id in aliases:
            return aliases[node.id]
        return "whole" if params and node.id in params else None
    if _is_buffer(node):
        return "whole"
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
        return None
    base = node.value
    if not (_is_buffer(base) or (isinstance(base, ast.Name) and params and base.id in params)):
        return None
    s = node.slice
    if s.lower is None and s.upper is not None:
        return "live"
    if s.lower is not None and s.upper is None:
        return "pad"
    return None


@dataclass
class _Function:
    qualname: str
    node: ast.AST
    params: list[str]
    writes: list[tuple[str, Write]]  # ("live" | "pad" | "whole", the write)
    calls: list[tuple[ast.Call, Write, bool]]  # every call in it, where it stands, and whether it is a method
    # of the buffer itself (idx_mapping[...].copy_(...), or through a local name bound to it)


class _Reader(ast.NodeVisitor):
    """Every function of a file: its writes into idx_mapping (or, for a helper, into its parameters)."""

    def __init__(self, rel: str):
        self.rel = rel
        self.scope: list[str] = []
        self.conditions: list[str] = []
        self.functions: list[_Function] = []
        self._current: _Function | None = None
        self._aliases: dict[str, str] = {}

    def _function(self, node):
        outer, outer_conditions, outer_aliases = self._current, self.conditions, self._aliases
        self.scope.append(node.name)
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
        self._current = _Function(".".join(self.scope), node, params, [], [])
        self.conditions, self._aliases = [], {}
        for child in node.body:
            self.visit(child)
        self.functions.append(self._current)
        self.scope.pop()
        self._current, self.conditions, self._aliases = outer, outer_conditions, outer_aliases

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

    def _write(self, node) -> Write:
        return Write(node.lineno, ast.unparse(node), list(self.conditions))

    def _kind(self, node) -> str | None:
        """'live', 'pad' or 'whole' for idx_mapping itself or a local name bound to a slice of it; the same
        with '-param' for a parameter of the function (which a caller may hand the buffer to)."""
        kind = _slice_kind(node, self._aliases)
        if kind is not None or self._current is None:
            return kind
        kind = _slice_kind(node, None, set(self._current.params))
        return f"{kind}-param" if kind else None

    def visit_Call(self, node):
        if self._current is not None:
            f = node.func
            own = isinstance(f, ast.Attribute) and (_mentions_buffer(f.value) or self._kind(f.value) is not None)
            self._current.calls.append((node, self._write(node), own))
            if isinstance(f, ast.Attribute) and f.attr in ("copy_", "fill_"):
                kind = self._kind(f.value)
                value = node.args[0] if node.args else None
                if kind in ("live", "live-param") and f.attr == "copy_":
                    self._current.writes.append((kind, self._write(node)))
                elif kind in ("pad", "whole", "pad-param") and f.attr == "fill_" and value is not None \
                        and _is_minus_one(value):
                    self._current.writes.append((kind, self._write(node)))
        self.generic_visit(node)

    def visit_Assign(self, node):
        if self._current is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):  # a local name bound to a slice of the buffer
                    bound = _slice_kind(node.value)
                    if bound is not None:
                        self._aliases[target.id] = bound
                    else:
                        self._aliases.pop(target.id, None)
                    continue
                kind = self._kind(target)
                if kind in ("live", "live-param"):
                    self._current.writes.append((kind, self._write(node)))
                elif kind in ("pad", "pad-param") and _is_minus_one(node.value):
                    self._current.writes.append((kind, self._write(node)))
        self.generic_visit(node)


def _mentions_buffer(node) -> bool:
    return any(_is_buffer(n) for n in ast.walk(node))


def _hands_the_buffer_away(call: ast.Call) -> bool:
    """A call that passes a function idx_mapping whole or past its live rows (what could fill the padded
    rows; a slice of the live rows cannot)."""
    return any(_slice_kind(a) in ("whole", "pad") for a in [*call.args, *(k.value for k in call.keywords)])


def _callee(call: ast.Call, owner: str, by_name: dict[str, _Function]) -> _Function | None:
    """The function of this file a call goes to: ``self.name(...)`` (a method of the caller's class) or
    ``name(...)`` (a function of the module)."""
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        cls = owner.rsplit(".", 1)[0] if "." in owner else ""
        return by_name.get(f"{cls}.{f.attr}" if cls else f.attr)
    if isinstance(f, ast.Name):
        return by_name.get(f.id)
    return None


def _helper_fills(call: ast.Call, helper: _Function) -> list[Write]:
    """The pad fills a helper makes into idx_mapping: through ``self`` (any write into X.idx_mapping[n:]),
    or into the parameter the call hands the buffer to."""
    fills = []
    handed = set()
    offset = 1 if helper.params[:1] == ["self"] else 0
    for i, arg in enumerate(call.args):
        if _mentions_buffer(arg) and i + offset < len(helper.params):
            handed.add(helper.params[i + offset])
    handed |= {k.arg for k in call.keywords if k.arg and _mentions_buffer(k.value)}
    for kind, write in helper.writes:
        through_param = kind == "pad-param" and any(write.code.startswith(p) for p in handed)
        if kind == "pad" or through_param:
            fills.append(Write(write.line, f"{write.code} (in {helper.qualname}, called on line "
                                           f"{call.lineno})", write.conditions))
    return fills


def read_file(tree: Path, rel: str) -> list[CopyFunction]:
    reader = _Reader(rel)
    reader.visit(parse(tree / rel))
    by_name = {f.qualname: f for f in reader.functions}
    found = []
    for fn in reader.functions:
        live = [w for kind, w in fn.writes if kind == "live"]
        if not live:
            continue
        copy = CopyFunction(rel, fn.qualname, fn.node.lineno, live[0],
                            [w for kind, w in fn.writes if kind == "pad"],
                            [w for kind, w in fn.writes if kind == "whole"])
        if not copy.pad_fills:
            for call, where, own in fn.calls:
                helper = _callee(call, fn.qualname, by_name)
                if helper is not None and helper is not fn:
                    copy.pad_fills += [Write(w.line, w.code, where.conditions + w.conditions)
                                       for w in _helper_fills(call, helper)]
                elif helper is None and not own and _hands_the_buffer_away(call):
                    copy.unfollowed.append(where)
        found.append(copy)
    return found


@dataclass
class SpeculatorReading:
    files_read: list[str]
    copies: list[CopyFunction]

    unreadable: list[str] = field(default_factory=list)  # one line per file that could not be read

    @property
    def fills_padded_rows(self) -> bool | None:
        """True if every function that copies live slots also fills the padded rows as the fix does."""
        return all(c.fills_padded_rows for c in self.copies) if self.copies else None

    def part(self) -> dict:
        """The host fill's part of the verdict: state 'fills', 'no fill' or 'unknown', and its evidence."""
        evidence = [c.to_json() for c in self.copies]
        missing = [c for c in self.copies if not c.fills_padded_rows]
        if self.copies and not missing:
            first = self.copies[0].pad_fills[0]
            cond = " and ".join(first.conditions)
            return {"state": "fills", "evidence": evidence,
                    "says": f"the speculator fills the padded rows of {BUFFER} with -1 ({self.copies[0].file}:"
                            f"{first.line}{', ' + cond if cond else ', on every step'})"}
        if missing and not any(c.unfollowed for c in missing):
            c = missing[0]
            return {"state": "no fill", "evidence": evidence,
                    "says": f"nothing fills the padded rows of {BUFFER} with -1 ({c.file}: {c.function} copies "
                            f"the live slots on line {c.live_copy.line} and nothing writes -1 after them)"}
        why = (f"{missing[0].function} hands {BUFFER} to another file's function" if missing else
               f"no function copies live slots into a persistent {BUFFER}" if self.files_read else
               f"no {SPEC_DECODE}/ in this tree")
        if self.unreadable:
            why += "; could not read " + "; ".join(self.unreadable)
        return {"state": "unknown", "says": f"the host fill could not be judged: {why}", "evidence": evidence}

    def lines(self) -> list[str]:
        if not self.files_read:
            return [f"speculator: no {SPEC_DECODE}/ in this tree"]
        if not self.copies:
            return [f"speculator: {len(self.files_read)} files under {SPEC_DECODE}/ read; none copies live slots "
                    f"into a persistent {BUFFER} (a layout the kit does not know)"] + [
                f"  could not read {u}" for u in self.unreadable]
        yes = {True: "yes", False: "no"}
        out = [f"speculator (read with Python's ast: each function that copies the live slots into "
               f"{BUFFER}[:num_reqs], and any -1 written after them, in it or in a helper of its file):"]
        out += [f"  {c.sentence()}" for c in self.copies]
        out += [f"  could not read {u}" for u in self.unreadable]
        out.append(f"speculator fills padded rows with -1: {yes[self.fills_padded_rows]}")
        return out

    def to_json(self) -> dict:
        return {"method": "python ast: functions writing idx_mapping[:n], and -1 into idx_mapping[n:] or the "
                          "whole buffer in the same function or a helper of its file, with their if-conditions",
                "files_read": self.files_read, "copies": [c.to_json() for c in self.copies],
                "unreadable": self.unreadable, "fills_padded_rows_with_minus_1": self.fills_padded_rows,
                "part": self.part()}


def read_speculators(tree: str | Path) -> SpeculatorReading:
    tree = Path(tree)
    folder = tree / SPEC_DECODE
    files = sorted(p.relative_to(tree).as_posix() for p in folder.rglob("*.py")) if folder.is_dir() else []
    copies, unreadable = [], []
    for rel in files:
        try:
            copies += read_file(tree, rel)
        except LabkitInputError as err:  # a file that is not readable Python: named, the others still read
            unreadable.append(str(err))
    return SpeculatorReading(files, copies, unreadable)
