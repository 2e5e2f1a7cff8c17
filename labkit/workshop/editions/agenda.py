"""The workshop's agendas, built from the guide's minimums and measured run times.

Every activity is planned at its minimum, from three tables the guide renders (``agenda:minimums``):

* reading: the words of the notebook's prose as a learner has it (the student edition: solutions
  left out) and of the docs it links to that a learner opens (07: the mask sheet), at
  :data:`READING_WPM` words a minute, counted from the notebooks themselves;
* discussion: :data:`MIN_DISCUSS` minutes per notebook (stated, by judgement);
* exercises: each exercise's minutes, from its record (:mod:`labkit.workshop.exercises.record`: the
  guide's section 7 gives the same rhythm), and :data:`CAPSTONE_MIN` for the capstone.

Each notebook's whole run time (``labkit/data/cpu/notebook_times.json``, written by ``make
bench-cpu ARGS="--only notebooks --record"``) is charged to the first activity that opens it, which
over-counts a notebook run in parts. The three-hour agenda holds everything; the two-hour agenda is
that one with the activities of :data:`TWO_HOUR_CUT` dropped, and says what they were. The
:data:`OPTIONAL` blocks are off the clock: each is planned at its minimums like any activity, must
fit in :data:`OPTIONAL_BLOCK_MIN` minutes, and is offered in the three-hour agenda's slack (a room
on time takes it there) and as take-home otherwise. The rendered
tables live in the instructor guide between ``<!-- agenda:NAME -->`` markers (:mod:`labkit.docgen.blocks`);
``make refresh`` or ``python -m labkit agenda --write`` renders them again, and a test fails when the guide
and the rendering disagree, or when an agenda leaves less than :data:`MIN_SLACK_MIN` minutes of slack.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from labkit import paths, records
from labkit.workshop.exercises import record as exercise_record

RECORD = records.CPU_NOTEBOOKS  # the notebooks' run times
MIN_SLACK_MIN = 10
READING_WPM = 200  # technical prose, read in the room (stated)
NOTEBOOKS = paths.NOTEBOOKS
DOCS = NOTEBOOKS.parent / "docs"
# Stated minutes of discussion per notebook (the first time an agenda opens it).
MIN_DISCUSS = {"00": 4, "01": 3, "02": 5, "03": 4, "04": 2, "05": 3, "06": 3, "07": 2, "09": 3}
# Stated minutes for the capstone: run, read and discussed.
CAPSTONE_MIN = 10


def exercise_minutes() -> dict[str, int]:
    """Minutes planned per exercise (by letter, from the records) and for the capstone."""
    return {**{x.letter: x.minutes for x in exercise_record.EXERCISES}, "capstone": CAPSTONE_MIN}


def _listed(exercises) -> str:
    return ", ".join(f"({x.letter})" + (f" ({x.agenda_note})" if x.agenda_note else "") for x in exercises)


@dataclass(frozen=True)
class Activity:
    what_text: str  # "{exercises}" in it: the exercises done here, as "(a), (b)"
    notebook: str | None = None  # file-name prefix ("00"), None for a break
    does_exercises: bool = False  # the exercises whose record plans them in this notebook's slot
    capstone: bool = False
    break_min: float = 0
    key: str = ""  # how a cut names it (default: the notebook, or "break")

    @property
    def name(self) -> str:
        return self.key or self.notebook or "break"

    def _exercises_here(self) -> list:
        return [x for x in exercise_record.EXERCISES if self.does_exercises and x.agenda_notebook == self.notebook]

    @property
    def exercises(self) -> tuple[str, ...]:
        """What is done here: exercise letters, and "capstone"."""
        return tuple(x.letter for x in self._exercises_here()) + (("capstone",) if self.capstone else ())

    @property
    def what(self) -> str:
        return self.what_text.format(exercises=_listed(self._exercises_here()))


THREE_HOURS = (
    Activity("welcome, objectives; one launch by hand; **predict, then run**; the map", "00"),
    Activity("the bench: 50 prompts, eager vs buggy vs fixed; acceptance goes up, quality down", "01"),
    Activity("the stale mapping: timeline, ownership map, q used vs drawn, the \"your turn\" question, the "
             "engine run, the explorer", "02"),
    Activity("**break**", break_min=10, key="first break"),
    Activity("write the fix yourself: {exercises}", "07", does_exercises=True),
    Activity("the PR's fix next to yours; the fix on the map; each part alone; the ablation; why signed", "03"),
    Activity("what the fix costs, why graphs pad at all, the race on an H200", "04"),
    Activity("**break**", break_min=10, key="second break"),
    Activity("sibling bugs: exercise {exercises}, the int32 offset, then the kit's next to yours; shared noise", "05",
             does_exercises=True),
    Activity("the audit (parts 1 and 2), the distribution proof (part 3, skim)", "06"),
    Activity("capstone: your fix in the engine; wrap-up against the objectives", "07", capstone=True,
             key="capstone"),
)
# What the two-hour agenda leaves out of the three-hour one, for take-home reading.
TWO_HOUR_CUT = ("04", "second break", "05", "06")
TWO_HOURS = tuple(a for a in THREE_HOURS if a.name not in TWO_HOUR_CUT)

AGENDAS = {"three-hours": (THREE_HOURS, 180), "two-hours": (TWO_HOURS, 120)}
# Off the clock: offered where an agenda's slack allows, else take-home (stated length, checked against
# the minimums by a test).
OPTIONAL_BLOCK_MIN = 15
OPTIONAL = (
    Activity("the family: four ways a captured graph corrupts a live request, each predicted, run and audited",
             "09"),
)


def load_times(path: str | Path | None = None) -> dict:
    """The record of measured notebook run times (default: the one the package ships)."""
    text = Path(path).read_text() if path else RECORD.read_text()
    return json.loads(text)


def notebook_seconds(record: dict, prefix: str) -> float:
    matches = [entry["seconds"] for name, entry in record["notebooks"].items() if name.startswith(prefix)]
    if len(matches) != 1:
        raise KeyError(f"the run-time record has {len(matches)} notebooks starting with {prefix!r}")
    return matches[0]


@dataclass(frozen=True)
class Slot:
    start_min: int
    minutes: int
    activity: Activity
    run_s: float
    read_min: int
    discuss_min: int
    exercise_min: int


def _words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def reading_words(prefix: str) -> int:
    """The words a learner reads in notebook `prefix`: its prose in the student edition, and the docs
    it links to that a learner's folder holds."""
    from labkit.workshop.editions.secrecy import docs_named
    from labkit.workshop.editions.student import LEARNER_DOCS, SOLUTION_TAG

    paths = sorted(NOTEBOOKS.glob(f"{prefix}_*.ipynb"))
    if len(paths) != 1:
        raise FileNotFoundError(f"the agendas count the words of notebook {prefix} in {NOTEBOOKS}: "
                                f"found {len(paths)} notebooks there")
    cells = json.loads(paths[0].read_text())["cells"]
    prose = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
             and SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])]
    linked = {doc for text in prose for doc in docs_named(text) if doc in LEARNER_DOCS}
    return sum(map(_words, prose)) + sum(_words((DOCS / doc).read_text()) for doc in sorted(linked))


def reading_min(prefix: str) -> int:
    return math.ceil(reading_words(prefix) / READING_WPM)


def schedule(activities, record: dict) -> list[Slot]:
    """Clock slots: each activity at its minimums (reading and discussion the first time it opens its
    notebook, its exercises), plus the run time of its notebook the first time it opens."""
    slots, clock, opened = [], 0, set()
    for activity in activities:
        run_s, read, discuss = 0.0, 0, 0
        if activity.notebook and activity.notebook not in opened:
            opened.add(activity.notebook)
            run_s = notebook_seconds(record, activity.notebook)
            read, discuss = reading_min(activity.notebook), MIN_DISCUSS[activity.notebook]
        exercise = sum(exercise_minutes()[x] for x in activity.exercises)
        minutes = math.ceil(read + discuss + exercise + activity.break_min + run_s / 60)
        slots.append(Slot(clock, minutes, activity, run_s, read, discuss, exercise))
        clock += minutes
    return slots


def optional_slots(record: dict) -> list[Slot]:
    """The optional blocks, each at its minimums (its notebook opened fresh), off the clock."""
    return [schedule([a], record)[0] for a in OPTIONAL]


def slack_min(name: str, record: dict) -> int:
    activities, length = AGENDAS[name]
    slots = schedule(activities, record)
    return length - (slots[-1].start_min + slots[-1].minutes)


def _clock(minutes: int, start_hour: int = 9) -> str:
    return f"{start_hour + minutes // 60:02d}:{minutes % 60:02d}"


def render_times(record: dict) -> str:
    """Each notebook's measured run time, in the student path's order, with the record's provenance."""
    from labkit.workshop.editions.secrecy import STUDENT_PATH

    rows = ["| notebook | cells run |", "| --- | --- |"]
    rows += [f"| {name.removesuffix('.ipynb')} | {record['notebooks'][name]['seconds']:.0f} s |"
             for name in STUDENT_PATH if name in record["notebooks"]]
    return "\n".join(rows) + "\n\n" + _provenance(record)


def _provenance(record: dict) -> str:
    source = record["provenance"]
    return (f"Measured {source['date']} on {source['machine']}; torch {source['torch']}, triton {source['triton']}; "
            f"`{source['command']}`.")


def render_minimums() -> str:
    """The minimums every agenda is built from, per notebook in the student path's order."""
    from labkit.workshop.editions.secrecy import STUDENT_PATH

    rows = [f"| notebook | words to read | reading at {READING_WPM} words/min | discussion | exercises |",
            "| --- | --- | --- | --- | --- |"]
    for name in STUDENT_PATH:
        prefix = name.split("_")[0]
        if prefix not in MIN_DISCUSS:
            continue
        done_here = [x for a in THREE_HOURS if a.notebook == prefix for x in a.exercises]
        minutes = exercise_minutes()
        work = ", ".join(f"({x}) {minutes[x]} min" if x != "capstone" else f"{x} {minutes[x]} min"
                         for x in done_here)
        rows.append(f"| {name.removesuffix('.ipynb')} | {reading_words(prefix):,} | {reading_min(prefix)} min | "
                    f"{MIN_DISCUSS[prefix]} min | {work} |")
    return "\n".join(rows)


def room_for_an_exercise(notebook: str, record: dict) -> int:
    """The most minutes a new exercise done in `notebook`'s slot may add (its stated minutes and the
    reading of its words together) before an agenda that schedules it keeps less than
    :data:`MIN_SLACK_MIN` minutes of slack."""
    holding = [name for name, (activities, _) in AGENDAS.items()
               if any(a.does_exercises and a.notebook == notebook for a in activities)]
    return min(slack_min(name, record) for name in holding) - MIN_SLACK_MIN


def render_room(record: dict) -> str:
    """docs/MAINTAINING.md: what the agendas leave a new exercise, in each notebook whose slot holds exercises."""
    slots = sorted({a.notebook for activities, _ in AGENDAS.values() for a in activities if a.does_exercises})
    room = "; ".join(f"in notebook {n}'s slot, at most {room_for_an_exercise(n, record)} min" for n in slots)
    text = (f"Every agenda must keep {MIN_SLACK_MIN} minutes of slack, and a new exercise adds its record's "
            f"`minutes` and the reading of its task's words ({READING_WPM} words a minute) to its slot. With the "
            f"records as they are, that leaves a new exercise {room} "
            f"(`labkit/workshop/editions/agenda.py`, `room_for_an_exercise`). More than that takes time from "
            "elsewhere: another exercise's minutes, `MIN_DISCUSS`, or an activity moved into `TWO_HOUR_CUT`; "
            "`tests/test_agenda.py` fails while an agenda keeps less.")
    return textwrap.fill(text, 100, break_long_words=False,
                         break_on_hyphens=False)


def render(name: str, record: dict) -> str:
    """A block of the guide: the notebook times, the minimums, or an agenda as a markdown table with its slack."""
    if name == "times":
        return render_times(record)
    if name == "minimums":
        return render_minimums()
    activities, length = AGENDAS[name]
    rows = ["| clock | what | notebook | read + discuss + exercises | cells run | slot |",
            "| --- | --- | --- | --- | --- | --- |"]
    for slot in schedule(activities, record):
        a = slot.activity
        stated = f"break {a.break_min:g} min" if a.break_min else \
            f"{slot.read_min} + {slot.discuss_min} + {slot.exercise_min} min"
        ran = f"{slot.run_s:.0f} s" if slot.run_s else ""
        rows.append(f"| {_clock(slot.start_min)} | {a.what} | {a.notebook or ''} | {stated} | {ran} | "
                    f"{slot.minutes} min |")
    end = _clock(length)
    slack = slack_min(name, record)
    rows.append(f"| {end} | end: **{slack} min of slack** in {length} min | | | | |")
    note = ("\nEvery slot is its activity's minimums (the table above) plus, the first time a notebook opens, "
            "its cells' whole run time under nbval; nothing else is planned. " + _provenance(record))
    for slot in optional_slots(record):
        a = slot.activity
        where = (f"a room on time takes it before the capstone, from the {slack} min of slack"
                 if activities is THREE_HOURS and slot.minutes <= slack else "take-home")
        note += (f"\n\nOptional, off the clock ({OPTIONAL_BLOCK_MIN} min at most): {a.notebook}, {a.what}: "
                 f"{slot.read_min} + {slot.discuss_min} min to read and discuss, cells run in {slot.run_s:.0f} s, "
                 f"{slot.minutes} min in all; {where}.")
    if activities is TWO_HOURS:
        dropped = [a for a in THREE_HOURS if a.name in TWO_HOUR_CUT]
        saved = sum(slot.minutes for slot in schedule(THREE_HOURS, record) if slot.activity in dropped)
        note += ("\n\nDropped from the three-hour agenda (" + f"{saved} min at their minimums), for take-home: "
                 + "; ".join(f"{a.notebook}: {a.what}" if a.notebook else f"the {a.name}" for a in dropped)
                 + "." + "".join(f" Exercise {_listed([x])} goes with {x.agenda_notebook}: in two hours it is "
                                 f"optional, and {x.compare_notebook}'s comparison of it is skipped."
                                 for x in exercise_record.EXERCISES if x.agenda_notebook in TWO_HOUR_CUT))
    return "\n".join(rows) + "\n" + note


KIND = "agenda"
BLOCKS = ("times", "minimums", *AGENDAS)  # the instructor guide's


def renderers(record: dict | None = None) -> dict:
    """``{"agenda:NAME": render}`` for every block, from `record` (default: the shipped one); the guide
    holds them between markers (:mod:`labkit.docgen.blocks` writes them)."""
    def block(name):
        return lambda: render(name, record if record is not None else load_times())

    return {**{f"{KIND}:{name}": block(name) for name in BLOCKS},
            f"{KIND}:room-for-an-exercise": lambda: render_room(record if record is not None else load_times())}
