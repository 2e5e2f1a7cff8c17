"""The instructor guide's agendas and notebook times are rendered from the recorded run times, and fit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.docgen import blocks
from labkit.workshop.editions import agenda
from labkit.workshop.editions.secrecy import STUDENT_PATH

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "INSTRUCTOR_GUIDE.md"


@pytest.fixture(scope="module")
def record():
    return agenda.load_times()


def test_the_record_holds_every_notebook_of_the_student_path_with_its_provenance(record):
    assert set(record["notebooks"]) == set(STUDENT_PATH)
    assert all(entry["seconds"] > 0 for entry in record["notebooks"].values())
    assert {"date", "machine", "torch", "command"} <= set(record["provenance"])


@pytest.mark.parametrize("name", agenda.BLOCKS)
def test_the_guide_shows_each_block_as_the_record_renders_it(record, name):
    shown = blocks.rendered_in(GUIDE.read_text(), f"agenda:{name}")
    assert shown is not None, f"the guide lost its <!-- agenda:{name} --> markers"
    assert shown == agenda.render(name, record), (
        f"docs/INSTRUCTOR_GUIDE.md's {name} block differs from the record: run python -m labkit agenda --write")


@pytest.mark.parametrize("name", agenda.AGENDAS)
def test_every_agenda_leaves_its_slack(record, name):
    assert agenda.slack_min(name, record) >= agenda.MIN_SLACK_MIN


def test_a_drifted_record_no_longer_matches_the_guide(record):
    drifted = copy.deepcopy(record)
    drifted["notebooks"]["07_exercises.ipynb"]["seconds"] += 120  # two minutes more for the capstone
    assert agenda.render("two-hours", drifted) != blocks.rendered_in(GUIDE.read_text(), "agenda:two-hours")
    assert agenda.slack_min("two-hours", drifted) == agenda.slack_min("two-hours", record) - 2


def test_agendas_open_the_notebooks_in_the_student_path_order():
    prefixes = [name.split("_")[0] for name in STUDENT_PATH]
    for name, (activities, _) in agenda.AGENDAS.items():
        opened = list(dict.fromkeys(a.notebook for a in activities if a.notebook))
        assert opened == [p for p in prefixes if p in opened], name


def test_each_run_time_is_charged_once(record):
    slots = agenda.schedule(agenda.TWO_HOURS, record)
    charged = [slot.activity.notebook for slot in slots if slot.run_s]
    assert len(charged) == len(set(charged)) and "07" in charged
    capstone = slots[-1]
    assert capstone.activity.notebook == "07" and capstone.run_s == 0


def test_the_cli_writes_the_blocks_into_a_document(tmp_path, record, capsys):
    doc = tmp_path / "guide.md"
    begin, end = blocks.markers("agenda:two-hours")
    doc.write_text(f"# guide\n\n{begin}\nold\n{end}\n\nafter\n")
    assert main(["agenda", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert blocks.rendered_in(text, "agenda:two-hours") == agenda.render("two-hours", record)
    assert text.startswith("# guide\n") and text.endswith("\nafter\n")
    (tmp_path / "plain.md").write_text("no markers here\n")
    assert main(["agenda", "--write", str(tmp_path / "plain.md")]) == 2
    assert "no <!-- agenda:NAME --> markers" in capsys.readouterr().err


# --- built from the guide's own minimums -------------------------------------------------------------

def test_every_slot_is_its_minimums_recomputed_from_the_tables_the_guide_renders(record):
    minimums = blocks.rendered_in(GUIDE.read_text(), "agenda:minimums")
    assert minimums == agenda.render_minimums()
    for name, (activities, _) in agenda.AGENDAS.items():
        opened = set()
        for slot in agenda.schedule(activities, record):
            a = slot.activity
            first = a.notebook is not None and a.notebook not in opened
            opened.add(a.notebook)
            read = -(-agenda.reading_words(a.notebook) // agenda.READING_WPM) if first else 0
            discuss = agenda.MIN_DISCUSS[a.notebook] if first else 0
            work = sum(agenda.exercise_minutes()[x] for x in a.exercises)
            assert (slot.read_min, slot.discuss_min, slot.exercise_min) == (read, discuss, work), (name, a.what)
            run = agenda.notebook_seconds(record, a.notebook) if first else 0
            assert slot.minutes == -(-(read + discuss + work + a.break_min + run / 60) // 1), (name, a.what)


def test_reading_counts_the_mask_sheet_07_links_and_no_solution():
    import json

    nb = json.loads(next(agenda.NOTEBOOKS.glob("07_*.ipynb")).read_text())
    solutions = sum(len("".join(c["source"]).split()) for c in nb["cells"]
                    if c["cell_type"] == "markdown" and "solution" in c["metadata"].get("tags", []))
    prose = sum(len("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    sheet = len((agenda.DOCS / "TRITON_MASKS.md").read_text().split())
    assert solutions > 0 and agenda.reading_words("07") == prose - solutions + sheet


def test_every_agenda_has_a_break_and_the_two_hour_one_is_the_three_hour_one_cut_as_it_says(record):
    for activities, _ in agenda.AGENDAS.values():
        assert any(a.break_min >= 10 for a in activities)
    assert agenda.TWO_HOURS == tuple(a for a in agenda.THREE_HOURS if a.name not in agenda.TWO_HOUR_CUT)
    assert set(agenda.TWO_HOUR_CUT) <= {a.name for a in agenda.THREE_HOURS}
    shown = agenda.render("two-hours", record)
    for a in agenda.THREE_HOURS:
        if a.name in agenda.TWO_HOUR_CUT:
            assert (a.what if a.notebook else f"the {a.name}") in shown.split("Dropped from", 1)[1], a.name


def test_each_exercise_is_scheduled_wherever_its_notebook_is_and_optional_where_it_is_not(record):
    from labkit.workshop.exercises.record import EXERCISES

    assert EXERCISES
    for exercise in EXERCISES:
        for name, (activities, _) in agenda.AGENDAS.items():
            with_slot = [a for a in activities if a.notebook == exercise.agenda_notebook and a.does_exercises]
            scheduled = any(exercise.letter in a.exercises for a in activities)
            assert bool(with_slot) == scheduled, (name, exercise.letter)
            if not with_slot:
                shown = agenda.render(name, record)
                assert f"({exercise.letter})" in shown and "optional" in shown, (name, exercise.letter)
    assert "capstone" in {x for a in agenda.TWO_HOURS for x in a.exercises}


def _script_of(notebook: str) -> str:
    """Section 6's paragraphs about `notebook` (they start with **NN, ...** or **NN**)."""
    section = GUIDE.read_text().split("## 6. What to say at each figure", 1)[1].split("\n## 7.", 1)[0]
    paragraphs = section.split("\n\n")
    return "\n\n".join(p for p in paragraphs if p.lstrip().startswith(f"**{notebook}"))


def test_the_instructors_script_before_07_reveals_nothing_and_names_only_widgets_there_are():
    from labkit.workshop.editions.secrecy import answers_in
    from labkit.workshop.exercises.record import letters

    for notebook in ("00", "01", "02"):
        script = _script_of(notebook)
        assert script, notebook
        found = {x: answers_in(script, x) for x in letters()}
        assert not any(found.values()), (notebook, found)
    # 02's explorer has no switches; 03's (FixExplorer) has one per part.
    import json

    def explorer_calls(prefix):
        nb = json.loads(next(agenda.NOTEBOOKS.glob(f"{prefix}_*.ipynb")).read_text())
        return [line for c in nb["cells"] if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()
                if "Explorer(" in line]

    assert explorer_calls("02") and not any("FixExplorer(" in line for line in explorer_calls("02"))
    assert not any(word in _script_of("02").lower() for word in ("toggle", "switch"))
    assert any("FixExplorer(" in line for line in explorer_calls("03")) and "toggle" in _script_of("03")


# --- the optional block: off the clock, planned at its minimums -------------------------------------------

def test_each_optional_block_fits_its_stated_length_and_is_offered_in_every_agenda(record):
    slots = agenda.optional_slots(record)
    assert slots and [s.activity for s in slots] == list(agenda.OPTIONAL)
    for slot in slots:
        a = slot.activity
        read = -(-agenda.reading_words(a.notebook) // agenda.READING_WPM)
        run = agenda.notebook_seconds(record, a.notebook)
        assert (slot.read_min, slot.discuss_min) == (read, agenda.MIN_DISCUSS[a.notebook])
        assert slot.minutes == -(-(read + slot.discuss_min + run / 60) // 1) <= agenda.OPTIONAL_BLOCK_MIN
        for name in agenda.AGENDAS:
            shown = agenda.render(name, record)
            assert f"Optional, off the clock ({agenda.OPTIONAL_BLOCK_MIN} min at most): {a.notebook}, {a.what}" in shown
            assert f"{slot.minutes} min in all" in shown
    # Off the clock: the agendas' slots and slack are what they were without it.
    for activities, _ in agenda.AGENDAS.values():
        assert all(slot.activity not in agenda.OPTIONAL for slot in agenda.schedule(activities, record))


def test_the_optional_block_is_offered_in_the_slack_only_where_it_fits(record):
    (slot,) = agenda.optional_slots(record)
    three = agenda.render("three-hours", record)
    fits = slot.minutes <= agenda.slack_min("three-hours", record)
    assert ("a room on time takes it before the capstone" in three) == fits
    assert "take-home" in agenda.render("two-hours", record)
    squeezed = copy.deepcopy(record)
    squeezed["notebooks"]["06_audit_and_distribution.ipynb"]["seconds"] += 60 * agenda.slack_min("three-hours", record)
    assert "take-home" in agenda.render("three-hours", squeezed).split("Optional, off the clock", 1)[1]


def test_a_new_exercise_fits_exactly_the_room_the_maintainers_guide_states(record, monkeypatch):
    import dataclasses

    from labkit.workshop.exercises import record as exercise_record

    slots = {a.notebook for activities, _ in agenda.AGENDAS.values() for a in activities if a.does_exercises}
    assert slots
    letter = chr(ord(exercise_record.EXERCISES[-1].letter) + 1)
    for notebook in sorted(slots):
        room = agenda.room_for_an_exercise(notebook, record)
        for minutes, fits in ((room, True), (room + 1, False)):
            new = dataclasses.replace(exercise_record.EXERCISES[-1], letter=letter, minutes=minutes,
                                      agenda_notebook=notebook)
            monkeypatch.setattr(exercise_record, "EXERCISES", (*exercise_record.EXERCISES, new))
            kept = min(agenda.slack_min(name, record) for name in agenda.AGENDAS)
            assert (kept >= agenda.MIN_SLACK_MIN) == fits, (notebook, minutes, kept)
            monkeypatch.undo()
    assert f"in notebook 07's slot, at most {agenda.room_for_an_exercise('07', record)} min" in " ".join(
        agenda.render_room(record).split())
