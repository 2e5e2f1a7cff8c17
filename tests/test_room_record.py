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


def test_every_row_of_the_room_records_keeps_its_machine_and_commit():
    # A record merged from several runs (cards, commits) says where each row came from, not the last run's.
    for kind in ("cpu", "gpu"):
        rec = record.load(kind)
        assert rec is not None and rec["rooms"], kind
        for row in rec["rooms"]:
            prov = row["provenance"]
            assert prov["machine"] and "cores" in prov["machine"] and prov["commit"], (kind, row["learners"])
    # Named for what it holds (the rooms of the GPU box), whichever card measured them.
    assert record.RECORDS["gpu"].name == "gpu_box_rooms.json"


def _timed(learners: int, start: str, worst: float, prov: dict, split: bool = False) -> dict:
    row = {**_room(learners, prov), "start": start, "first_output_s": {"median": worst - 1, "worst": worst}}
    if split:
        parts = {"server_start_s": 3.0, "kernel_start_s": 4.5, "imports_s": 1.25, "first_cell_s": 0.5}
        row["first_output_split_s"] = {"median": {**parts, "first_output_s": 9.25},
                                       "worst_learner": {**parts, "first_output_s": 9.25}}
        row["memory_split_mib"] = {"peak_rss": {"kernel": 1100, "server": 120},
                                   "kernel_holds": {"modules": 2000, "heavy": ["torch", "triton"],
                                                    "cuda_initialised": True}}
    return row


def test_the_holds_sentence_quotes_the_largest_clean_room_cold_and_warm_with_its_card(monkeypatch, tmp_path):
    h100 = {**PROV, "machine": "16 cores (y), 126 GiB, NVIDIA H100 80GB HBM3", "commit": "bbbbbbb"}
    rows = [_timed(10, "cold", 8.0, PROV), _timed(30, "cold", 9.25, h100, split=True), _timed(30, "warm", 2.4, h100),
            {**_timed(60, "cold", 4.0, h100), "errors": ["MemoryError: x"]}]  # not clean: not quoted
    rec = {"provenance": h100, "rooms": rows}
    said = record.holds_sentence(rec)
    assert said == ("One NVIDIA H100 80GB HBM3 holds 30 learners with first output under 10 s for a learner whose "
                    "server and kernel start as they sit down (cold) and under 3 s in a room started before (warm) "
                    "(the worst learner's)")
    rows[2]["provenance"] = PROV  # warm measured on another card: each clause names its own
    assert record.holds_sentence(rec).startswith("One GPU box holds 30 learners with first output under 10 s for a "
                                                 "learner whose server and kernel start as they sit down (cold) on "
                                                 "an NVIDIA H100 80GB HBM3 and under 3 s")
    path = tmp_path / "gpu_box_rooms.json"
    path.write_text(json.dumps(rec))
    monkeypatch.setitem(record.RECORDS, "gpu", path)
    shown = record.render_gpu()
    assert shown.startswith(record.holds_sentence(rec) + ":")
    assert "| 30 | cold | 8.2 / 9.2 s | 3.0 + 4.5 + 1.2 + 0.5 s |" in shown and "| 120 / 1100 MiB |" in shown
    assert "the server's start (spawn to its answer) 3.0 s" in shown and "with a CUDA context" in shown


def test_the_guide_says_the_gpu_boxs_holds_sentence_from_its_record():
    from labkit import paths

    guide = " ".join((paths.REPO / "docs" / "INSTRUCTOR_GUIDE.md").read_text().split())
    block = guide.split("<!-- gpu:hub-room -->", 1)[1].split("<!-- /gpu:hub-room -->", 1)[0]
    assert block.strip().startswith(record.holds_sentence(record.load("gpu")) + ":")
