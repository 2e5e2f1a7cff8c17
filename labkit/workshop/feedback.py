"""What a checker says: a verdict in one paragraph, and learner exceptions explained.

Every checker returns a :class:`CheckResult` and never raises. An exception that comes out of
the learner's own code is caught and told back with the line of their function it came from;
anything else that goes wrong inside a checker is reported as a possible fault of the kit.

Below the verdict a result may show more: the learner's own launch, drawn
(:mod:`labkit.workshop.harness.your_launch`), and once solved the PR's fix beside the learner's code
(:mod:`labkit.workshop.exercises.reveal`). In a notebook they show as HTML; as text anywhere else.
"""

from __future__ import annotations

import functools
import html
import inspect
import re
import textwrap
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class CheckResult:
    """The verdict of a checker; in a notebook its message, as HTML that wraps by word.

    warnings: things that pass every check here but would not be safe everywhere (for example
    a value that is defined on this machine's backend and undefined on a GPU).
    notes: about the kit rather than the code (say, that your code could not be saved for notebook 03).
    launch: your launch, drawn (has ``figure``, ``text()`` and ``html()``); reveal: the PR's fix
    beside your code (``text()`` and ``html()``). Either may be None.
    """

    exercise: str
    solved: bool
    message: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    launch: Any = None
    reveal: Any = None

    @property
    def figure(self):
        """The figure of your launch (a matplotlib Figure), or None."""
        return None if self.launch is None else self.launch.figure

    def verdict(self) -> str:
        """The verdict, its warnings and notes: the result without what it shows below."""
        return "\n".join([self.message] + [f"Warning: {w}" for w in self.warnings] + self.notes)

    def _shown(self) -> list:
        return [part for part in (self.launch, self.reveal) if part is not None]

    def __repr__(self) -> str:
        return "\n\n".join([self.verdict()] + [part.text() for part in self._shown()])

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return "".join([verdict_html(self.verdict(), self.solved)] + [part.html() for part in self._shown()])

    def __bool__(self) -> bool:
        return self.solved


# A verdict wraps at spaces, never inside a word (a notebook's plain-text output may break anywhere),
# keeps its line breaks, and shows `code` as code. The left border says solved (green) or not (amber).
_VERDICT_STYLE = ("white-space:pre-wrap;word-break:normal;overflow-wrap:break-word;max-width:56em;"
                  "line-height:1.45;padding:0.3em 0.8em;border-left:4px solid {}")
_SOLVED_BORDER, _NOT_YET_BORDER = "#1a9850", "#e08214"
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def verdict_html(text: str, solved: bool) -> str:
    """A checker's verdict as HTML that wraps by word (plain text stays the fallback: nbval compares it)."""
    escaped = _CODE_SPAN.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text, quote=False))
    style = _VERDICT_STYLE.format(_SOLVED_BORDER if solved else _NOT_YET_BORDER)
    return f'<div class="labkit-verdict" style="{style}">{escaped}</div>'


class Shown:
    """Something a notebook shows as HTML (``html()``) and a terminal as text (``text()``)."""

    def text(self) -> str:
        raise NotImplementedError

    def html(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()


@dataclass
class Text:
    """A message that shows as itself in a notebook (no quotes, no escapes)."""

    text: str

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def solved(ex: str, text: str, warnings: list[str] | None = None) -> CheckResult:
    return CheckResult(ex, True, f"Exercise ({ex}) solved. {text}", list(warnings or []))


def not_yet(ex: str, text: str) -> CheckResult:
    return CheckResult(ex, False, f"Exercise ({ex}) not solved yet: {text}")


class LearnerRaised(Exception):
    """Wraps an exception raised inside the learner's function, to tell it from the kit's own."""

    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


def call_learner(fn: Callable, *args):
    """Call the learner's function; whatever it raises comes out as :class:`LearnerRaised`."""
    try:
        return fn(*args)
    except Exception as err:  # any learner error is explained, not raised
        raise LearnerRaised(err) from err


def resolve(ex: str, obj: Any, *names: str) -> tuple[Callable | None, str, CheckResult | None]:
    """The learner's function: `obj` itself, or the first of `names` found in a namespace (``globals()``)."""
    name = names[0]
    if isinstance(obj, dict):
        found = [n for n in names if obj.get(n) is not None]
        name = found[0] if found else name
        obj = obj.get(name)
    elif obj is not None:
        name = getattr(python_function(obj), "__name__", name)
    if obj is None:
        return None, name, not_yet(ex, f"`{name}` is not defined yet. Run the cell that defines it (if it "
                                       "raised an error, fix that first), then run this checker again.")
    if not callable(obj):
        return None, name, not_yet(ex, f"`{name}` should be a function, but it is a {type(obj).__name__}.")
    return obj, name, None


def is_triton_kernel(fn) -> bool:
    """Whether `fn` is a @triton.jit function (JITFunction or InterpretedFunction): launched as fn[grid](...)."""
    return hasattr(fn, "__getitem__") and hasattr(fn, "fn")


def python_function(fn: Callable) -> types.FunctionType | None:
    """The plain Python function behind `fn` (a Triton kernel keeps it in `.fn`)."""
    inner = getattr(fn, "fn", fn)
    return inner if isinstance(inner, types.FunctionType) else None


def fmt(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def join(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def explain_exception(exc: BaseException, fn: Callable, name: str) -> str:
    """One paragraph about an exception that came out of the learner's code."""
    chain, seen = [], exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    chain = [e for e in chain if not isinstance(e, LearnerRaised)] or chain
    root = chain[-1]
    text = (str(root).strip().splitlines() or [""])[0][:300]
    py = python_function(fn)
    where = ""
    if py is not None:
        where = _traceback_line(chain, py, name) or _compile_error_line(chain, py, name)
    return f"`{name}` raised {type(root).__name__}{where}: {text}.{_advice(root, text.lower(), fn)}"


def _traceback_line(chain: list, py: types.FunctionType, name: str) -> str:
    code = py.__code__
    for err in chain:
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == code.co_filename
                  and f.lineno is not None and f.lineno >= code.co_firstlineno]
        if frames:
            frame = frames[-1]
            where = f" at line {frame.lineno - code.co_firstlineno + 1} of `{name}`"
            return where + (f" (`{frame.line.strip()}`)" if frame.line else "")
    return ""


def _compile_error_line(chain: list, py: types.FunctionType, name: str) -> str:
    """Where a compiled Triton kernel failed: CompilationError carries the AST node, whose line
    counts from the `def` (Triton drops the decorators); count from the decorator like a cell does."""
    node = next((getattr(e, "node", None) for e in chain if getattr(e, "node", None) is not None), None)
    lineno = getattr(node, "lineno", None)
    if not lineno:
        return ""
    try:
        lines = inspect.getsource(py).splitlines()
    except (OSError, TypeError):
        return ""
    def_index = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)
    index = def_index + lineno - 1
    if not 0 <= index < len(lines):
        return ""
    return f" at line {index + 1} of `{name}` (`{lines[index].strip()}`)"


# The names each kind of exercise function may use besides its own arguments (what 07's first cell imports).
_NAMES_AT_HAND = {
    "kernel": "Kernels may use `tl`, `row_key` and `uniform` (the first cell of the notebook imports them)",
    "torch": "The torch version may use `torch`, `gumbel_torch` and `row_key_torch` (the first cell of the "
             "notebook imports them)",
    "host": "Host code may use `torch` (the first cell of the notebook imports it)",
}


def _advice(root: BaseException, lowered: str, fn: Callable | None = None) -> str:
    if "mask has unsupported dtype" in lowered:
        # Worded without the exercise's answer: this advice shows while exercise (b) is unsolved.
        return (" Some Triton interpreters refuse a condition built as `block_condition & scalar_condition` when "
                "the scalar came from tl.load: broadcast the scalar to the block's shape before combining.")
    if isinstance(root, NameError):
        kind = "kernel" if fn is not None and is_triton_kernel(fn) else \
            "torch" if getattr(python_function(fn) if fn is not None else None, "__name__", "") == "gumbel_rows" \
            else "host"
        return f" A name your code uses is not defined. {_NAMES_AT_HAND[kind]} and their own arguments."
    if isinstance(root, (IndexError, RuntimeError)) and ("size" in lowered or "shape" in lowered):
        return " Check the sizes of what you assign: the right side must fit the slice on the left."
    if isinstance(root, TypeError):
        return " Check the arguments: the checker calls your function with the signature given in the exercise."
    return ""


def unexpected(ex: str, err: BaseException) -> CheckResult:
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return not_yet(ex, f"the kit stopped with {type(err).__name__}: {first}. If nothing in your code "
                       "explains it, tell the instructor (it may be the kit's own fault).")


def never_raises(ex: str):
    """A checker answers in words: whatever goes wrong inside it becomes a 'not solved yet'."""

    def decorate(check):
        @functools.wraps(check)
        def wrapper(*args, **kwargs):
            try:
                return check(*args, **kwargs)
            except Exception as err:  # a checker reports, it never raises
                return unexpected(ex, err)

        return wrapper

    return decorate


def learner_source(fn: Callable) -> str | None:
    """The source of the learner's function (a kernel's Python function); None where it cannot be read.

    Functions defined in a notebook cell are found through IPython's cache of cell sources.
    """
    try:
        return textwrap.dedent(inspect.getsource(python_function(fn) or fn))
    except (OSError, TypeError):
        src = getattr(fn, "src", None)  # a Triton kernel keeps the text it was compiled from
        return textwrap.dedent(src) if isinstance(src, str) else None
