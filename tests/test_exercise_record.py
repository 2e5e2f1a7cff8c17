"""One record per exercise (labkit.workshop.exercises.record): an exercise registered there, and nowhere
else, shows in the checkers, the hints, the reveal, the secrecy scan and the agendas."""

from __future__ import annotations

import nbformat
import pytest

from labkit import paths
from labkit.workshop import checkers as ex
from labkit.workshop.editions import agenda
from labkit.workshop.editions.secrecy import EXERCISE_NOTEBOOK, STUDENT_PATH, find_leaks
from labkit.workshop.editions.student import student_notebook
from labkit.workshop.exercises import record
from labkit.workshop.feedback import CheckResult

WORD = "zebracrossing"  # the throwaway exercise's answer: a word no page of the kit uses
# The throwaway takes the letter after the record's last: no letter is kept free for it.
LETTER = chr(ord(record.EXERCISES[-1].letter) + 1)


def check_throwaway(learner) -> CheckResult:
    """The throwaway exercise's checker."""
    return CheckResult(LETTER, learner is not None, f"Exercise ({LETTER}): checked.")


THROWAWAY = record.Exercise(
    letter=LETTER, title="A throwaway", topic="an exercise registered by a test", upstream="nothing in vllm/nowhere.py",
    versions=(record.Version(None, "throwaway", f"{LETTER}-skeleton", record.KitCode(
        "labkit/speculator.py, Speculator.copy_idx_mapping",
        (record.Piece("labkit.speculator:Speculator.copy_idx_mapping", r"fill_"),)),
        hints=("look around", "look closer", f"write {WORD}")),),
    checker="test_exercise_record:check_throwaway", minutes=7, agenda_notebook="07", compare_notebook="03",
    answer=(rf"\b{WORD}\b",))


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(record, "EXERCISES", (*record.EXERCISES, THROWAWAY))
    return THROWAWAY


def test_the_checkers_and_hints_read_it(registered):
    assert "check_throwaway" in ex.__all__ and "check_throwaway" in dir(ex)
    # The record's checker, as notebook 07 reaches it: wrapped only to tell the room's view its verdict.
    assert ex.check_throwaway.__wrapped__ is check_throwaway
    assert ex.check_throwaway(lambda: None).solved
    last = repr(ex.hint(LETTER, 3))
    assert last.startswith(f"Hint 3/3 (the fix) for ({LETTER})") and WORD in last
    assert WORD not in repr(ex.hint(f"({LETTER})", 2))
    assert f"choose one of {', '.join(x.letter for x in record.EXERCISES)}" in repr(ex.hint("?"))


def test_the_reveal_reads_it(registered):
    shown = ex.reveal(LETTER)
    assert f"Exercise ({LETTER}), {registered.topic}" in repr(shown) and "fill_(-1)" in repr(shown)
    assert registered.upstream in repr(shown)
    assert [part.fix.exercise for part in ex.reveal().parts][-1] == LETTER


def _student_path() -> dict:
    return {name: student_notebook(nbformat.read(paths.NOTEBOOKS / name, as_version=4))
            for name in STUDENT_PATH[:STUDENT_PATH.index(EXERCISE_NOTEBOOK) + 1]}


def test_the_secrecy_scan_reads_it(registered):
    edition = _student_path()
    task = nbformat.v4.new_markdown_cell(f"## ({LETTER}) A throwaway")
    task.id = registered.task_cell
    edition[EXERCISE_NOTEBOOK].cells.append(task)
    assert not [leak for leak in find_leaks(edition) if leak.exercise == LETTER]
    planted = nbformat.v4.new_markdown_cell(f"The answer to the last exercise is {WORD}.")
    edition["00_setup_and_tour.ipynb"].cells.insert(1, planted)
    leaks = [leak for leak in find_leaks(edition) if leak.exercise == LETTER]
    assert leaks and leaks[0].seen.notebook == "00_setup_and_tour.ipynb" and leaks[0].found == WORD
    del edition[EXERCISE_NOTEBOOK].cells[-1]  # a record whose task cell 07 lacks is named
    with pytest.raises(ValueError, match=f"{LETTER}-task"):
        find_leaks(edition)


def test_the_agendas_read_it(registered, monkeypatch):
    times = agenda.load_times()
    before = {s.activity.name: s for s in agenda.schedule(agenda.THREE_HOURS, times)}
    assert f"({LETTER})" in before["07"].activity.what and LETTER in before["07"].activity.exercises
    monkeypatch.setattr(record, "EXERCISES", record.EXERCISES[:-1])
    without = {s.activity.name: s for s in agenda.schedule(agenda.THREE_HOURS, times)}
    assert before["07"].exercise_min - without["07"].exercise_min == registered.minutes
    assert f"({LETTER})" not in without["07"].activity.what
