"""The instructor guide's agendas and notebook times are rendered from the recorded run times, and fit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.workshop import agenda
from labkit.workshop.secrecy import STUDENT_PATH

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
    shown = agenda.rendered_in(GUIDE.read_text(), name)
    assert shown is not None, f"the guide lost its <!-- agenda:{name} --> markers"
    assert shown == agenda.render(name, record), (
        f"docs/INSTRUCTOR_GUIDE.md's {name} block differs from the record: run python -m labkit agenda --write")


@pytest.mark.parametrize("name", agenda.AGENDAS)
def test_every_agenda_leaves_its_slack(record, name):
    assert agenda.slack_min(name, record) >= agenda.MIN_SLACK_MIN


def test_a_drifted_record_no_longer_matches_the_guide(record):
    drifted = copy.deepcopy(record)
    drifted["notebooks"]["07_exercises.ipynb"]["seconds"] += 120  # two minutes more for the capstone
    assert agenda.render("two-hours", drifted) != agenda.rendered_in(GUIDE.read_text(), "two-hours")
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
    begin, end = agenda.markers("two-hours")
    doc.write_text(f"# guide\n\n{begin}\nold\n{end}\n\nafter\n")
    assert main(["agenda", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert agenda.rendered_in(text, "two-hours") == agenda.render("two-hours", record)
    assert text.startswith("# guide\n") and text.endswith("\nafter\n")
    (tmp_path / "plain.md").write_text("no markers here\n")
    assert main(["agenda", "--write", str(tmp_path / "plain.md")]) == 2
    assert "no <!-- agenda:NAME --> markers" in capsys.readouterr().err
