"""Does the student edition keep its secret? What a learner sees before each exercise, and the answers in it.

A learner follows the student path (:data:`STUDENT_PATH`): the bug in 00-02, the exercises of 07,
then the PR's fix in 03 and the rest. Until they solve an exercise, nothing they can see may show
its answer: not a cell's source, not an output (text, HTML, an error), not the text drawn in a
figure, not a widget's label, not what ``?`` and Tab show of the kit's modules a notebook imports
from, and not the cells of 07 after the exercise (a learner reads ahead). :func:`find_leaks` scans
a set of notebooks (the student edition, built, and optionally executed) for the answers' patterns
(each exercise's record, :mod:`labkit.workshop.exercises.record`) along that path, on the text as
written and on the text with its markup, line breaks and sentence punctuation taken out
(:func:`normalised`).

A learner who explores reaches more than the notebooks import: Tab offers every module of the
kit, and ``?`` shows each one's names, docstrings, signatures and reprs
(:mod:`labkit.workshop.editions.help_text`). :func:`find_package_leaks` reads all of that, for the
whole package, with the patterns each exercise's record holds for the kit's reference
(:meth:`~labkit.workshop.exercises.record.Exercise.patterns`, ``in_help``): nothing there may state
part of any answer, since a learner can read it before the first exercise.

The cases of notebook 09 keep theirs the same way: each case's answer (its record,
:mod:`labkit.family.record`) must not show anywhere on the path before the case's "predict, then
run" cell, the case book's own cells before it included (:func:`find_case_leaks`).

Figures are pictures, so their text is captured while they are drawn: run
:func:`capture_figure_text` first in the kernel that executes the notebooks, and every figure drawn
by a cell leaves one ``labkit-figure-text:`` line (JSON: its texts, their sizes, its width) in that
cell's output, which :func:`seen_in_cell` reads back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from labkit.family import record as case_record
from labkit.workshop.editions.help_text import INSPECT_MARKER, labkit_imports, module_help, package_help
from labkit.workshop.exercises import record

# The order a learner opens the notebooks in. The instructor edition is read in file order
# (00-08: the fix in 03 before the exercises of 07); the student edition moves the exercises up,
# so that each comes before the notebook that shows its answer.
STUDENT_PATH = (
    "00_setup_and_tour.ipynb",
    "01_reproduce_the_gibberish.ipynb",
    "02_see_the_stale_idx_mapping.ipynb",
    "07_exercises.ipynb",
    "03_the_fix.ipynb",
    "04_timing.ipynb",
    "05_sibling_bugs.ipynb",
    "06_audit_and_distribution.ipynb",
    case_record.NOTEBOOK,
    "08_appendix_kernel_engineering.ipynb",
)

# Each exercise starts at its task cell in notebook 07, and what gives its answer away is its record's
# (labkit.workshop.exercises.record): broad on purpose, since a false alarm costs a rephrased sentence
# and a miss costs a room its exercise. Each case of the case book starts at its predict cell.
EXERCISE_NOTEBOOK = record.NOTEBOOK
CASE_NOTEBOOK = case_record.NOTEBOOK

FIGURE_TEXT_MARKER = "labkit-figure-text: "
# A doc a notebook links to or names (``docs/MECHANICS.md``): the learner may open it from there.
DOC_REFERENCE = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)\b")
# The README's spoiler section: a collapsed <details> block whose summary says "spoiler".
SPOILER_BLOCK = re.compile(r"<details>\s*<summary>[^<]*spoiler[^<]*</summary>.*?</details>", re.IGNORECASE | re.DOTALL)
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
_WIDGET_TEXT_KEYS = ("description", "_options_labels", "placeholder", "tooltip", "_titles", "children_titles")
_WIDGET_VALUE_MODELS = ("HTMLModel", "HTMLMathModel", "LabelModel", "TextModel", "TextareaModel")


@dataclass(frozen=True)
class Seen:
    """One piece of text a learner sees: where it is, and what it says."""

    notebook: str
    cell: int
    cell_id: str
    where: str  # "source", "output text/plain", "figure text", "widget label", "error", ...
    text: str

    def place(self) -> str:
        if self.cell < 0:  # what `?` shows of the package, reachable from any cell
            return f"{self.notebook}: {self.where}"
        return f"{self.notebook} cell {self.cell} ({self.cell_id}), {self.where}"


@dataclass(frozen=True)
class Leak:
    exercise: str  # an exercise's letter, or a case's name ("case 3")
    found: str  # the matched text
    seen: Seen
    in_task: bool = False  # in the exercise's own task or skeleton, not before it

    def __str__(self) -> str:
        if self.exercise.startswith("case"):
            return (f"{self.seen.place()}: shows {self.found!r}, part of {self.exercise}'s answer, before its "
                    "predict cell asks for it")
        when = "in the exercise's own task" if self.in_task else "before the learner solves that exercise"
        return f"{self.seen.place()}: shows {self.found!r}, part of exercise ({self.exercise})'s answer, {when}"


def seen_in_cell(cell, notebook: str, index: int, widget_state: Mapping | None = None) -> list[Seen]:
    """Everything a learner sees of one cell: its source, and each of its outputs as text."""
    def seen(where: str, text: str) -> Seen:
        return Seen(notebook, index, str(cell.get("id", "?")), where, text)

    found = [seen("source", _joined(cell.get("source", "")))]
    for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
        kind = output.get("output_type")
        if kind == "stream":
            found += [seen(where, text) for where, text in _stream_pieces(_joined(output.get("text", "")))]
        elif kind == "error":
            found.append(seen("error", "\n".join([output.get("ename", ""), output.get("evalue", ""),
                                                   *output.get("traceback", [])])))
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/"):
                found.append(seen(f"output {mime}", _joined(value)))
            elif mime == WIDGET_MIME and widget_state is not None:
                found += [seen("widget label", text) for text in widget_texts(widget_state, value.get("model_id"))]
    return found


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _stream_pieces(text: str) -> Iterator[tuple[str, str]]:
    """A stream's own lines as output, and each captured figure's texts as figure text."""
    plain = []
    for line in text.splitlines():
        if line.startswith(FIGURE_TEXT_MARKER):
            yield "figure text", "\n".join(t["text"] for t in json.loads(line[len(FIGURE_TEXT_MARKER):])["texts"])
        elif line.startswith(INSPECT_MARKER):
            seen = json.loads(line[len(INSPECT_MARKER):])
            for what in ("doc", "signature", "repr"):
                if seen.get(what):
                    yield f"{what} of {seen['name']}", seen[what]
        else:
            plain.append(line)
    yield "output stream", "\n".join(plain)


def widget_texts(widget_state: Mapping, model_id: str | None) -> list[str]:
    """The labels of a widget and of every widget inside it, from a notebook's saved widget state."""
    states = widget_state.get("state", widget_state)
    texts, todo, done = [], [model_id], set()
    while todo:
        current = todo.pop()
        if current in done or current not in states:
            continue
        done.add(current)
        model = states[current]
        state = model.get("state", {})
        for key in _WIDGET_TEXT_KEYS:
            value = state.get(key)
            texts += [str(v) for v in value] if isinstance(value, (list, tuple)) else [value] if value else []
        if model.get("model_name") in _WIDGET_VALUE_MODELS and state.get("value"):
            texts.append(str(state["value"]))
        for value in state.values():  # children, and other widgets referenced by id
            for ref in value if isinstance(value, list) else [value]:
                if isinstance(ref, str) and ref.startswith("IPY_MODEL_"):
                    todo.append(ref[len("IPY_MODEL_"):])
    return [t for t in texts if isinstance(t, str) and t.strip()]


def saved_widget_state(nb) -> Mapping | None:
    return nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE_MIME)


def before_each_exercise(notebooks: Mapping[str, object], docs: Mapping[str, str] | None = None,
                         help: bool = True) -> dict[str, list[Seen]]:
    """Per exercise: everything on the student path a learner can see before solving it: all before
    its task cell, and all of notebook 07 after its own task and skeleton (the learner reads ahead).
    Notebooks by file name; `docs`: the text of each doc by file name, read where a cell links to or
    names it; `help`: what ``?`` and Tab show of each module of the kit a cell imports from."""
    path = _path_with_exercises(notebooks, docs, help)
    return {x: seen[:start] + seen[end:] for x, (seen, start, end) in path.items()}


def each_exercise_itself(notebooks: Mapping[str, object], docs: Mapping[str, str] | None = None,
                         help: bool = True) -> dict[str, list[Seen]]:
    """Per exercise: its task cell and what follows up to its first checker (the skeleton the learner edits)."""
    return {x: seen[start:end] for x, (seen, start, end) in _path_with_exercises(notebooks, docs, help).items()}


def docs_named(text: str) -> list[str]:
    """The docs (file names under docs/) that `text` links to or names."""
    return list(dict.fromkeys(DOC_REFERENCE.findall(text)))


def outside_spoilers(markdown: str) -> str:
    """A README without its spoiler section(s): what a learner reads of it."""
    return SPOILER_BLOCK.sub("", markdown)


def spoilers(markdown: str) -> list[str]:
    return SPOILER_BLOCK.findall(markdown)


def _with_docs(pieces: list[Seen], docs: Mapping[str, str] | None, opened: set[str]) -> list[Seen]:
    """A cell's pieces, followed by each doc its source names that the learner has not opened yet."""
    if docs is None:
        return pieces
    found = list(pieces)
    for piece in pieces:
        if piece.where != "source":
            continue
        for name in docs_named(piece.text):
            if name not in opened:
                opened.add(name)
                found.append(Seen(piece.notebook, piece.cell, piece.cell_id, f"doc docs/{name}",
                                  docs.get(name, f"(docs/{name} is named here but missing)")))
    return found


def _walk(notebooks: Mapping[str, object], docs: Mapping[str, str] | None, help: bool, last: str,
          marks: Mapping[str, str]) -> tuple[list[Seen], dict[str, int], list[int]]:
    """Everything on the student path up to notebook `last`, in reading order; where each cell of
    `marks` (``{cell id: its notebook}``) starts in it; and where each
    checker cell of the exercises' notebook starts."""
    missing = [name for name in STUDENT_PATH[:STUDENT_PATH.index(last) + 1] if name not in notebooks]
    if missing:
        raise ValueError(f"the student path needs {', '.join(missing)}, which the given notebooks lack")
    seen: list[Seen] = []
    starts: dict[str, int] = {}
    checkers: list[int] = []
    opened: set[str] = set()
    helped: set[str] = set()
    for name in STUDENT_PATH:
        nb = notebooks.get(name)
        if nb is None:
            continue
        state = saved_widget_state(nb)
        for index, cell in enumerate(nb["cells"]):
            if marks.get(cell.get("id")) == name:
                starts[cell.get("id")] = len(seen)
            if name == EXERCISE_NOTEBOOK and "checker" in cell.get("metadata", {}).get("tags", []):
                checkers.append(len(seen))
            pieces = _with_docs(seen_in_cell(cell, name, index, state), docs, opened)
            if help and cell.get("cell_type") == "code":
                pieces += _with_help(pieces[0], helped)
            seen += pieces
        if name == last:
            break
    return seen, starts, checkers


def _path_with_exercises(notebooks: Mapping[str, object], docs: Mapping[str, str] | None = None,
                         help: bool = True) -> dict[str, tuple[list[Seen], int, int]]:
    task_cells = {x.task_cell: x.letter for x in record.EXERCISES}
    seen, starts, checkers = _walk(notebooks, docs, help, EXERCISE_NOTEBOOK,
                                   {cell: EXERCISE_NOTEBOOK for cell in task_cells})
    absent = [cell for cell, x in task_cells.items() if cell not in starts]
    if absent:
        raise ValueError(f"{EXERCISE_NOTEBOOK} has no task cell {', '.join(absent)} (exercise(s) "
                         f"{', '.join(task_cells[c] for c in absent)})")
    # An exercise's own part ends at the first checker after its task cell.
    ends = {x: next((c for c in checkers if c >= starts[cell]), len(seen)) for cell, x in task_cells.items()}
    return {x: (seen, starts[cell], ends[x]) for cell, x in task_cells.items()}


def before_each_case(notebooks: Mapping[str, object], docs: Mapping[str, str] | None = None,
                     help: bool = True) -> dict[str, list[Seen]]:
    """Per case of the case book (by name, "case 3"): everything on the student path a learner can
    see before its predict cell: the notebooks before the case book, and the case book's cells above
    that cell (with the docs they name, and with `help`, what ``?`` and Tab show of the kit's modules
    they import from)."""
    predict = {c.predict_cell: c for c in case_record.CASES}
    seen, starts, _ = _walk(notebooks, docs, help, CASE_NOTEBOOK, {cell: CASE_NOTEBOOK for cell in predict})
    absent = [cell for cell in predict if cell not in starts]
    if absent:
        raise ValueError(f"{CASE_NOTEBOOK} has no predict cell {', '.join(absent)}")
    return {c.name: seen[:starts[cell]] for cell, c in predict.items()}


def find_case_leaks(notebooks: Mapping[str, object], docs: Mapping[str, str] | None = None, help: bool = True
                    ) -> list[Leak]:
    """Every place on the student path that shows a case's answer before its predict cell asks for it."""
    leaks = []
    for case in case_record.CASES:
        for piece in before_each_case(notebooks, docs, help)[case.name]:
            leaks += [Leak(case.name, found, piece) for found in answers_in(piece.text, case)]
    unique = {(leak.exercise, leak.seen.notebook, leak.seen.cell, leak.seen.where): leak for leak in leaks}
    return list(unique.values())


# --- what `?` and Tab show of the kit's modules a cell imports from ------------------------------

def _with_help(source: Seen, helped: set[str]) -> list[Seen]:
    """What ``?`` and Tab show of each module of the kit that `source` (a code cell) imports from,
    the first time the path imports it."""
    found = []
    for name in labkit_imports(source.text):
        if name in helped:
            continue
        helped.add(name)
        found += [Seen(source.notebook, source.cell, source.cell_id, where, text) for where, text in module_help(name)]
    return found


# Markup a learner does not read as text: code spans, emphasis, HTML tags and entities.
_MARKUP = re.compile(r"`+|\*\*|</?[A-Za-z][^>]*>|&[a-z]+;|&#x?[0-9a-f]+;", re.IGNORECASE)
# Punctuation that ends a sentence or a clause: a mark followed by a space or the end of the text.
_CLAUSE_END = re.compile(r"[.,;:!?](?=\s|$)")


def normalised(text: str) -> str:
    """`text` as a reader takes it in: markup dropped, sentence punctuation and the underscores of a
    name made spaces, every run of spaces and line breaks one space. ``padded rows with\n`0`.``
    reads "padded rows with 0 ", and ``mask_kernel`` "mask kernel"."""
    text = _MARKUP.sub("", text)
    text = _CLAUSE_END.sub(" ", text).replace("_", " ")
    return re.sub(r"\s+", " ", text)


def answers_in(text: str, exercise, in_task: bool = False, in_help: bool = False) -> list[str]:
    """The pieces of `text` that give away (part of) `exercise`'s answer (`in_task`: the narrower
    patterns an exercise's own task and skeleton are held to; `in_help`: those the kit's reference is
    held to), on the text as written and normalised.
    `exercise`: an exercise's letter, or a case (:class:`labkit.family.record.Case`)."""
    secret = exercise if hasattr(exercise, "patterns") else record.exercise(exercise)
    patterns = secret.patterns(in_task, in_help=True) if in_help else secret.patterns(in_task)
    flat = normalised(text)
    found = [m.group(0) for pattern in patterns for m in re.finditer(pattern, text, re.IGNORECASE)]
    return found + [m.group(0) for pattern in patterns for m in re.finditer(pattern, flat, re.IGNORECASE)
                    if m.group(0) not in found]


def find_leaks(notebooks: Mapping[str, object], docs: Mapping[str, str] | None = None, help: bool = True
               ) -> list[Leak]:
    """Every place on the student path that shows an exercise's answer before the learner solves it,
    or in the exercise's own task and skeleton (with `docs`: in the docs the path links to, too;
    with `help`: in what ``?`` and Tab show of the modules the path imports from)."""
    leaks = []
    for exercise, seen in before_each_exercise(notebooks, docs, help).items():
        for piece in seen:
            leaks += [Leak(exercise, found, piece) for found in answers_in(piece.text, exercise)]
    for exercise, seen in each_exercise_itself(notebooks, docs, help).items():
        for piece in seen:
            leaks += [Leak(exercise, found, piece, in_task=True)
                      for found in answers_in(piece.text, exercise, in_task=True)]
    # One leak per place and exercise is enough to read.
    unique = {(leak.exercise, leak.seen.notebook, leak.seen.cell, leak.seen.where): leak for leak in leaks}
    return list(unique.values())


# --- figures: their text, captured as they are drawn ----------------------------------------------

def figure_texts(fig) -> dict:
    """A figure's visible texts with their font sizes, and its width: what a projector shows of it."""
    from matplotlib.text import Text

    texts = [{"text": t.get_text(), "size": float(t.get_fontsize())}
             for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return {"width_in": float(fig.get_figwidth()), "texts": texts}


def capture_figure_text() -> None:
    """In a running IPython kernel: report the text of every figure a cell draws, in that cell's output.

    Every PNG a figure becomes (the inline backend's display, ``savefig`` into a widget) goes through
    ``FigureCanvasBase.print_figure``; the figure's text is noted there, and printed once the cell
    has run, so that it lands in the cell's own output.
    """
    from IPython import get_ipython
    from matplotlib.backend_bases import FigureCanvasBase

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("capture_figure_text() runs inside an IPython kernel")
    drawn: list[dict] = []
    original = FigureCanvasBase.print_figure

    def noting(canvas, *args, **kwargs):
        drawn.append(figure_texts(canvas.figure))
        return original(canvas, *args, **kwargs)

    def report(result=None):
        while drawn:
            print(FIGURE_TEXT_MARKER + json.dumps(drawn.pop(0)), flush=True)

    FigureCanvasBase.print_figure = noting
    shell.events.register("post_run_cell", report)


PACKAGE_HELP = "what ? and Tab show of the kit"


def find_package_leaks(help: list[tuple[str, str]] | None = None) -> list[Leak]:
    """Every piece of what ``?`` and Tab show anywhere in the kit (`help`: (where, text) pairs; default
    :func:`~labkit.workshop.editions.help_text.package_help`, the whole package) that states part of an
    exercise's answer. All of it is reachable before the first exercise, so each piece is held to
    every exercise's reference patterns."""
    leaks = []
    for where, text in package_help() if help is None else help:
        seen = Seen(PACKAGE_HELP, -1, "", where, text)
        for x in record.EXERCISES:
            leaks += [Leak(x.letter, found, seen) for found in answers_in(text, x, in_help=True)]
    unique = {(leak.exercise, leak.seen.where): leak for leak in leaks}
    return list(unique.values())
