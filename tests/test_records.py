"""The kit's records (labkit.records): a run's sections merged into a record with one command, what a
merge keeps, and a bad run file refused in one line with nothing written."""

from __future__ import annotations

import json

import pytest

from labkit.__main__ import main
from labkit.records import kit_commit, merge_run, read


def _record(tmp_path, name, **sections):
    path = tmp_path / name
    path.write_text(json.dumps({"provenance": {"date": "2026-01-01T00:00:00Z", "device": "GPU",
                                               "command": "python -m labkit gpu --out x"}, **sections}))
    return path


def test_record_merge_takes_a_runs_sections_and_names_what_it_replaced(tmp_path, capsys):
    into = _record(tmp_path, "h200.json", kernel={"v": 1}, race={"v": 1}, sweep={"v": 1},
                   section_provenance={"kernel": {"date": "2025-12-31"}, "race": {"date": "2025-12-31"}})
    run = _record(tmp_path, "run.json", kernel={"v": 2}, race={"v": 2}, sweep={"error": "CUDA error"},
                  peak_copy={"v": 2})
    assert main(["record", "merge", str(run), "--into", str(into), "--sections", "kernel,race"]) == 0
    out = capsys.readouterr().out
    merged = read(into)
    assert merged["kernel"] == {"v": 2} and merged["race"] == {"v": 2} and merged["sweep"] == {"v": 1}
    assert "peak_copy" not in merged  # only the sections asked for
    assert merged["superseded"] == {"race": [{"data": {"v": 1}, "provenance": {"date": "2025-12-31"},
                                              "superseded_because": "measured again"}]}
    assert "kernel: the run of 2025-12-31 leaves the record" in out and "make refresh" in out
    assert merged["provenance"]["commands"][-1] == "python -m labkit gpu --out x"
    # Without --sections: every usable one; a section that failed in the run is never merged.
    assert merge_run(run, into) == ["kernel: the run of 2026-01-01 leaves the record (git log -p keeps it)",
                                    "race: the run of 2026-01-01 stays under superseded (every run of it is data)",
                                    "peak_copy: new"]
    assert read(into)["sweep"] == {"v": 1}


@pytest.mark.parametrize("body,says", [("{not json", "is not a JSON record"),
                                       ('{"kernel": {}}', "has no provenance"),
                                       ('{"provenance": {}, "sweep": {"error": "x"}}', "sweep failed in that run")])
def test_a_bad_run_is_one_line_and_changes_nothing(tmp_path, capsys, body, says):
    into = _record(tmp_path, "h200.json", kernel={"v": 1})
    before = into.read_text()
    run = tmp_path / "run.json"
    run.write_text(body)
    sections = ["--sections", "sweep"] if "sweep" in body else []
    assert main(["record", "merge", str(run), "--into", str(into), *sections]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m labkit record: error: ") and says in err[0], err
    assert into.read_text() == before


def test_the_kits_commit_is_its_own_checkout_s_never_a_surrounding_repository(tmp_path, monkeypatch):
    import subprocess

    from labkit import paths

    outer = tmp_path / "outer"
    (outer / "kit").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    monkeypatch.setattr(paths, "REPO", outer / "kit")  # a copy of the kit inside another repository
    monkeypatch.delenv("LABKIT_SOURCE_COMMIT", raising=False)
    assert kit_commit() == {"git_commit": None, "git_dirty": None}
    monkeypatch.setenv("LABKIT_SOURCE_COMMIT", "0123abc")
    assert kit_commit()["git_commit"] == "0123abc"


def test_refresh_executes_the_notebooks_it_is_told_by_any_of_their_names(capsys):
    from labkit.__main__ import main
    from labkit.docgen.refresh import notebooks_named, record_notebooks

    names = ["03", "08_appendix_kernel_engineering", "02_see_the_stale_idx_mapping.ipynb"]
    assert [p.name for p in notebooks_named(names)] == [
        "03_the_fix.ipynb", "08_appendix_kernel_engineering.ipynb", "02_see_the_stale_idx_mapping.ipynb"]
    assert len(notebooks_named(["all"])) > len(record_notebooks())
    assert main(["refresh", "--execute", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--execute 99: no notebook of notebooks/ is called that" in err[0]
