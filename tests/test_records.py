"""The kit's records (labkit.records): a run's sections merged into a record with one command, what a
merge keeps, and a bad run file refused in one line with nothing written."""

from __future__ import annotations

import json

import pytest

from labkit.__main__ import main
from labkit.records import commit_label, kit_commit, merge_rows, merge_run, read


def _record(tmp_path, name, **sections):
    path = tmp_path / name
    path.write_text(json.dumps({"provenance": {"date": "2026-01-01T00:00:00Z", "device": "GPU",
                                               "command": "python -m labkit gpu --out x"}, **sections}))
    return path


def test_record_merge_takes_a_runs_sections_and_names_what_it_replaced(tmp_path, capsys):
    into = _record(tmp_path, "runs.json", kernel={"v": 1}, race={"v": 1}, sweep={"v": 1},
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
    into = _record(tmp_path, "runs.json", kernel={"v": 1})
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


def test_the_kits_commit_is_read_from_the_tree_it_names(tmp_path, monkeypatch):
    import subprocess

    tree = tmp_path / "kit"
    tree.mkdir()
    git = ["git", "-C", str(tree), "-c", "user.name=k", "-c", "user.email=k@k"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / "a.txt").write_text("1")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.delenv("LABKIT_SOURCE_COMMIT", raising=False)
    assert kit_commit(tree, full=True) == {"git_commit": head, "git_dirty": False}
    assert commit_label(tree) == head[:len(commit_label(tree))] and len(commit_label(tree)) >= 7
    (tree / "a.txt").write_text("2")
    assert commit_label(tree).endswith("+uncommitted changes")
    assert commit_label(tmp_path) == "unknown"  # a folder that is not the top of a checkout


def test_every_record_takes_the_kits_commit_from_one_function():
    # Only labkit.records asks git for the kit's commit; the audit's loader asks it for a vLLM tree's.
    from labkit import paths

    asking = sorted(str(p.relative_to(paths.REPO)) for p in (paths.REPO / "labkit").rglob("*.py")
                    if "rev-parse" in p.read_text())
    assert asking == ["labkit/records.py", "labkit/upstream/loader.py"]


def test_rows_merged_from_two_machines_keep_each_ones_machine_and_commit():
    def key(row):
        return row["learners"]

    cpu = {"machine": "2 cores, no GPU", "commit": "aaa1111", "date": "2026-01-01"}
    gpu = {"machine": "16 cores, NVIDIA H100", "commit": "bbb2222", "date": "2026-01-02"}
    first = merge_rows([], None, [{"learners": 1}, {"learners": 10}], cpu, key)
    assert [r["provenance"] for r in first] == [cpu, cpu]
    merged = merge_rows(first, cpu, [{"learners": 10, "v": 2}, {"learners": 30}], gpu, key)
    assert [(r["learners"], r["provenance"]["machine"], r["provenance"]["commit"]) for r in merged] == [
        (1, cpu["machine"], "aaa1111"), (10, gpu["machine"], "bbb2222"), (30, gpu["machine"], "bbb2222")]
    # A row written before rows were stamped takes its own record's provenance, not the new run's.
    assert merge_rows([{"learners": 1}], cpu, [{"learners": 30}], gpu, key)[0]["provenance"] == cpu


def test_refresh_executes_the_notebooks_it_is_told_by_any_of_their_names(capsys):
    from labkit import paths
    from labkit.__main__ import main
    from labkit.docgen.refresh import notebooks_named

    names = ["03", "08_appendix_kernel_engineering", "02_see_the_stale_idx_mapping.ipynb"]
    assert [p.name for p in notebooks_named(names)] == [
        "03_the_fix.ipynb", "08_appendix_kernel_engineering.ipynb", "02_see_the_stale_idx_mapping.ipynb"]
    assert notebooks_named(["all"]) == sorted(paths.NOTEBOOKS.glob("*.ipynb"))
    assert main(["refresh", "--execute", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--execute 99: no notebook of notebooks/ is called that" in err[0]
