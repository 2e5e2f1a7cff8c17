"""The speculator's host step that writes ``idx_mapping``, run in the kit's scenario: what the padded row holds.

A drafter run as a CUDA graph reads its persistent ``idx_mapping`` at the address the graph captured.
Before each replay the host copies the live slots into its first rows. The function that does it
(``_copy_request_inputs`` in every release that has one; :mod:`labkit.upstream.speculator_reading`
finds it) is small and needs none of vLLM: this module compiles it from the tree on its own, with the
helpers of its class and the names of its module it uses (:func:`labkit.upstream.loader.load_partial`),
and calls it on two steps of docs/MECHANICS.md's timeline (:data:`labkit.bench.scenario.MECHANICS_SCHEDULE`):
8 live requests in slots 0-7, then 7 (slot 3 finished) in a graph of 8 rows. What the captured buffer's
row 7 then holds decides the part (the values and what each means: the comment under the imports, and
docs/VLLM_MAP.md after the exercises).

``self`` is a stand-in that holds what the scenario gives a drafter that stores q by slot: the
persistent buffers (``idx_mapping``, ``temperature``, ``seeds``, ``draft_logits``) and its sizes. A
read of anything else stops the run with the attribute's name: the kit does not guess what a
condition on it would be under graphs. The buffer read afterwards is the object the graph captured,
so a write into a new tensor bound to the same name is not what the graph reads.

Two things the run alone cannot see are read with ``ast`` and must have a form the kit knows, or
the part is "could not audit": every call of the function must be an unconditional statement of
a drafter's ``propose`` with no ``return`` before it (it then runs before each replay), and no
other code of the speculators may write the drafter's ``idx_mapping`` except its allocation in
``__init__`` and a whole-buffer reset in ``capture`` (both before the first step).
"""

from __future__ import annotations

import ast
import copy as _copy
import inspect
import types
from dataclasses import dataclass, field
from pathlib import Path

from labkit.bench.scenario import MECHANICS_SCHEDULE, TIMELINE
from labkit.errors import LabkitInputError
from labkit.upstream.loader import load_partial, parse

# What the captured buffer's row 7 holds after the second step, and the part's answer:
#     -1            the fix's pad: the kernel's mask leaves the padded row out
#     7             the stale slot of the first step: the padded row stores its q over slot 7's
#     another slot  a constant pad that is a live request's slot
#     live rows     rows 0-6 must hold the live slots; anything else is not the kit's scenario

BUFFER = "idx_mapping"
M = TIMELINE.max_num_reqs
K = TIMELINE.k
VOCAB = 31
BEFORE_STEPS = ("__init__", "capture")  # methods that run once, before the first step the graph replays
ENTRY = "propose"  # the drafter's step, which the model runner calls before it replays the drafter's graph
# A method of the buffer that writes it (torch's in-place convention), and the ones that are views of it.
VIEWS = ("view", "reshape", "narrow", "view_as", "expand", "as_strided", "unsqueeze", "squeeze", "flatten",
         "__getitem__", "t", "transpose", "permute", "select", "unflatten")


class _NotInScenario(Exception):
    """The function read an attribute of ``self`` the scenario does not give."""


@dataclass(frozen=True)
class HostFillRun:
    file: str
    function: str  # Class.method
    line: int
    ran: bool
    problem: str | None
    live: list[int]  # rows 0..6 of the captured buffer after the second step
    padded: list[int]  # row 7
    stale: int  # what row 7 held after the first step (slot 7)

    @property
    def state(self) -> str | None:
        if not self.ran:
            return None
        slot = next((v for v in self.padded if v >= 0), None)
        if slot is None:
            return "fills" if set(self.padded) == {-1} else f"pads {min(self.padded)}"
        return f"keeps stale slot {slot}" if slot == self.stale else f"pads slot {slot}"

    def to_json(self) -> dict:
        return {"method": f"{self.function} run in the kit's scenario (two steps: slots 0-7, then 0-2 and 4-7 in a "
                          f"graph of {M} rows)", "file": self.file, "line": self.line, "ran": self.ran,
                "problem": self.problem, "live_rows": self.live, "padded_rows": self.padded,
                "stale_slot_before": self.stale, "state": self.state}


# -- compiling one method of the tree ---------------------------------------------------------------------

def _module_name(rel: str) -> str:
    return ".".join(Path(rel).with_suffix("").parts)


def _parsed_files(tree: Path, folder: str):
    """(path relative to the tree, its parsed module) for each readable Python file under `folder`; an
    unreadable one is named by the reading (:mod:`labkit.upstream.speculator_reading`), which makes the
    part "could not audit"."""
    base = tree / folder
    for path in sorted(base.rglob("*.py")) if base.is_dir() else []:
        try:
            yield path.relative_to(tree).as_posix(), parse(path)
        except LabkitInputError:
            continue


def _classes(tree: Path, folder: str) -> dict[str, tuple[str, ast.ClassDef]]:
    """Every class of the speculators' files, by name: (file, its definition)."""
    found = {}
    for rel, module in _parsed_files(tree, folder):
        for node in module.body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, (rel, node))
    return found


def _method(classes, cls: str, name: str, seen=None) -> tuple[str, ast.FunctionDef] | None:
    """`cls`'s method `name`, looked up through its bases among the speculators' classes."""
    seen = set() if seen is None else seen
    if cls in seen or cls not in classes:
        return None
    seen.add(cls)
    rel, node = classes[cls]
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
            return rel, item
    for b in node.bases:
        base = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
        hit = _method(classes, base, name, seen) if base else None
        if hit:
            return hit
    return None


def _compile_function(tree: Path, rel: str, node: ast.FunctionDef):
    """The function `node` of file `rel`, compiled alone with the module-level names it uses."""
    module = parse(tree / rel)
    top = {n.name for n in module.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for n in module.body:
        if isinstance(n, ast.Assign):
            top |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            top |= {(a.asname or a.name).split(".")[0] for a in n.names}
    bare = _copy.deepcopy(node)
    bare.decorator_list = []
    bare.returns = None
    for a in bare.args.posonlyargs + bare.args.args + bare.args.kwonlyargs:
        a.annotation = None
    used = sorted({n.id for n in ast.walk(bare) if isinstance(n, ast.Name)} & top - {bare.name})
    namespace = dict(vars(load_partial(tree, _module_name(rel), used))) if used else {}
    namespace.setdefault("__name__", _module_name(rel))
    code = compile(ast.Module(body=[bare], type_ignores=[]), str(tree / rel), "exec")
    exec(code, namespace)
    return namespace[bare.name]


class _Drafter:
    """`self` in the scenario: the persistent buffers of a drafter that stores q by slot, its sizes,
    and its class's methods (compiled from the tree on first use). Nothing else."""

    def __init__(self, torch, tree: Path, classes, cls: str):
        object.__setattr__(self, "_tree", (tree, classes, cls))
        self.idx_mapping = torch.zeros(M, dtype=torch.int32)
        self.temperature = torch.ones(M, dtype=torch.float32)
        self.seeds = torch.zeros(M, dtype=torch.int64)
        self.draft_logits = torch.zeros(M, K, VOCAB, dtype=torch.float32)
        self.max_num_reqs = M
        self.num_speculative_steps = K
        self.device = torch.device("cpu")

    def __getattr__(self, name):
        tree, classes, cls = object.__getattribute__(self, "_tree")
        found = _method(classes, cls, name)
        if found is None:
            raise _NotInScenario(name)
        fn = _compile_function(tree, *found)
        bound = types.MethodType(fn, self)
        object.__setattr__(self, name, bound)
        return bound


def run_copy(tree: str | Path, rel: str, qualname: str, line: int, folder: str) -> HostFillRun:
    """`qualname` (``Class.method``) of file `rel`, called on the scenario's two steps."""
    import torch

    tree = Path(tree)

    def not_run(problem, live=(), padded=(), stale=-2):
        problem = problem.replace(f" ({tree})", "").replace(str(tree), "the tree")  # the same words in any folder
        return HostFillRun(rel, qualname, line, False, problem[:500], list(live), list(padded), stale)

    if "." not in qualname:
        return not_run(f"{qualname} is not a method of a drafter class: the kit runs a method with its `self`")
    cls, name = qualname.rsplit(".", 1)
    classes = _classes(tree, folder)
    found = _method(classes, cls, name)
    if found is None:
        return not_run(f"{qualname} not found among the classes of {folder}/")
    try:
        fn = _compile_function(tree, *found)
    except LabkitInputError as err:
        return not_run(f"{qualname} did not load: {str(err).splitlines()[0]}")
    except Exception as err:  # noqa: BLE001 - the tree's code would not compile alone: said, never raised
        return not_run(f"{qualname} did not load: {type(err).__name__}: {err}")
    drafter = _Drafter(torch, tree, classes, cls)
    captured = drafter.idx_mapping  # the address the graph reads
    params = list(inspect.signature(fn).parameters.values())[1:]
    known = {"num_reqs", "idx_mapping", "temperature", "seeds"}
    unknown = [p.name for p in params if p.name not in known and p.default is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if unknown:
        return not_run(f"{qualname} takes {', '.join(unknown)}, which the kit's scenario does not give")
    first, second = MECHANICS_SCHEDULE
    stale = -2
    try:
        for slots in (first, second):
            values = {"num_reqs": len(slots), "idx_mapping": torch.tensor(slots, dtype=torch.int32),
                      "temperature": torch.linspace(0.6, 1.0, M), "seeds": torch.arange(M, dtype=torch.int64)}
            fn(drafter, **{p.name: values[p.name] for p in params if p.name in values})
            if slots == first:
                stale = int(captured[len(second)])
    except _NotInScenario as err:
        return not_run(f"{qualname} reads self.{err.args[0]}, which the kit's scenario does not give (the kit "
                       "does not guess its value under graphs)")
    except Exception as err:  # noqa: BLE001 - the tree's code failed in the scenario: said, never raised
        text = str(err).splitlines()[0] if str(err) else ""
        return not_run(f"{qualname} failed in the scenario: {type(err).__name__}: {text}")
    rows = captured.tolist()
    live, padded = rows[:len(second)], rows[len(second):]
    if live != list(second):
        return not_run(f"the captured {BUFFER}'s live rows hold {live}, not the live slots {list(second)}", live,
                       padded, stale)
    return HostFillRun(rel, qualname, line, True, None, live, padded, stale)


# -- what the run cannot see: when it runs, and who else writes the buffer ---------------------------------

@dataclass
class Site:
    file: str
    line: int
    code: str
    function: str
    why: str = ""

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "code": self.code, "function": self.function, "why": self.why}


def _root(node, aliases: set[str], attr: str) -> bool:
    """Whether `node` is ``self.<attr>``, a slice or view of it, or a local name bound to one."""
    while True:
        if isinstance(node, ast.Attribute) and node.attr == attr:
            return isinstance(node.value, ast.Name) and node.value.id == "self"
        if isinstance(node, ast.Name):
            return node.id in aliases
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in VIEWS:
            node = node.func.value
        else:
            return False


def _statements(fn: ast.FunctionDef):
    """Every statement of a function's own body (not of nested functions), with its nesting depth."""
    def walk(body, depth):
        for stmt in body:
            yield stmt, depth
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for name in ("body", "orelse", "finalbody"):
                yield from walk(getattr(stmt, name, []) or [], depth + 1)
            for h in getattr(stmt, "handlers", []) or []:
                yield from walk(h.body, depth + 1)
            for case in getattr(stmt, "cases", []) or []:
                yield from walk(case.body, depth + 1)
    yield from walk(fn.body, 0)


def writes_of(fn: ast.FunctionDef, attr: str) -> list[tuple[ast.stmt, int, str]]:
    """The statements of `fn` that write ``self.<attr>`` (in place, by subscript, through a view bound to a
    local name, or by binding a new tensor to the name), or hand it past its live rows to a call;
    each with its depth and what it does."""
    aliases: dict[str, bool] = {}  # local name bound to a view of the buffer -> whether it reaches the padded rows
    out = []
    for stmt, depth in _statements(fn):
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    if _root(stmt.value, set(aliases), attr):
                        aliases[t.id] = _reaches_padded(stmt.value, aliases, attr)
                    else:
                        aliases.pop(t.id, None)
                elif isinstance(t, ast.Subscript) and _root(t, set(aliases), attr):
                    out.append((stmt, depth, "assigns into it"))
                elif isinstance(t, ast.Attribute) and t.attr == attr:
                    out.append((stmt, depth, "binds a new tensor to it"))
        elif isinstance(stmt, ast.AugAssign) and _root(stmt.target, set(aliases), attr):
            out.append((stmt, depth, "updates it in place"))
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)) if not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With,
                       ast.Try)) else _own_calls(stmt):
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr.endswith("_") and not f.attr.endswith("__") \
                    and _root(f.value, set(aliases), attr):
                out.append((stmt, depth, f"calls {f.attr} on it"))
            elif any(_handed(a, aliases, attr) for a in [*call.args, *(k.value for k in call.keywords)]):
                out.append((stmt, depth, f"hands it to {ast.unparse(f)}"))
    seen, unique = set(), []
    for item in out:
        if id(item[0]) not in seen:
            seen.add(id(item[0]))
            unique.append(item)
    return unique


def _own_calls(stmt):
    """The calls in a compound statement's header (its test, iterator or context), not in its body."""
    heads = [getattr(stmt, n) for n in ("test", "iter", "items") if getattr(stmt, n, None) is not None]
    for h in heads:
        for node in (h if isinstance(h, list) else [h]):
            yield from (n for n in ast.walk(node) if isinstance(n, ast.Call))


def _handed(arg, aliases, attr) -> bool:
    """An argument that is the buffer past its live rows: the whole of it or ``[lower:]`` (a live slice
    ``[:n]``, or a name bound to one, reaches only the rows the step's launch reads)."""
    if isinstance(arg, ast.Name):
        return arg.id in aliases and aliases[arg.id]
    if not _root(arg, {k for k, v in aliases.items() if v}, attr):
        return False
    if isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Slice):
        return arg.slice.lower is not None
    return True


def _reaches_padded(value, aliases, attr) -> bool:
    """Whether a name bound to `value` can reach the buffer's padded rows (anything but ``[:n]``)."""
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and value.slice.lower is None \
            and value.slice.upper is not None and not isinstance(value.value, ast.Subscript):
        return False
    return _handed(value, aliases, attr) if not isinstance(value, ast.Name) else aliases.get(value.id, False)


@dataclass
class Placement:
    """Where the copy function runs (each call of it) and who else writes the buffer."""
    calls: list[Site] = field(default_factory=list)
    conditional_calls: list[Site] = field(default_factory=list)
    other_writes: list[Site] = field(default_factory=list)
    before_steps: list[Site] = field(default_factory=list)


def place(tree: Path, folder: str, copy_functions: set[str], helpers: set[str], attr: str = BUFFER) -> Placement:
    """Every call of the copy functions (by method name) in the speculators' files, and every write of
    ``self.<attr>`` outside them and their helpers."""
    names = {q.rsplit(".", 1)[-1] for q in copy_functions}
    out = Placement()
    for rel, module in _parsed_files(tree, folder):
        for fn, qual in _functions(module):
            for stmt, depth in _statements(fn):
                for call in _calls_in(stmt):
                    f = call.func
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
                            and f.attr in names and qual not in copy_functions:
                        site = Site(rel, call.lineno, ast.unparse(call), qual)
                        (out.calls if depth == 0 else out.conditional_calls).append(site)
            if qual in copy_functions or qual.rsplit(".", 1)[-1] in helpers:
                continue
            for stmt, _, what in writes_of(fn, attr):
                site = Site(rel, stmt.lineno, ast.unparse(stmt).splitlines()[0][:160], qual, what)
                method = qual.rsplit(".", 1)[-1]
                whole = what in ("binds a new tensor to it",) or (what.startswith("calls ") and
                                                                  _whole_reset(stmt, attr))
                (out.before_steps if method in BEFORE_STEPS and whole else out.other_writes).append(site)
    return out


def _whole_reset(stmt, attr) -> bool:
    """``self.<attr>.zero_()`` or ``self.<attr>.fill_(constant)``: a reset of the whole buffer."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    f = stmt.value.func
    return (isinstance(f, ast.Attribute) and f.attr in ("zero_", "fill_") and isinstance(f.value, ast.Attribute)
            and f.value.attr == attr and isinstance(f.value.value, ast.Name) and f.value.value.id == "self")


def _calls_in(stmt):
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
        yield from _own_calls(stmt)
        return
    yield from (n for n in ast.walk(stmt) if isinstance(n, ast.Call))


def _functions(module: ast.Module):
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, node.name
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield item, f"{node.name}.{item.name}"


def _writes_past_live(tree: Path, copy) -> bool:
    """Whether the copy function writes the buffer anywhere but its live copy (a form the reader does not
    place exactly)."""
    try:
        module = parse(tree / copy.file)
    except LabkitInputError:
        return True
    for fn, qual in _functions(module):
        if qual == copy.function:
            return any(stmt.lineno != copy.live_copy.line for stmt, _, _ in writes_of(fn, BUFFER))
    return True


def _early_returns(tree: Path, sites: list[Site]) -> list[Site]:
    """Calls that a ``return`` or ``raise`` before them in their caller can skip."""
    skipped = []
    for site in sites:
        try:
            module = parse(tree / site.file)
        except LabkitInputError:
            continue
        for fn, qual in _functions(module):
            if qual != site.function:
                continue
            exits = [s for s, _ in _statements(fn) if isinstance(s, (ast.Return, ast.Raise)) and s.lineno < site.line]
            if exits:
                skipped.append(Site(site.file, site.line, site.code, site.function,
                                    f"line {exits[0].lineno} can leave {site.function} before it"))
    return skipped


@dataclass
class HostFillAudit:
    """The host fill's part: the copy functions found by reading, each run in the scenario, and where they run."""
    reading: object  # labkit.upstream.speculator_reading.SpeculatorReading
    runs: list[HostFillRun]
    placement: Placement | None

    def part(self) -> dict:
        evidence = [c.to_json() for c in self.reading.copies]
        runs = [r.to_json() for r in self.runs]
        base = {"evidence": evidence, "runs": runs}
        if not self.reading.copies:
            return {**base, **self.reading.part()}
        wrong = [r for r in self.runs if r.ran and r.state != "fills" and not r.state.startswith("pads -")]
        if wrong:
            r = wrong[0]
            slot = int(r.state.rsplit(" ", 1)[1])
            how = ("keeps the stale slot the step before left there" if r.state.startswith("keeps") else
                   f"holds slot {slot}")
            return {**base, "state": "no fill",
                    "says": f"the padded row of {BUFFER} {how} when the graph replays ({r.file}: {r.function} run in "
                            f"the kit's scenario; row {len(r.live)} held {r.padded[0]}), so it stores its q over slot "
                            f"{slot}'s"}
        p = self.placement
        by_name = {c.function: c for c in self.reading.copies}
        unrun = [r for r in self.runs if not r.ran]
        bare = [r for r in unrun if not by_name[r.function].pad_fills and not by_name[r.function].whole_fills
                and not by_name[r.function].unfollowed and not _writes_past_live(self._tree, by_name[r.function])]
        if bare and p is not None and not p.other_writes:
            # The form the reader knows exactly: the function writes the live rows and nothing else of the
            # buffer, and no other code of the speculators writes it: the padded rows keep the slots the
            # step before left there.
            c = by_name[bare[0].function]
            return {**base, "state": "no fill",
                    "says": f"nothing fills the padded rows of {BUFFER} ({c.file}: {c.function} copies the live "
                            f"slots on line {c.live_copy.line} and is the only code of the speculators that writes "
                            f"{BUFFER} after its allocation; read, not run: {bare[0].problem})"}
        problems = [f"{r.function} ({r.file}:{r.line}) could not be run: {r.problem}" for r in unrun]
        # A file the kit cannot read may call the host step or write the buffer: nothing is presumed of it.
        problems += [f"could not read {u}" for u in self.reading.unreadable]
        if p is not None:
            if not p.calls and not p.conditional_calls:
                problems.append(f"nothing calls {', '.join(r.function for r in self.runs)}: the kit cannot tell that "
                                "it runs before a graph replays")
            problems += [f"{s.file}:{s.line} calls it only under a condition or in a loop ({s.code}): the kit cannot "
                         "tell that it runs before every replay" for s in p.conditional_calls]
            problems += [f"{s.file}:{s.line} calls it from {s.function}, not from a drafter's propose (the step the "
                         "model runner calls before each replay): the kit cannot tell when that runs"
                         for s in p.calls if s.function.rsplit(".", 1)[-1] != ENTRY]
            problems += [f"{s.file}:{s.line}: {s.why}" for s in _early_returns(self._tree, p.calls)]
            problems += [f"{s.file}:{s.line} ({s.function}) {s.why.replace('it', f'self.{BUFFER}', 1)} outside the "
                         f"host fill ({s.code}): the kit cannot place that write against the replay"
                         for s in p.other_writes]
        if problems:
            return {**base, "state": "unknown", "says": "the host fill could not be judged: " + "; ".join(problems)}
        r = self.runs[0]
        return {**base, "state": "fills",
                "says": f"the speculator fills the padded rows of {BUFFER} with -1 before every replay ({r.file}: "
                        f"{r.function} run in the kit's scenario: row {len(r.live)} held {r.padded[0]})"}

    _tree: Path = Path(".")

    def lines(self) -> list[str]:
        part = self.part()
        out = self.reading.lines()[:-1] if self.reading.copies else self.reading.lines()
        out += [f"  run in the kit's scenario: {r.function}: " + (f"rows {r.live} {r.padded} after the second step"
                                                                  if r.ran else f"not run: {r.problem}")
                for r in self.runs]
        if self.placement is not None and self.placement.before_steps:
            out += [f"  before the first step: {s.file}:{s.line} ({s.function}): {s.code}"
                    for s in self.placement.before_steps]
        out.append(f"host fill: {part['state']}: {part['says']}")
        return out

    def to_json(self) -> dict:
        p = self.placement
        return {"reading": self.reading.to_json(), "runs": [r.to_json() for r in self.runs],
                "placement": None if p is None else {k: [s.to_json() for s in v] for k, v in p.__dict__.items()},
                "part": self.part()}


def audit_host_fill(tree: str | Path) -> HostFillAudit:
    from labkit.upstream.speculator_reading import SPEC_DECODE, read_speculators

    tree = Path(tree)
    reading = read_speculators(tree)
    runs = [run_copy(tree, c.file, c.function, c.line, SPEC_DECODE) for c in reading.copies]
    placement = None
    if reading.copies:
        copies = {c.function for c in reading.copies}
        helpers = set()
        for c in reading.copies:
            found = _method(_classes(tree, SPEC_DECODE), *c.function.rsplit(".", 1)) if "." in c.function else None
            if found:
                helpers |= {n.func.attr for n in ast.walk(found[1]) if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                            and n.func.value.id == "self"}
        placement = place(tree, SPEC_DECODE, copies, helpers)
    audit = HostFillAudit(reading, runs, placement)
    audit._tree = tree
    return audit
