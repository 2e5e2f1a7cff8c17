"""The PR's fix beside the learner's code: on a solved check, on the instructor's call, in notebook 03.

Every check keeps the learner's source in $LABKIT_ANSWERS (here a temporary folder per test:
:func:`workshop_helpers.kept_answers`); ``reveal`` and ``compare`` read it back.
"""

from __future__ import annotations

import html
import inspect
import re
import sys

import pytest
from test_workshop_dflash import dflash_pad_zero
from test_workshop_fill import fill_nothing, fill_right
from test_workshop_kernel import kernel_unmasked
from test_workshop_kernel_torch import rows_untouched
from workshop_helpers import kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: sets TRITON_INTERPRET)
from labkit import backends
from labkit.workshop import checkers as ex
from labkit.workshop.editions.secrecy import answers_in
from labkit.workshop.exercises.kept_code import Answer, answers_folder, keep, saved_answer
from labkit.workshop.exercises.kit_code import pr_fix
from labkit.workshop.exercises.record import EXERCISES, letters
from labkit.workshop.exercises.reveal import Reveal, Reveals
from labkit.workshop.feedback import learner_source

# Every version of every exercise, as (letter, version kind): what each excerpt test runs over.
VERSIONS = [(x.letter, v.kind or "torch") for x in EXERCISES for v in x.versions]

KERNELS_RUN = backends.HAS_TRITON and (backends.KERNELS_INTERPRETED or backends.HAS_CUDA)
RUN_THE_CHECKER = "Run exercise ({})'s checker in notebook 07 to see yours here."


def test_the_instructor_reveals_a_fix_nobody_has_checked_yet():
    shown = ex.reveal("a")
    assert isinstance(shown, Reveal) and shown.yours is None
    assert "self.idx_mapping[num_reqs:].fill_(-1)" in repr(shown)
    assert repr(shown).splitlines()[-2] == RUN_THE_CHECKER.format("a")  # the last line names vLLM
    assert html.escape(RUN_THE_CHECKER.format("a")) in shown._repr_html_()


def test_reveal_shows_the_last_checked_code_even_unsolved():
    assert not ex.check_mapping({"copy_idx_mapping": fill_nothing})
    shown = ex.reveal("(a)")
    assert shown.yours.verdict == "not solved yet"
    assert "Your copy_idx_mapping (last checked: not solved yet):" in repr(shown)
    assert "def fill_nothing(" in repr(shown) and "fill_(-1)" in repr(shown)
    page = shown._repr_html_()
    assert page.count("<td") == 2 and "def fill_nothing(" in page


def test_the_last_check_is_what_is_shown():
    ex.check_mapping({"copy_idx_mapping": fill_nothing})
    ex.check_mapping({"copy_idx_mapping": fill_right})
    assert ex.reveal("a").yours.verdict == "solved" and "def fill_right(" in repr(ex.reveal("a"))


def test_reveal_all_shows_every_exercise_of_the_record_in_order():
    shown = ex.reveal()
    assert isinstance(shown, Reveals)
    assert [part.fix.exercise for part in shown.parts] == list(letters()) == [x.letter for x in EXERCISES]
    text = repr(shown)
    places = [text.index(f"Exercise ({x.letter})") for x in EXERCISES]
    assert places == sorted(places) and len(places) > 1
    assert shown._repr_html_().count("<table") == len(EXERCISES)


def test_an_unknown_exercise_is_answered_in_words():
    assert "no exercise 'z'" in repr(ex.reveal("z"))


def test_compare_reads_the_answers_notebook_07_kept():
    """Notebook 03 runs in another kernel: what it shows comes from the folder alone."""
    kept = answers_folder()  # this test's own folder: workshop_helpers.kept_answers
    kept.mkdir()
    (kept / "c.py").write_text("# labkit answer: exercise=c name=build_sample_mapping variant=torch "
                                       "verdict=solved\ndef build_sample_mapping(a, n, k, out):\n    pass  # mine\n")
    shown = ex.compare("c")
    assert "Your build_sample_mapping (last checked: solved)" in repr(shown) and "pass  # mine" in repr(shown)
    assert "sample_idx_mapping[live:] = pad_value" in repr(shown)
    assert repr(ex.compare("d")).splitlines()[-2] == RUN_THE_CHECKER.format("d")


def test_compare_follows_labkit_answers(tmp_path, monkeypatch):
    ex.check_dflash({"build_sample_mapping": dflash_pad_zero})
    monkeypatch.setenv("LABKIT_ANSWERS", str(tmp_path / "elsewhere"))
    assert ex.compare("c").yours is None


def test_the_kept_file_is_small_text_that_reads_back():
    kept = answers_folder()  # this test's own folder: workshop_helpers.kept_answers
    ex.check_kernel({"gumbel_rows": rows_untouched})
    path = kept / "b.py"
    assert path.stat().st_size < 5_000
    answer = saved_answer("b")
    assert answer == Answer("b", "gumbel_rows", "torch", "not solved yet", learner_source(rows_untouched))
    assert "gumbel_sample_torch" in ex.compare("b").fix.where  # the torch answer for the torch version


@pytest.mark.skipif(not KERNELS_RUN, reason="Triton kernels cannot run here")
def test_a_kernels_source_is_kept_and_the_kernels_fix_shown():
    ex.check_kernel({"gumbel_kernel": kernel_unmasked})
    shown = ex.compare("b")
    assert shown.yours.variant == "triton" and shown.yours.source.startswith("@triton.jit\ndef kernel_unmasked(")
    assert "gumbel_sample_kernel" in shown.fix.where and "return in_vocab & ((offs * 0 + slot) >= 0)" in shown.fix.text


def test_a_folder_that_cannot_be_written_costs_a_note_not_the_check(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LABKIT_ANSWERS", str(blocker / "my_answers"))
    result = ex.check_mapping(fill_right)
    assert result.solved and result.reveal is not None  # the fix is still shown, from memory
    assert len(result.notes) == 1 and "not saved" in result.notes[0] and "notebook 03" in result.notes[0]
    assert "\n" not in result.notes[0]
    assert result.notes[0] in repr(result)


def test_a_source_that_cannot_be_read_is_said_so():
    namespace: dict = {}
    exec("def copy_idx_mapping(idx_mapping, slots):\n    idx_mapping[:len(slots)] = slots\n"
         "    idx_mapping[len(slots):] = -1\n", namespace)  # no file, no cell: inspect cannot find it
    result = ex.check_mapping(namespace)
    assert result.solved
    assert "could not be read" in result.reveal.your_text()


def test_keep_writes_under_the_folder_it_names():
    kept = answers_folder()  # this test's own folder: workshop_helpers.kept_answers
    assert keep(Answer("d", "q_offset", "torch", "solved", "x" * 50_000)) is None
    assert len((kept / "d.py").read_text()) < 21_000  # a long source is cut: small files only


@pytest.mark.parametrize("exercise,variant", VERSIONS)
def test_each_fix_excerpt_is_found_and_marks_its_lines(exercise, variant):
    fix = pr_fix(exercise, variant)
    assert "source has changed" not in fix.text
    assert any(line.startswith(">") for line in fix.text.splitlines())


@pytest.mark.parametrize("exercise,variant", VERSIONS)
def test_a_fix_gives_no_later_exercise_away(exercise, variant):
    """The kit's code shown once an exercise is solved holds no later exercise's answer, as the secrecy
    scan reads answers (each later exercise's record)."""
    later = letters()[letters().index(exercise) + 1:]
    text = pr_fix(exercise, variant).text
    found = {x: answers_in(text, x) for x in later}
    assert not any(found.values()), (exercise, variant, found)


def test_a_function_that_is_gone_says_where_to_look(monkeypatch):
    import dataclasses

    from labkit.workshop.exercises import record

    a = record.exercise("a")
    gone = record.KitCode("labkit/speculator.py, Speculator.copy_idx_mapping",
                          (record.Piece("labkit.speculator:Speculator.no_such_method", "fill"),))
    broken = dataclasses.replace(a, versions=(dataclasses.replace(a.versions[0], kit_code=gone),))
    monkeypatch.setattr(record, "EXERCISES", (broken, *record.EXERCISES[1:]))
    assert "see labkit/speculator.py" in pr_fix("a").text


@pytest.mark.parametrize("exercise,variant", VERSIONS)
def test_each_fix_excerpt_is_whole_functions_numbered_as_in_their_files(exercise, variant):
    """An excerpt starts at a def (or the decorator above it) and holds every line of the function."""
    from labkit.workshop.exercises import kit_code as module
    from labkit.workshop.exercises.record import exercise as record_of

    excerpts = pr_fix(exercise, variant).text.split("\n     ...\n")
    for piece, text in zip(record_of(exercise).version(variant).kit_code.pieces, excerpts, strict=True):
        fn = module._owner(piece.owner)
        lines, first = inspect.getsourcelines(getattr(fn, "fn", fn))
        numbered = [(int(line[1:5]), line[7:]) for line in text.splitlines()]
        assert numbered == [(first + i, src.rstrip()) for i, src in enumerate(lines)]
        assert re.match(r"\s*(@|def )", numbered[0][1])


def test_outside_ipython_nothing_is_kept_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("LABKIT_ANSWERS")
    monkeypatch.chdir(tmp_path)
    assert ex.check_mapping(fill_right).solved
    assert list(tmp_path.iterdir()) == []  # a script or a test run leaves no files behind


def test_in_a_notebook_answers_go_to_my_answers_beside_it(tmp_path, monkeypatch):
    import types

    monkeypatch.delenv("LABKIT_ANSWERS")
    monkeypatch.chdir(tmp_path)  # a kernel runs in its notebook's folder
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: object()))
    ex.check_mapping(fill_right)
    assert (tmp_path / "my_answers" / "a.py").read_text().startswith("# labkit answer: exercise=a")
    assert ex.compare("a").yours.name == "fill_right"


def test_every_reveal_names_where_its_part_lives_in_vllm_and_no_doc_that_explains_the_rest():
    """A reveal comes after one exercise; docs/VLLM_MAP.md, which names the file of every part, reaches the
    learner's folder once all of them are done (the capstone), so a reveal names the file, not the doc."""
    from pathlib import Path

    from labkit.workshop.exercises.reveal import reveal

    vllm_map = (Path(__file__).resolve().parents[1] / "docs" / "VLLM_MAP.md").read_text()
    for x in EXERCISES:
        shown = reveal(x.letter)
        assert x.upstream in shown.text() and "docs/" not in shown.text() + shown.html()
        where = x.upstream.split(" in ")[-1].split(",")[0]
        if where.startswith("vllm/"):
            assert where in vllm_map or where.removeprefix("vllm/v1/worker/gpu/") in vllm_map
