"""The kit's own mutation corpus for ``python -m labkit audit-vllm``: fixed vLLM releases, broken on purpose.

A test instrument, not part of the installed kit. Each :class:`Mutation` edits a copy of a fixed
release's fetched files (never committed: the trees are generated under the test's temporary folder
from the releases read from the package index at test time) in one way a fork or a refactor might:

    broken    the padded rows can still overwrite a live request's q or touch slot -1: the audit
              must never say "not affected" (exit 0)
    correct   the same fix written another way: the audit must never say "affected" (exit 1)

(Exit 2, "could not audit", is allowed for both: the audit may always say it could not tell.)
The edits find their place by the text or the syntax tree of the release's own files; an edit
whose place a release lacks raises :class:`NotApplicable`, and the corpus says so rather than
skipping silently.

    python tests/vllm_mutations.py TREE OUT    write one mutated tree per mutation under OUT
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

KERNEL = "vllm/v1/worker/gpu/sample/gumbel.py"
SPEC = "vllm/v1/worker/gpu/spec_decode"
SPECULATOR = f"{SPEC}/speculator.py"
DFLASH = f"{SPEC}/dflash/speculator.py"
BROKEN, CORRECT = "broken", "correct"

FILL = "self.idx_mapping[num_reqs:].fill_(-1)"
LIVE_COPY = "self.idx_mapping[:num_reqs].copy_(idx_mapping)"
VALID = "is_valid_req = req_state_idx >= 0"
TEMP_LOAD = "tl.load(temp_ptr + req_state_idx, mask=is_valid_req, other=0.0)"
SEED_LOAD = "tl.load(seeds_ptr + req_state_idx, mask=is_valid_req, other=0)"
STORE_MASKS = ("mask=mask & is_valid_req,", "mask=mask & (row >= 0),")
PAD_STORE = "tl.store(out_sample_idx_mapping_ptr + block, -1, mask=mask)"


class NotApplicable(Exception):
    """The release lacks the place this mutation edits."""


@dataclass(frozen=True)
class Mutation:
    name: str
    part: str  # "kernel", "host fill" or "dflash"
    kind: str  # BROKEN or CORRECT
    what: str  # the class of edit: bound, buffer, condition, later overwrite, wrapper, ...
    edit: Callable[[Path], None]


# -- editing helpers ---------------------------------------------------------------------------------------

def _read(tree: Path, rel: str) -> str:
    path = tree / rel
    if not path.is_file():
        raise NotApplicable(f"no {rel}")
    return path.read_text()


def replace(tree: Path, rel: str, old: str, new: str, count: int = 1) -> None:
    """Replace `old` by `new` in `rel`: exactly `count` occurrences must be there (0: every one, at least one)."""
    text = _read(tree, rel)
    found = text.count(old)
    if found == 0 or (count and found != count):
        raise NotApplicable(f"{rel} holds {found} of {old!r}")
    (tree / rel).write_text(text.replace(old, new))


def replace_any(tree: Path, rel: str, olds, new: str) -> None:
    for old in olds:
        if old in _read(tree, rel):
            return replace(tree, rel, old, new, 0)
    raise NotApplicable(f"{rel} holds none of {olds}")


def line_of(text: str, needle: str) -> int:
    """0-based index of the only line holding `needle`."""
    hits = [i for i, line in enumerate(text.splitlines()) if needle in line]
    if len(hits) != 1:
        raise NotApplicable(f"{len(hits)} lines hold {needle!r}")
    return hits[0]


def insert_lines(tree: Path, rel: str, at: int, indent: str, lines: list[str]) -> None:
    text = _read(tree, rel).splitlines(keepends=True)
    text[at:at] = [f"{indent}{line}\n" if line else "\n" for line in lines]
    (tree / rel).write_text("".join(text))


def indent_of(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def replace_line(tree: Path, rel: str, needle: str, lines: list[str]) -> None:
    """Replace the one line holding `needle` with `lines`, at its indentation."""
    text = _read(tree, rel)
    at = line_of(text, needle)
    rows = text.splitlines(keepends=True)
    indent = indent_of(rows[at])
    rows[at:at + 1] = [f"{indent}{line}\n" for line in lines]
    (tree / rel).write_text("".join(rows))


def append(tree: Path, rel: str, source: str) -> None:
    (tree / rel).write_text(_read(tree, rel).rstrip("\n") + "\n\n\n" + source.strip("\n") + "\n")


def write(tree: Path, rel: str, source: str) -> None:
    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
    (tree / rel).write_text(source.strip("\n") + "\n")


def _statement_calling(text: str, is_call: Callable[[ast.Call], bool]) -> ast.stmt:
    """The first statement of the file that is (or whose header holds) a call `is_call` picks."""
    for node in ast.walk(ast.parse(text)):
        for field in ("body", "orelse"):
            for stmt in getattr(node, field, []) or []:
                if isinstance(stmt, ast.stmt) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.If,
                                                                        ast.For, ast.While, ast.With, ast.Try)):
                    if any(isinstance(c, ast.Call) and is_call(c) for c in ast.walk(stmt)):
                        return stmt
                if isinstance(stmt, ast.For) and any(isinstance(c, ast.Call) and is_call(c) for c in ast.walk(stmt)):
                    return stmt
    raise NotApplicable("no such call")


def _self_call(name: str) -> Callable[[ast.Call], bool]:
    return lambda c: (isinstance(c.func, ast.Attribute) and c.func.attr == name and isinstance(c.func.value, ast.Name)
                      and c.func.value.id == "self")


def _name_call(name: str) -> Callable[[ast.Call], bool]:
    return lambda c: isinstance(c.func, ast.Name) and c.func.id == name


def around_statement(tree: Path, rel: str, is_call, lines: list[str], after: bool) -> None:
    """Insert `lines` just before or after the statement that makes the call, at its indentation."""
    text = _read(tree, rel)
    stmt = _statement_calling(text, is_call)
    rows = text.splitlines()
    indent = indent_of(rows[stmt.lineno - 1])
    insert_lines(tree, rel, stmt.end_lineno if after else stmt.lineno - 1, indent, lines)


def copy_caller(tree: Path) -> str:
    """The first speculator file (sorted) that calls ``self._copy_request_inputs``."""
    for path in sorted((tree / SPEC).rglob("*.py")):
        if "self._copy_request_inputs(" in path.read_text():
            return path.relative_to(tree).as_posix()
    raise NotApplicable("nothing calls _copy_request_inputs")


def _first_arg_of(tree: Path, rel: str, name: str) -> str:
    stmt = _statement_calling(_read(tree, rel), _self_call(name))
    call = next(c for c in ast.walk(stmt) if isinstance(c, ast.Call) and _self_call(name)(c))
    return ast.unparse(call.args[0])


def dflash_rows_from(tree: Path) -> str:
    """The first padded sample row, as DFlash's caller can write it."""
    return "input_batch.num_reqs * self.num_speculative_steps"


# -- the corpus --------------------------------------------------------------------------------------------

def _host(name, kind, what, edit):
    return Mutation(name, "host fill", kind, what, edit)


def _kernel(name, kind, what, edit):
    return Mutation(name, "kernel", kind, what, edit)


def _dflash(name, kind, what, edit):
    return Mutation(name, "dflash", kind, what, edit)


def _fill_as(*lines):
    return lambda t: replace_line(t, SPECULATOR, FILL, list(lines))


def _in_caller_after(*lines):
    def edit(t):
        rel = copy_caller(t)
        n = _first_arg_of(t, rel, "_copy_request_inputs")
        around_statement(t, rel, _self_call("_copy_request_inputs"), [x.format(n=n) for x in lines], after=True)
    return edit


def _in_caller_before(*lines):
    def edit(t):
        rel = copy_caller(t)
        n = _first_arg_of(t, rel, "_copy_request_inputs")
        around_statement(t, rel, _self_call("_copy_request_inputs"), [x.format(n=n) for x in lines], after=False)
    return edit


def _wrap_copy_call(condition):
    def edit(t):
        rel = copy_caller(t)
        text = _read(t, rel)
        stmt = _statement_calling(text, _self_call("_copy_request_inputs"))
        rows = text.splitlines(keepends=True)
        indent = indent_of(rows[stmt.lineno - 1])
        body = ["    " + r if r.strip() else r for r in rows[stmt.lineno - 1:stmt.end_lineno]]
        rows[stmt.lineno - 1:stmt.end_lineno] = [f"{indent}if {condition}:\n", *body]
        (t / rel).write_text("".join(rows))
    return edit


def _copy_through_a_helper(condition):
    """The caller calls a helper (only under `condition`) that calls the copy unconditionally."""
    def edit(t):
        rel = copy_caller(t)
        text = _read(t, rel)
        stmt = _statement_calling(text, _self_call("_copy_request_inputs"))
        rows = text.splitlines(keepends=True)
        indent = indent_of(rows[stmt.lineno - 1])
        call = "".join(rows[stmt.lineno - 1:stmt.end_lineno]).replace("self._copy_request_inputs(",
                                                                         "self._copy_inputs_step(", 1)
        body = [f"{indent}if {condition}:\n", *("    " + r if r.strip() else r for r in call.splitlines(keepends=True))]
        rows[stmt.lineno - 1:stmt.end_lineno] = body
        (t / rel).write_text("".join(rows))
        replace_line(t, rel, "    def propose(", ["def _copy_inputs_step(self, *args, **kwargs):",
                                                    "    self._copy_request_inputs(*args, **kwargs)", "",
                                                    "def propose("])
    return edit


def _helper_file(rel: str, source: str, imports: str, target: str, needle: str, call: list[str]):
    def edit(t):
        write(t, rel, source)
        module = rel.removesuffix(".py").replace("/", ".")
        text = _read(t, target)
        first = next(i for i, line in enumerate(text.splitlines()) if line.startswith(("from ", "import ")))
        insert_lines(t, target, first, "", [f"from {module} import {imports}"])
        replace_line(t, target, needle, call)
    return edit


PAD_HELPER_WRONG = '''
import torch


def pad_rows(buffer: torch.Tensor, num_reqs: int) -> None:
    buffer[num_reqs + 1:] = -1
'''
PAD_HELPER_RIGHT = '''
import torch


def pad_rows(buffer: torch.Tensor, num_reqs: int) -> None:
    buffer[num_reqs:] = -1
'''
VALID_HELPER = '''
from vllm.triton_utils import tl, triton


@triton.jit
def valid_slot(slot):
    return slot >= {bound}
'''


def host_mutations() -> list[Mutation]:
    m = [
        _host("fill-start-plus-one", BROKEN, "bound", _fill_as("self.idx_mapping[num_reqs + 1:].fill_(-1)")),
        _host("fill-start-minus-one", BROKEN, "bound", _fill_as("self.idx_mapping[num_reqs - 1:].fill_(-1)")),
        _host("fill-past-the-padding", BROKEN, "bound", _fill_as("self.idx_mapping[self.max_num_reqs:].fill_(-1)")),
        _host("fill-empty-range", BROKEN, "bound", _fill_as("self.idx_mapping[num_reqs:num_reqs].fill_(-1)")),
        _host("fill-another-objects-buffer", BROKEN, "buffer",
              _fill_as("self.input_buffers.idx_mapping[num_reqs:].fill_(-1)")),
        _host("fill-a-clone", BROKEN, "buffer", _fill_as("self.idx_mapping[num_reqs:].clone().fill_(-1)")),
        _host("fill-a-new-tensor-bound-to-the-name", BROKEN, "renamed pointer",
              _fill_as("self.idx_mapping = torch.cat([self.idx_mapping[:num_reqs], "
                       "torch.full_like(self.idx_mapping[num_reqs:], -1)])")),
        _host("fill-with-0", BROKEN, "value", _fill_as("self.idx_mapping[num_reqs:].fill_(0)")),
        _host("fill-deleted", BROKEN, "later overwrite", _fill_as("pass")),
        _host("fill-only-when-nothing-is-padded", BROKEN, "condition",
              _fill_as("if num_reqs == self.max_num_reqs:", "    self.idx_mapping[num_reqs:].fill_(-1)")),
        _host("fill-only-without-draft-logits", BROKEN, "condition",
              _fill_as("if self.draft_logits is None:", "    self.idx_mapping[num_reqs:].fill_(-1)")),
        _host("fill-only-without-graphs", BROKEN, "condition",
              _fill_as("if not self.use_cuda_graphs:", "    self.idx_mapping[num_reqs:].fill_(-1)")),
        _host("live-slot-written-over-the-fill", BROKEN, "later overwrite",
              _fill_as(FILL, "self.idx_mapping[num_reqs:] = idx_mapping[num_reqs - 1]")),
        _host("fill-through-a-slice-alias-off-by-one", BROKEN, "renamed pointer",
              _fill_as("padded = self.idx_mapping[num_reqs + 1:]", "padded.fill_(-1)")),
        _host("fill-in-a-helper-method-with-a-wrong-bound", BROKEN, "helper function",
              lambda t: (_fill_as("self._pad_rows(num_reqs)")(t), replace_line(
                  t, SPECULATOR, "def _copy_request_inputs(",
                  ["def _pad_rows(self, num_reqs):", "    self.idx_mapping[num_reqs + 1:].fill_(-1)", "",
                   "def _copy_request_inputs("]))),
        _host("fill-in-a-helper-of-another-file-with-a-wrong-bound", BROKEN, "other file",
              _helper_file(f"{SPEC}/pad_utils.py", PAD_HELPER_WRONG, "pad_rows", SPECULATOR, FILL,
                           ["pad_rows(self.idx_mapping, num_reqs)"])),
        _host("later-overwrite-in-the-caller", BROKEN, "later overwrite",
              _in_caller_after("self.idx_mapping[{n}:].fill_(0)")),
        _host("later-live-slot-in-the-caller", BROKEN, "later overwrite",
              _in_caller_after("self.idx_mapping[{n}:] = self.idx_mapping[0]")),
        _host("copy-called-only-in-eager-mode", BROKEN, "condition (when under graphs)",
              _wrap_copy_call("self.idx_mapping is None")),
        _host("copy-moved-into-a-helper-called-only-in-eager-mode", BROKEN, "helper function",
              _copy_through_a_helper("self.idx_mapping is None")),
        _host("caller-returns-before-the-copy", BROKEN, "condition (when under graphs)",
              _in_caller_before("if {n} < self.max_num_reqs:", "    return None")),
        # the fix written another way: must never be "affected"
        _host("fill-through-a-slice-alias", CORRECT, "renamed pointer",
              _fill_as("padded = self.idx_mapping[num_reqs:]", "padded.fill_(-1)")),
        _host("whole-reset-before-the-live-copy", CORRECT, "reset before",
              lambda t: (_fill_as("pass")(t), replace_line(t, SPECULATOR, LIVE_COPY,
                                                           ["self.idx_mapping.fill_(-1)", LIVE_COPY]))),
        _host("fill-with-full-like", CORRECT, "value",
              _fill_as("self.idx_mapping[num_reqs:] = torch.full_like(self.idx_mapping[num_reqs:], -1)")),
        _host("fill-in-a-helper-method", CORRECT, "helper function",
              lambda t: (_fill_as("self._pad_rows(num_reqs)")(t), replace_line(
                  t, SPECULATOR, "def _copy_request_inputs(",
                  ["def _pad_rows(self, num_reqs):", "    self.idx_mapping[num_reqs:].fill_(-1)", "",
                   "def _copy_request_inputs("]))),
        _host("fill-in-a-helper-of-another-file", CORRECT, "other file",
              _helper_file(f"{SPEC}/pad_utils.py", PAD_HELPER_RIGHT, "pad_rows", SPECULATOR, FILL,
                           ["pad_rows(self.idx_mapping, num_reqs)"])),
    ]
    return m


def _unwrapped_impl(extra_body: str):
    """gumbel_sample renamed to _gumbel_sample_impl and a wrapper of that name that passes everything on."""
    def edit(t):
        replace(t, KERNEL, "def gumbel_sample(", "def _gumbel_sample_impl(")
        append(t, KERNEL, extra_body)
    return edit


PASS_THROUGH = '''
def gumbel_sample(*args, **kwargs):
    """Samples one token per row."""
    return _gumbel_sample_impl(*args, **kwargs)
'''
WRAPS = '''
import functools

gumbel_sample = functools.wraps(_gumbel_sample_impl)(lambda *a, **k: _gumbel_sample_impl(*a, **k))
'''
NOT_EXACTLY_PASS_THROUGH = '''
def gumbel_sample(*args, **kwargs):
    kwargs = dict(kwargs)
    return _gumbel_sample_impl(*args, **kwargs)
'''


def _unmask_store(t):
    replace_any(t, KERNEL, STORE_MASKS, "mask=mask,")


def _unmask_temp(t):
    replace(t, KERNEL, TEMP_LOAD, "tl.load(temp_ptr + req_state_idx)", 0)


def _both(*edits):
    def edit(t):
        for e in edits:
            e(t)
    return edit


def _rename_everywhere(old, new):
    def edit(t):
        text = _read(t, KERNEL)
        if not re.search(rf"\b{old}\b", text):
            raise NotApplicable(f"no {old}")
        (t / KERNEL).write_text(re.sub(rf"\b{old}\b", new, text))
    return edit


def _q_pointer(t) -> str:
    text = _read(t, KERNEL)
    for name in ("processed_logits_ptr", "logits_cache_ptr"):
        if re.search(rf"\b{name}\b", text):
            return name
    raise NotApplicable("no q pointer")


def _q_param(t) -> str:
    """The name of gumbel_sample's slot-indexed output parameter."""
    text = _read(t, KERNEL)
    for name in ("output_processed_logits", "processed_logits_out", "logits_cache"):
        if re.search(rf"\b{name}\b", text):
            return name
    raise NotApplicable("no q parameter")


def kernel_mutations() -> list[Mutation]:
    return [
        _kernel("valid-from-minus-one", BROKEN, "mask", lambda t: replace(t, KERNEL, VALID,
                                                                         "is_valid_req = req_state_idx >= -1")),
        _kernel("store-mask-skips-slot-0", BROKEN, "mask",
                lambda t: replace_any(t, KERNEL, STORE_MASKS, "mask=mask & (req_state_idx > 0),")),
        _kernel("store-unmasked", BROKEN, "mask on loads only", _unmask_store),
        _kernel("temperature-load-unmasked", BROKEN, "mask", _unmask_temp),
        # A padded row's temperature is 0 where its load is masked, and some releases read the seed only
        # for a temperature that is not 0: the unmasked seed load is reached once that load gives 1.
        _kernel("seed-load-unmasked", BROKEN, "mask",
                _both(lambda t: replace(t, KERNEL, SEED_LOAD, "tl.load(seeds_ptr + req_state_idx)", 0),
                      lambda t: replace(t, KERNEL, TEMP_LOAD, TEMP_LOAD.replace("other=0.0", "other=1.0"), 0))),
        _kernel("store-address-clamped-instead-of-masked", BROKEN, "mask",
                _both(_unmask_store, lambda t: replace(t, KERNEL, VALID,
                                                       "is_valid_req = req_state_idx >= 0\n"
                                                       "    req_state_idx = tl.maximum(req_state_idx, 0)"))),
        _kernel("args-kwargs-wrapper-around-an-unmasked-store", BROKEN, "wrapper",
                _both(_unwrapped_impl(PASS_THROUGH), _unmask_store)),
        _kernel("wraps-wrapper-around-unmasked-temperature", BROKEN, "wrapper",
                _both(_unwrapped_impl(WRAPS), _unmask_temp)),
        _kernel("inexact-wrapper-around-unmasked-temperature", BROKEN, "wrapper",
                _both(_unwrapped_impl(NOT_EXACTLY_PASS_THROUGH), _unmask_temp)),
        _kernel("renamed-temperature-pointer-unmasked", BROKEN, "renamed pointer",
                _both(_unmask_temp, _rename_everywhere("temp_ptr", "t_ptr"))),
        _kernel("renamed-q-pointer-unmasked-store", BROKEN, "renamed pointer",
                lambda t: _both(_unmask_store, _rename_everywhere(_q_pointer(t), "q_out_ptr"))(t)),
        _kernel("renamed-q-parameter-unmasked-store", BROKEN, "renamed pointer",
                lambda t: _both(_unmask_store, _rename_everywhere(_q_param(t), "q_out"))(t)),
        _kernel("valid-slot-helper-of-another-file-from-minus-one", BROKEN, "other file",
                _helper_file("vllm/v1/worker/gpu/sample/valid.py", VALID_HELPER.format(bound=-1), "valid_slot",
                             KERNEL, VALID, ["is_valid_req = valid_slot(req_state_idx)"])),
        # the mask written another way
        _kernel("valid-as-not-minus-one", CORRECT, "mask written another way",
                lambda t: replace(t, KERNEL, VALID, "is_valid_req = req_state_idx != -1")),
        _kernel("valid-as-shifted-comparison", CORRECT, "mask written another way",
                lambda t: replace(t, KERNEL, VALID, "is_valid_req = (req_state_idx + 1) > 0")),
        _kernel("args-kwargs-wrapper", CORRECT, "wrapper", _unwrapped_impl(PASS_THROUGH)),
        _kernel("wraps-wrapper", CORRECT, "wrapper", _unwrapped_impl(WRAPS)),
        _kernel("renamed-q-pointer", CORRECT, "renamed pointer",
                lambda t: _rename_everywhere(_q_pointer(t), "q_out_ptr")(t)),
        _kernel("valid-slot-helper-of-another-file", CORRECT, "other file",
                _helper_file("vllm/v1/worker/gpu/sample/valid.py", VALID_HELPER.format(bound=0), "valid_slot",
                             KERNEL, VALID, ["is_valid_req = valid_slot(req_state_idx)"])),
    ]


def _around_prepare(lines, after: bool):
    return lambda t: around_statement(t, DFLASH, _name_call("prepare_dflash_inputs"), lines, after)


def _pad(new):
    return lambda t: replace(t, DFLASH, PAD_STORE, new)


ROWS = "input_batch.num_reqs * self.num_speculative_steps"


def dflash_mutations() -> list[Mutation]:
    no_pad = _pad("pass")
    return [
        _dflash("pad-0", BROKEN, "value", _pad("tl.store(out_sample_idx_mapping_ptr + block, 0, mask=mask)")),
        _dflash("pad-slot-3", BROKEN, "value", _pad("tl.store(out_sample_idx_mapping_ptr + block, 3, mask=mask)")),
        _dflash("pad-deleted", BROKEN, "later overwrite", no_pad),
        _dflash("pad-masked-off", BROKEN, "mask",
                _pad("tl.store(out_sample_idx_mapping_ptr + block, -1, mask=mask & (block < 0))")),
        _dflash("pad-every-other-row", BROKEN, "bound",
                _pad("tl.store(out_sample_idx_mapping_ptr + block, -1, mask=mask & (block % 2 == 1))")),
        _dflash("host-fill-0-after-the-preparation", BROKEN, "host write after",
                _around_prepare([f"self.sample_idx_mapping[{ROWS}:].fill_(0)"], after=True)),
        _dflash("host-zeros-after-the-preparation", BROKEN, "host write after",
                _around_prepare([f"self.sample_idx_mapping[{ROWS}:] = torch.zeros(1, dtype=torch.int32, "
                                 "device=self.sample_idx_mapping.device)"], after=True)),
        _dflash("host-zero-all-after-the-preparation", BROKEN, "host write after",
                _around_prepare(["self.sample_idx_mapping.zero_()"], after=True)),
        _dflash("host-fill-0-after-through-a-local-name", BROKEN, "host write after",
                _around_prepare([f"num_padded_from = {ROWS}",
                                 "self.sample_idx_mapping[num_padded_from:].fill_(0)"], after=True)),
        _dflash("host-fill-0-after-under-a-condition", BROKEN, "condition",
                _around_prepare(["if not dummy_run:", f"    self.sample_idx_mapping[{ROWS}:].fill_(0)"], after=True)),
        _dflash("host-fill-0-in-a-helper-after", BROKEN, "helper function",
                lambda t: (_around_prepare(["self._pad_samples()"], after=True)(t), replace_line(
                    t, DFLASH, "    def propose(", ["def _pad_samples(self):",
                                                    "    self.sample_idx_mapping[1:].fill_(0)", "",
                                                    "def propose("]))),
        _dflash("host-reset-to-0-before-without-a-pad", BROKEN, "host write before",
                _both(no_pad, _around_prepare(["self.sample_idx_mapping.fill_(0)"], after=False))),
        # the pad written another way
        _dflash("host-reset-before-the-preparation", CORRECT, "reset before",
                _both(no_pad, _around_prepare(["self.sample_idx_mapping.fill_(-1)"], after=False))),
        _dflash("host-fill-after-a-pad-of-0", CORRECT, "host write after",
                _both(_pad("tl.store(out_sample_idx_mapping_ptr + block, 0, mask=mask)"),
                      _around_prepare([f"self.sample_idx_mapping[{ROWS}:].fill_(-1)"], after=True))),
        _dflash("pad-as-negative-constant-name", CORRECT, "value",
                _pad("tl.store(out_sample_idx_mapping_ptr + block, -1 + 0 * block, mask=mask)")),
    ]


def corpus() -> list[Mutation]:
    return host_mutations() + kernel_mutations() + dflash_mutations()


def generate(release: Path, out: Path, mutations: list[Mutation] | None = None) -> dict[str, Path | str]:
    """One tree per mutation under `out` (a copy of `release`, edited): name -> the tree, or why not applicable.
    Every edited file must still be Python: a mutation tests the audit's judgement, not its parser."""
    made: dict[str, Path | str] = {}
    for m in mutations if mutations is not None else corpus():
        target = out / m.name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(release, target, ignore=shutil.ignore_patterns("__pycache__"))
        try:
            m.edit(target)
        except NotApplicable as err:
            shutil.rmtree(target)
            made[m.name] = f"not applicable: {err}"
            continue
        for path in target.rglob("*.py"):
            try:
                ast.parse(path.read_text())
            except SyntaxError as err:
                raise AssertionError(f"mutation {m.name} left {path.relative_to(target)} unparseable: {err}") from None
        made[m.name] = target
    return made


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    for name, where in generate(Path(sys.argv[1]), Path(sys.argv[2])).items():
        print(f"{name}: {where}")
