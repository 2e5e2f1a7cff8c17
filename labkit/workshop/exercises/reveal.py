"""The PR's fix beside your code: once you solve an exercise, when the instructor says so, and in notebook 03.

    ex.check_mapping(globals())   solved: the verdict shows the PR's fix beside your copy_idx_mapping
    ex.reveal("a")             the PR's fix for (a) beside your last checked code, solved or not
    ex.reveal()                every exercise
    ex.compare("a")            the same call, for notebook 03 (the student opens it after 07)

Every check keeps the source of the function it judged (:mod:`labkit.workshop.exercises.kept_code`:
``my_answers/<exercise>.py``, or $LABKIT_ANSWERS), so the comparison works in any notebook run
from the same folder, and after a restart. In a notebook the two sides stand in two columns; as text,
one above the other.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass

from labkit.workshop.exercises import record
from labkit.workshop.exercises.kept_code import Answer, keep, saved_answer, variant_of
from labkit.workshop.exercises.kit_code import FixSource, pr_fix
from labkit.workshop.exercises.starting_code import not_attempted_message, starting_code_of
from labkit.workshop.feedback import CheckResult, Shown, Text, learner_source, resolve
from labkit.workshop.harness.launches import triton_kernels_run

_CELL = "padding:4px 8px;vertical-align:top;text-align:left;border-top:1px solid #ddd;width:50%"
# Code wraps at spaces rather than scroll: the fix's lines show whole at a notebook's default width.
_CODE = "font-family:monospace;font-size:90%;white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere;margin:0"
_MARKED = "background:#e5f5e0"


@dataclass(repr=False)
class Reveal(Shown):
    """The PR's fix for one exercise beside the learner's code (None: none checked yet)."""

    fix: FixSource
    yours: Answer | None
    solved_now: bool = False  # shown under a verdict of "solved": no need to repeat it

    def heading(self) -> str:
        topic = record.exercise(self.fix.exercise).topic
        return f"Exercise ({self.fix.exercise}), {topic}: the PR's fix beside your code"

    def your_title(self) -> str:
        if self.yours is None:
            return "Your code"
        when = "" if self.solved_now else f" (last checked: {self.yours.verdict})"
        return f"Your {self.yours.name}{when}"

    def your_text(self) -> str:
        if self.yours is None:
            return f"Run exercise ({self.fix.exercise})'s checker in notebook 07 to see yours here."
        return self.yours.source or ("(The source of your function could not be read: define it in a notebook "
                                     "cell or a file to see it here.)")

    def upstream(self) -> str:
        return f"In vLLM: {record.exercise(self.fix.exercise).upstream}."

    def text(self) -> str:
        return (f"{self.heading()}\n-- The PR's fix ({self.fix.where}); '>' marks the lines of the fix:\n"
                f"{self.fix.text}\n-- {self.your_title()}:\n{self.your_text().rstrip()}\n{self.upstream()}")

    def html(self) -> str:
        head = (f'<tr><th style="{_CELL}">The PR\'s fix<br><small>{html.escape(self.fix.where)}</small></th>'
                f'<th style="{_CELL}">{html.escape(self.your_title())}</th></tr>')
        mine = (f'<pre style="{_CODE}">{html.escape(self.your_text())}</pre>' if self.yours is not None
                and self.yours.source else f"<p>{html.escape(self.your_text())}</p>")
        body = f'<tr><td style="{_CELL}">{_marked_code(self.fix.text)}</td><td style="{_CELL}">{mine}</td></tr>'
        return (f'<div style="margin-top:10px"><b>{html.escape(self.heading())}</b>'
                f'<table style="border-collapse:collapse;width:100%;table-layout:fixed">{head}{body}</table>'
                f'<small>{html.escape(self.upstream())}</small></div>')


def _marked_code(text: str) -> str:
    """Numbered source lines as HTML, the fix's lines (marked '>') shaded."""
    lines = [f'<span style="{_MARKED}">{html.escape(line)}</span>' if line.startswith(">") else html.escape(line)
             for line in text.splitlines()]
    return f'<pre style="{_CODE}">' + "\n".join(lines) + "</pre>"


@dataclass(repr=False)
class Reveals(Shown):
    """Several exercises' reveals, one after the other."""

    parts: list[Reveal]

    def text(self) -> str:
        return "\n\n".join(part.text() for part in self.parts)

    def html(self) -> str:
        return "".join(part.html() for part in self.parts)


def reveal(exercise=None) -> Reveal | Reveals | Text:
    """The PR's fix for `exercise` (a letter; None: every exercise) beside the learner's last checked code.

    Works whether or not the exercise is solved. The learner's code is what the last check of it
    kept on disk; where there is none, a one-line note says how to see it here.
    """
    if exercise is None:
        return Reveals([reveal(x) for x in record.letters()])
    found = record.exercise(exercise)
    if found is None:
        return Text(f"There is no exercise {exercise!r}; choose one of {record.choices()}.")
    key = found.letter
    yours = saved_answer(key)
    variant = yours.variant if yours is not None else ("triton" if triton_kernels_run() else "torch")
    return Reveal(pr_fix(key, variant), yours)


compare = reveal  # notebook 03's spelling: the PR's fix beside what you wrote in 07


def learner_names(exercise: str) -> tuple[str, ...]:
    """The names a checker looks up in a namespace: its record's functions, the version this session
    can run first."""
    found = record.exercise(exercise)
    first = "triton" if triton_kernels_run() else "torch"
    ordered = sorted(found.versions, key=lambda v: v.kind != first)
    return tuple(dict.fromkeys(v.function for v in ordered))


def keeps_answer(exercise: str):
    """Decorate the checker of `exercise`: after its verdict, keep the learner's code and, once solved,
    reveal the fix. Neither step can change the verdict: a folder that cannot be written, or a source
    that cannot be read, is a note under it.
    """

    def decorate(check):
        @functools.wraps(check)
        def checked(learner):
            fn, name, missing = resolve(exercise, learner, *learner_names(exercise))
            if missing is None and starting_code_of(fn):
                # Run All reaches every checker before the learner wrote anything: say so, show nothing.
                return CheckResult(exercise, False, not_attempted_message(exercise, name))
            result = check(learner)
            if missing is None:
                _keep_and_reveal(result, fn, name)
            return result

        return checked

    return decorate


def _keep_and_reveal(result: CheckResult, fn, name: str) -> None:
    try:
        answer = Answer(result.exercise, name, variant_of(fn), "solved" if result.solved else "not solved yet",
                        learner_source(fn))
        note = keep(answer)
        if note:
            result.notes.append(note)
        if result.solved:
            result.reveal = Reveal(pr_fix(answer.exercise, answer.variant), answer, solved_now=True)
    except Exception as err:  # the verdict stands whatever happens here
        result.notes.append(f"(The kit could not keep your code or show the PR's fix: {type(err).__name__}: {err}.)")
