"""The mutation check (`make mutants`, labkit/tools/mutants.py) applies to the code as it is.

Running the mutants takes minutes and is not part of `make test`; this checks in a second what
would stop it: each mutant's text must be found exactly once in its file (a refactor that moves
or duplicates it fails here, not in the mutation run), its edit must still be valid Python and
really change the file, and the tests that are to kill it must exist.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.tools import mutants
from labkit.tools.mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[1]


def test_the_mutants_have_distinct_names_and_cover_each_part_of_the_fix():
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names)), names
    parts = {m.part.split(".")[0] for m in MUTANTS}
    assert {"1", "2", "3", "4"} <= parts, parts  # host fill, kernel masks, DFlash pad, early exit


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutants_text_is_found_exactly_once_in_its_file(mutant):
    source = (ROOT / mutant.path).read_text()
    assert source.count(mutant.old) == 1, (
        f"{mutant.name}: {mutant.old!r} occurs {source.count(mutant.old)} times in {mutant.path}; "
        "update the mutant in labkit/tools/mutants.py to the current source")
    edited = mutants.mutated(mutant, source)
    assert edited != source and mutant.new in edited
    ast.parse(edited, filename=mutant.path)  # a syntax error would be a harness error, not a kill
    assert mutant.backend in ("interpreter", "torch")
    missing = [t for t in mutant.tests if not (ROOT / t).is_file()]
    assert not missing, f"{mutant.name}: its tests {missing} do not exist"


def test_a_mutant_whose_text_moved_is_refused_by_name():
    mutant = MUTANTS[0]
    for text in ("nothing of it here", mutant.old + "\n" + mutant.old):
        with pytest.raises(RuntimeError, match=f"mutant {mutant.name}: .* not once"):
            mutants.mutated(mutant, text)
