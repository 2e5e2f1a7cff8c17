"""The workshop's agendas, built from measured run times and stated reading, discussion and exercise times.

An agenda is a list of :class:`Activity`: what the room does, in which notebook, and how many
minutes of reading, discussion and exercises an instructor plans for it (stated here, by
judgement). The minutes the notebook's cells take to run come from a record
(``labkit/data/cpu/notebook_times.json``, written by ``make bench-cpu ARGS="--only notebooks
--record"``): each notebook's whole run time is charged to the first activity that opens it,
which over-counts a notebook run in parts. The rendered tables (and the table of notebook times,
``agenda:times``) live in the instructor guide between ``<!-- agenda:NAME -->`` markers
(:mod:`labkit.docblocks`, which renders every such block of the docs);
``python -m labkit agenda --write`` renders them again, and a test fails when the guide and the
rendering disagree, or when an agenda leaves less than :data:`MIN_SLACK_MIN` minutes of slack.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from labkit import docblocks

RECORD = "data/cpu/notebook_times.json"
MIN_SLACK_MIN = 10


@dataclass(frozen=True)
class Activity:
    what: str
    notebook: str | None = None  # file-name prefix ("00"), None for a break
    read_min: float = 0
    discuss_min: float = 0
    exercise_min: float = 0
    break_min: float = 0


TWO_HOURS = (
    Activity("welcome; one launch by hand; **predict, then run**: the bug in one launch; the map", "00", 6, 4),
    Activity("the bench: eager vs buggy vs fixed, one side-by-side; acceptance up, quality down", "01", 5, 3),
    Activity("the timeline, ownership map, q used vs drawn, the \"your turn\" question; the explorer for 3 "
             "minutes", "02", 10, 5),
    Activity("**break**", break_min=10),
    Activity("write the fix yourself: (a) 8 min, (b) 12 min, (c) as a 3-minute discussion; each checker draws "
             "your launch", "07", 3, 0, 23),
    Activity("the PR's fix next to yours, the fix on the map, the ablation table", "03", 7, 4),
    Activity("the race on a GPU, one plot", "04", 3, 2),
    Activity("the audit of the kit's modes: the test the PR was missing", "06", 5, 3),
    Activity("capstone: your fix in the engine; wrap-up against the objectives", "07", 1, 4, 2),
)

THREE_HOURS = (
    Activity("welcome, objectives; one launch by hand; **predict, then run**; the map", "00", 8, 6),
    Activity("the bench: 50 prompts, eager vs buggy vs fixed; acceptance goes up, quality down", "01", 7, 6),
    Activity("the stale mapping: timeline, ownership map, q used vs drawn, the \"your turn\" question, the "
             "engine run, the explorer", "02", 12, 8),
    Activity("**break**", break_min=10),
    Activity("write the fix yourself: (a) 10 min, (b) 15 min, (c) 5 min as a discussion", "07", 4, 2, 30),
    Activity("the PR's fix next to yours; the fix on the map; each part alone; the ablation; why signed", "03",
             10, 5),
    Activity("what the fix costs, why graphs pad at all, the race on an H200", "04", 6, 4),
    Activity("**break**", break_min=10),
    Activity("sibling bugs (exercise (d) is done: compare); shared noise", "05", 6, 4),
    Activity("the audit (parts 1 and 2), the distribution proof (part 3, skim)", "06", 7, 4),
    Activity("capstone: your fix in the engine; wrap-up against the objectives", "07", 1, 5, 3),
)

AGENDAS = {"two-hours": (TWO_HOURS, 120), "three-hours": (THREE_HOURS, 180)}


def load_times(path: str | Path | None = None) -> dict:
    """The record of measured notebook run times (default: the one the package ships)."""
    text = Path(path).read_text() if path else resources.files("labkit").joinpath(RECORD).read_text()
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


def schedule(activities, record: dict) -> list[Slot]:
    """Clock slots: each activity's stated minutes plus the run time of its notebook, the first time it opens."""
    slots, clock, opened = [], 0, set()
    for activity in activities:
        run_s = 0.0
        if activity.notebook and activity.notebook not in opened:
            opened.add(activity.notebook)
            run_s = notebook_seconds(record, activity.notebook)
        planned = activity.read_min + activity.discuss_min + activity.exercise_min + activity.break_min
        minutes = math.ceil(planned + run_s / 60)
        slots.append(Slot(clock, minutes, activity, run_s))
        clock += minutes
    return slots


def slack_min(name: str, record: dict) -> int:
    activities, length = AGENDAS[name]
    slots = schedule(activities, record)
    return length - (slots[-1].start_min + slots[-1].minutes)


def _clock(minutes: int, start_hour: int = 9) -> str:
    return f"{start_hour + minutes // 60:02d}:{minutes % 60:02d}"


def render_times(record: dict) -> str:
    """Each notebook's measured run time, in the student path's order, with the record's provenance."""
    from labkit.workshop.secrecy import STUDENT_PATH

    rows = ["| notebook | cells run |", "| --- | --- |"]
    rows += [f"| {name.removesuffix('.ipynb')} | {record['notebooks'][name]['seconds']:.0f} s |"
             for name in STUDENT_PATH if name in record["notebooks"]]
    return "\n".join(rows) + "\n\n" + _provenance(record)


def _provenance(record: dict) -> str:
    source = record["provenance"]
    return (f"Measured {source['date']} on {source['machine']}; torch {source['torch']}, triton {source['triton']}; "
            f"`{source['command']}`.")


def render(name: str, record: dict) -> str:
    """A block of the guide: the notebook times, or an agenda as a markdown table with its slack."""
    if name == "times":
        return render_times(record)
    activities, length = AGENDAS[name]
    rows = ["| clock | what | notebook | read + discuss + exercises | cells run | slot |",
            "| --- | --- | --- | --- | --- | --- |"]
    for slot in schedule(activities, record):
        a = slot.activity
        stated = f"break {a.break_min:g} min" if a.break_min else \
            f"{a.read_min:g} + {a.discuss_min:g} + {a.exercise_min:g} min"
        ran = f"{slot.run_s:.0f} s" if slot.run_s else ""
        rows.append(f"| {_clock(slot.start_min)} | {a.what} | {a.notebook or ''} | {stated} | {ran} | "
                    f"{slot.minutes} min |")
    end = _clock(length)
    rows.append(f"| {end} | end: **{slack_min(name, record)} min of slack** in {length} min | | | | |")
    note = ("\nCells run: each notebook's whole run time under nbval, charged to the first activity that opens "
            "it; the other minutes are planned, not measured. " + _provenance(record))
    return "\n".join(rows) + "\n" + note


KIND = "agenda"
BLOCKS = ("times", *AGENDAS)


def markers(name: str) -> tuple[str, str]:
    return docblocks.markers(f"{KIND}:{name}")


def rendered_in(text: str, name: str) -> str | None:
    """The block `name` as it stands in a document between its markers (None if it has none)."""
    return docblocks.rendered_in(text, f"{KIND}:{name}")


def renderers(record: dict | None = None) -> dict:
    """``{"agenda:NAME": render}`` for every block, from `record` (default: the shipped one)."""
    def block(name):
        return lambda: render(name, record if record is not None else load_times())

    return {f"{KIND}:{name}": block(name) for name in BLOCKS}


def write_into(path: str | Path, record: dict) -> list[str]:
    """Render every block into the document at `path` between its markers; returns the names written."""
    written = docblocks.write_into(path, renderers(record))
    return [key.split(":", 1)[1] for key in written]
