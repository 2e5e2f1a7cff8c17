"""The room's records as the guide renders them: a record merged from several runs names each run."""

import copy
import json

import pytest

record = pytest.importorskip("labkit_room.record", reason="the room's distribution (room/) is not installed here")


def _room(learners: int, provenance: dict | None = None) -> dict:
    row = {"learners": learners, "start": "cold", "errors": [], "load_average": {"before": [1.0, 1.0, 1.0]},
           "proxy": "configurable-http-proxy 0.4.0 (Python port)", "backend": ["torch"],
           "first_output_s": {"median": 1.0, "worst": 2.0}, "last_cell_s": {"median": 5.0, "worst": 6.0},
           "memory_per_learner_mib": {"median": 900}, "every_learner_saw_corruption": True,
           "every_learner_fixed_all": True, "buggy_corrupted": [16], "fixed_right": 50}
    if provenance:
        row["provenance"] = provenance
    return row


PROV = {"date": "2026-12-01 10:00 UTC", "machine": "16 cores (x), 126 GiB, NVIDIA H200", "shared_cpu": "",
        "commit": "aaaaaaa", "jupyterhub": "6.1.1", "command": "python -m labkit hub bench"}


def test_a_record_of_one_run_names_its_machine_once():
    said = record._measured({"provenance": PROV, "rooms": [_room(1), _room(10)]})
    assert said.count("NVIDIA H200") == 1 and "aaaaaaa" in said and "N =" not in said


def test_a_merged_record_names_each_rows_machine_and_commit_and_the_lead_names_its_rows_card():
    other = {**PROV, "date": "2026-12-06 18:00 UTC", "machine": "16 cores (y), 126 GiB, NVIDIA H100 80GB HBM3",
             "commit": "bbbbbbb"}
    merged = {"provenance": other, "rooms": [_room(1, PROV), _room(30, other)]}
    said = record._measured(merged)
    assert "N = 1 cold: 2026-12-01 10:00 UTC on 16 cores (x), 126 GiB, NVIDIA H200" in said
    assert "N = 30 cold: 2026-12-06 18:00 UTC on 16 cores (y), 126 GiB, NVIDIA H100 80GB HBM3" in said
    assert "aaaaaaa" in said and "bbbbbbb" in said


def test_the_gpu_lead_names_the_card_of_the_room_it_quotes(monkeypatch, tmp_path):
    other = {**PROV, "machine": "16 cores (y), 126 GiB, NVIDIA H100 80GB HBM3", "commit": "bbbbbbb"}
    rec = {"provenance": copy.deepcopy(PROV), "rooms": [_room(1, PROV), _room(30, other)]}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(rec))
    monkeypatch.setitem(record.RECORDS, "gpu", path)
    assert record.render_gpu().startswith("One NVIDIA H100 80GB HBM3 holds 30 learners")
