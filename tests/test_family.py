"""The case book's four cases (labkit.family): each buggy form corrupts what its mechanism says it must,
counted against the eager run, and fails the audit with a report that names the buffer, the writer and
the reader; each fixed form corrupts nothing and passes. Every expectation is computed from the case's
shapes and schedule, never copied from a run; the CPU record must be what the cases give now.

The GPU tests at the end run cases 3 and 4 under real CUDA graphs (skipped without CUDA), where
PyTorch's caching allocator, not the emulation, decides which memory the drafter's graph is given.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from labkit import backends
from labkit.family import hidden_state_cache, measure, record, shared_pool, stale_slot, static_buffer

gpu = pytest.mark.gpu
needs_compiled = pytest.mark.skipif(backends.backend() != "triton",
                                    reason="real CUDA graphs need the compiled Triton backend (LABKIT_BACKEND=triton)")


@pytest.fixture
def in_row_order():
    """Case 1 on the CPU, rows storing in order: compiled on a GPU, a colliding padded row and live row
    race, and whether the live q is overwritten changes from launch to launch (tests/test_gpu.py)."""
    if backends.backend() != "triton":
        yield
        return
    with backends.using_backend("torch"):
        yield


# -- case 1: a stale padded row stores by slot ---------------------------------------------------------

def _stale_collisions(schedule) -> set[tuple[int, int, int]]:
    """The live q records a padded row overwrites: at each step, a padded row keeps the slot the previous
    step wrote there (nothing else writes it), and its store lands on that slot's q if the slot is live."""
    config = stale_slot.config("buggy")
    hit, previous = set(), ()
    for step, live in enumerate(schedule):
        rows = next(s for s in config.capture_sizes if s >= len(live))
        stale = {previous[r] for r in range(len(live), rows) if r < len(previous)}
        hit |= {(step, slot, d) for slot in stale & set(live) for d in range(config.k)}
        previous = tuple(live) + tuple(previous[len(live):])
    return hit


@pytest.mark.parametrize("name", list(stale_slot.SCHEDULES))
def test_case_1_the_buggy_drafter_corrupts_exactly_the_q_a_padded_row_still_names(name, in_row_order):
    schedule = stale_slot.SCHEDULES[name]
    expected = _stale_collisions(schedule)
    buggy, fixed = stale_slot.symptom(name, "buggy"), stale_slot.symptom(name, "fixed")
    assert set(buggy.corrupted) == expected
    assert buggy.total == fixed.total == sum(len(live) for live in schedule) * stale_slot.config("buggy").k
    assert fixed.count == 0
    assert (name == "slot 7 finished") == (not expected), "only a request that left from the middle hurts a live q"


@pytest.mark.parametrize("name", list(stale_slot.SCHEDULES))
def test_case_1_the_audit_fails_the_buggy_drafter_on_either_batch_and_names_writer_owner_and_reader(name, in_row_order):
    report = stale_slot.audit("buggy", name)
    live = stale_slot.SCHEDULES[name][-1]
    assert not report.passed
    for f in report.findings:
        assert f.buffer == "draft_logits" and f.index[0] in live and f.writer >= len(live)
        assert f.sentence().startswith(f"padded row {f.writer} wrote draft_logits[{f.index[0]}, ")
        assert f"owned by row {live.index(f.index[0])}, which {stale_slot.READER} reads" in f.sentence()
    assert stale_slot.audit("fixed", name).passed


# -- case 2: a -1 fill without a mask ------------------------------------------------------------------

def test_case_2_the_padded_rows_overwrite_the_slot_python_indexing_gives_minus_one():
    slots = hidden_state_cache.live_slots()
    wrapped = list(range(hidden_state_cache.NUM_SLOTS))[hidden_state_cache.PADDING_SLOT]  # where -1 lands
    assert hidden_state_cache.CAPTURE_SIZES[-1] > len(slots), "the case must run padded"
    buggy = hidden_state_cache.symptom("buggy")
    assert buggy.corrupted == ((wrapped,) if wrapped in slots else ())
    assert buggy.count == 1, "the shapes put a live request's token in the last slot of the cache"
    assert hidden_state_cache.symptom("null block").count == 0


def test_case_2_eager_and_a_graph_that_fits_exactly_corrupt_nothing():
    case = hidden_state_cache.HiddenStateCache("buggy", use_graphs=False)
    cache = case.run()
    for row, slot in enumerate(hidden_state_cache.live_slots()):
        assert bool((cache[slot] == case.fresh[row]).all())


def test_case_2_the_audit_names_the_padded_row_the_slot_its_owner_and_the_connector():
    slots = hidden_state_cache.live_slots()
    wrapped = hidden_state_cache.NUM_SLOTS - 1
    report = hidden_state_cache.audit("buggy")
    (found,) = {(f.index[0], f.owner) for f in report.findings}
    assert found == (wrapped, slots.index(wrapped))
    padded = hidden_state_cache.CAPTURE_SIZES[-1]
    for f in report.findings:
        assert len(slots) <= f.writer < padded
        assert f.sentence() == (f"padded row {f.writer} wrote cache[{wrapped}, :] owned by row {slots.index(wrapped)}, "
                                f"which {hidden_state_cache.READER} reads")
    assert hidden_state_cache.audit("null block").passed


# -- case 3: a later replay reuses an earlier graph's output memory --------------------------------------

def test_case_3_exactly_the_prompts_that_ran_under_a_graph_are_corrupted():
    graphed = tuple(n for n in shared_pool.PROMPT_LENGTHS if n <= shared_pool.TARGET_CAPTURE_SIZES[-1])
    assert graphed and len(graphed) < len(shared_pool.PROMPT_LENGTHS), "the workload must have both kinds"
    assert shared_pool.symptom("buggy").corrupted == graphed
    assert shared_pool.next_tokens_differ("buggy") == 0, "the sampler reads before the drafter replays"
    for form in ("copied out", "owned"):
        assert shared_pool.symptom(form).count == 0


@pytest.mark.parametrize("form,shares", [("buggy", True), ("owned", False)])
def test_case_3_the_emulated_pool_gives_the_drafter_the_target_graphs_memory_unless_it_is_owned(form, shares):
    case = shared_pool.PromptScoring(form)
    case.score(0)
    assert case.shares_memory() == shares


def test_case_3_the_lifetime_audit_names_the_drafter_the_hidden_states_and_their_reader():
    report = shared_pool.audit("buggy")
    (found,) = report.findings
    graphed = [i for i, n in enumerate(shared_pool.PROMPT_LENGTHS) if n <= shared_pool.TARGET_CAPTURE_SIZES[-1]]
    draft_rows = shared_pool.DRAFT_CAPTURE_SIZES[0]
    assert (found.buffer, found.writer, found.handed_on_by, found.reader) == (
        "hidden_states", "draft graph", "target model", "prompt logprobs")
    assert found.rows == tuple(range(draft_rows)) and list(found.steps) == graphed
    assert found.sentence() == (f"draft graph overwrote hidden_states[0:{draft_rows}, :], handed on by target "
                                "model, before prompt logprobs read it")
    for form in ("copied out", "owned"):
        assert shared_pool.audit(form).passed


def test_case_3_padding_invariance_holds_where_output_lifetime_does_not():
    for index, n in enumerate(shared_pool.PROMPT_LENGTHS):
        if n <= shared_pool.TARGET_CAPTURE_SIZES[-1]:
            assert shared_pool.padding_audit("buggy", index).passed, n


# -- case 4: a track buffer refreshed at its front and read at its tail -----------------------------------

def _tail_read(batch: int, handed: int) -> list[int]:
    """The buffer entries a batch's live rows take their destinations from: the reader slices the last
    `rows` entries of the `handed` it is given (rows: the graph the batch replays)."""
    rows = static_buffer.TrackSave().runner.rows_for(batch)
    return [handed - rows + row for row in range(batch)]


def test_case_4_only_batches_whose_tail_is_what_the_host_refreshed_save_their_states():
    """A batch saves right exactly when every destination its rows read lies in the part of the buffer the
    host refreshed for it (its own rows, at the front): computed from the shapes, for both forms."""
    for form, handed in (("buggy", lambda rows: static_buffer.MAX_ROWS), ("fixed", lambda rows: rows)):
        expected = []
        for n in static_buffer.BATCH_SIZES:
            rows = static_buffer.TrackSave().runner.rows_for(n)
            read = _tail_read(n, handed(rows))
            assert static_buffer.destinations_read(form, n) == read
            if read == list(range(n)):
                expected.append(n)
        assert static_buffer.right_batch_sizes(form) == tuple(expected), form
        wrong = [(n, row) for n in static_buffer.BATCH_SIZES if n not in expected for row in range(n)]
        assert list(static_buffer.symptom(form).corrupted) == wrong, form
    assert 0 < len(static_buffer.right_batch_sizes("buggy")) < len(static_buffer.BATCH_SIZES)
    assert static_buffer.symptom("fixed").count == 0


def test_case_4_a_small_batch_saves_to_slot_zero_and_never_writes_its_own_track_slots():
    """What the buggy graph leaves in the pool for a batch of 2: the zeros of the never-refreshed tail send
    every state to slot 0, and the rows' own track slots keep what they held (nothing)."""
    graphed = static_buffer.TrackSave("buggy")
    saved = graphed.run(2)
    assert not bool(saved.any()), "the rows' track slots were never written"
    live_states = graphed.states[[static_buffer.working_slot(r) for r in range(2)]]
    assert torch.equal(graphed.states[0], live_states[-1]), "the last row's state landed in slot 0"
    eager = static_buffer.TrackSave("buggy", use_graphs=False)
    assert torch.equal(eager.run(2), eager.states[[static_buffer.working_slot(r) for r in range(2)]])


def test_case_4_the_audit_fails_the_buggy_hand_out_even_without_padding_and_passes_the_fix():
    for n in static_buffer.BATCH_SIZES:
        # The audit's padded run reads what the graph reads; its unpadded reference, the last n entries.
        padded_reads_own = _tail_read(n, static_buffer.MAX_ROWS) == list(range(n))
        unpadded_reads_own = [static_buffer.MAX_ROWS - n + row for row in range(n)] == list(range(n))
        report = static_buffer.audit("buggy", n)
        assert report.passed == (padded_reads_own and unpadded_reads_own), n
        assert static_buffer.audit("fixed", n).passed, n
    report = static_buffer.audit("buggy", 2)
    assert static_buffer.TrackSave().runner.rows_for(2) == 2, "the shown audit runs a batch with no padded row"
    assert {f.index[0] for f in report.findings} == {0, 1}
    for f in report.findings:
        assert f.buffer == "track_states" and f.how == "unpadded run"
        assert f"which {static_buffer.READER} reads" in f.sentence()


# -- the records: what the notebook renders -------------------------------------------------------------

def test_the_cpu_record_holds_what_the_cases_give_now():
    from labkit.docgen.family_blocks import cpu_record

    assert cpu_record()["cases"] == json.loads(json.dumps(measure.measure("cpu")))


def _words(n: int) -> str:
    return {2: "two", 4: "four", 5: "five", 7: "seven", 8: "eight"}.get(n, str(n))


def test_the_notebooks_words_about_each_miniature_are_its_modules_shapes():
    """The prose that sets up each prediction restates the miniature's shapes: tied to the code here, so
    that a changed constant cannot leave the question about another shape."""
    from labkit import paths

    nb = json.loads((paths.NOTEBOOKS / record.NOTEBOOK).read_text())
    text = " ".join(" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    config = stale_slot.config("buggy")
    sizes = ", ".join(map(str, config.capture_sizes[:-1])) + f" and {config.capture_sizes[-1]}"
    h = hidden_state_cache
    shapes = [
        f"k = {config.k}, {_words(config.max_num_reqs)} slots, graphs of {sizes} rows",
        f"{_words(len(stale_slot.SCHEDULES['slot 3 finished'][0]))} live requests, then "
        f"{_words(len(stale_slot.SCHEDULES['slot 3 finished'][1]))}",
        f"{len(h.live_slots())} live tokens of {_words(len(h.REQUEST_BLOCKS))} requests in blocks "
        f"{h.REQUEST_BLOCKS[0]} to {h.REQUEST_BLOCKS[-1]} of a cache of {_words(h.NUM_BLOCKS)} blocks of "
        f"{h.BLOCK_SIZE} slots",
        f"the graph of {h.CAPTURE_SIZES[-1]} rows", f"`cache[-1]` is slot {h.NUM_SLOTS - 1}",
        f"prompts of {min(shared_pool.PROMPT_LENGTHS)} to {max(shared_pool.PROMPT_LENGTHS)} tokens",
        "graphs of " + ", ".join(map(str, shared_pool.TARGET_CAPTURE_SIZES[:-1]))
        + f" and {shared_pool.TARGET_CAPTURE_SIZES[-1]} tokens",
        f"eagerly above {shared_pool.TARGET_CAPTURE_SIZES[-1]}",
        f"a graph of {_words(shared_pool.DRAFT_CAPTURE_SIZES[0])} rows",
        f"pool slot `{static_buffer.working_slot(0)} + r`", f"track slot `{static_buffer.track_slot(0)} + r`",
        f"a track buffer of {static_buffer.MAX_ROWS} entries",
        "Graphs of " + ", ".join(map(str, static_buffer.CAPTURE_SIZES[:-1]))
        + f" and {static_buffer.CAPTURE_SIZES[-1]} rows",
        f"batches of every size from 1 to {static_buffer.MAX_ROWS}",
        f"the last {' or '.join(str(n) for n in static_buffer.CAPTURE_SIZES[:-1])} entries",
    ]
    missing = [shape for shape in shapes if shape not in text]
    assert not missing, missing


def test_each_case_names_where_it_was_read():
    for case in record.CASES:
        text = " ".join(case.sources)
        assert re.search(r"`[\w/.]+\.py`", text), case.name
        assert re.search(r"commit `[0-9a-f]{7,}`|\b\d+\.\d+\.\d+\b|thread", text), case.name
        assert record.case(case.number) is case and record.case(case.key) is case and record.case(case.name) is case
    assert record.case("case 9") is None


# -- the cases' sentences against their references: no case cites what its record does not hold -------------

THREAD = re.compile(r"(?:(\b(?:PR|pull request|issue)) )?#(\d+)")
COMMIT = re.compile(r"commit `([0-9a-f]{7,40})`")


def _cited(text: str) -> tuple[set[tuple[str | None, str]], set[str]]:
    """The threads (with the word before the number, if any) and the commits a sentence names."""
    threads = {(word, number) for word, number in THREAD.findall(text)}
    return threads, set(COMMIT.findall(text))


def _words_for(kind: str) -> set[str]:
    return {"pull request": {"PR", "pull request"}, "issue": {"issue"}}[kind]


def check_case_sentences(case: record.Case) -> list[str]:
    """What is wrong with `case`'s sentences against its references, in words (empty: nothing)."""
    problems = []
    refs = {r.ref: r for r in case.refs}
    sources, fix = " ".join(case.sources), " ".join(case.fix)
    for where, text in (("sources", sources), ("fix", fix)):
        threads, commits = _cited(text)
        for word, number in threads:
            ref = refs.get(number)
            if ref is None or ref.kind == "commit":
                problems.append(f"{where} cites #{number}, which the record does not hold")
            elif word and word not in _words_for(ref.kind):
                problems.append(f"{where} calls #{number} {word!r}: the record says {ref.kind}")
        for commit in commits:
            if not any(r.kind == "commit" and (r.ref.startswith(commit) or commit.startswith(r.ref))
                       for r in case.refs):
                problems.append(f"{where} cites commit {commit}, which the record does not hold")
        others = [name for repo, name in record.ENGINES.items() if repo != case.report.repository]
        problems += [f"{where} names {name}: the case is {case.report.engine}'s" for name in others
                     if re.search(rf"\b{name}\b", text)]
    if case.report.kind not in ("issue", "pull request"):
        problems.append(f"the case is about a {case.report.kind}, not an issue or a pull request")
    called = "PR" if case.report.kind == "pull request" else "issue"
    if f"{case.report.engine} {called} #{case.report.ref}" not in sources:
        problems.append(f"the sources do not name {case.reported_in} as what it is")
    if case.fix_ref is None:
        if record.NO_FIX not in fix.lower():
            problems.append(f"the record holds no fix, and the fix sentence does not say {record.NO_FIX!r}")
    else:
        if case.fix_ref.repository != case.report.repository:
            problems.append(f"its fix is in {case.fix_ref.repository}, the case in {case.report.repository}")
        named = (f"#{case.fix_ref.ref}" in fix if case.fix_ref.kind != "commit"
                 else any(c.startswith(case.fix_ref.ref) or case.fix_ref.ref.startswith(c) for c in _cited(fix)[1]))
        if not named:
            problems.append(f"the fix sentence does not name the fix, {case.fix_ref.label}")
        if record.NO_FIX in fix.lower():
            problems.append("the fix sentence says no fix has landed, and the record holds one")
        if not re.search(r"`[\w/.]+\.py`|\.py`?\b|commit `", fix + " " + sources):
            problems.append("the fix is read at no file and commit")
    return problems


@pytest.mark.parametrize("case", record.CASES, ids=lambda c: c.name)
def test_each_case_cites_only_its_own_references_and_names_its_fix_or_says_none_landed(case):
    assert check_case_sentences(case) == []


def test_the_check_catches_a_fix_from_another_engine_a_foreign_thread_and_a_fix_it_does_not_have():
    from dataclasses import replace

    pool = record.case("shared-pool")
    borrowed = replace(pool, fix=("SGLang PR #35546 clones the selected hidden states.",))
    problems = check_case_sentences(borrowed)
    assert any("cites #35546" in p for p in problems) and any("names SGLang" in p for p in problems)
    assert any("does not say" in p for p in problems)
    claimed = replace(pool, fix_ref=record.Ref(record.SGLANG, "pull request", "35546", "a review"))
    assert any("its fix is in sgl-project/sglang" in p for p in check_case_sentences(claimed))
    tail = record.case("static-buffer")
    miscalled = replace(tail, sources=tuple(t.replace("SGLang PR #32555", "SGLang issue #32555") for t in tail.sources))
    assert any("calls #32555 'issue'" in p for p in check_case_sentences(miscalled))
    unrelated = replace(tail, fix=("SGLang PR #18647 zero-pads the padding slots of the draft buffers.",))
    assert any("cites #18647" in p for p in check_case_sentences(unrelated))
    assert any("does not name the fix" in p for p in check_case_sentences(unrelated))


def test_the_notebook_heads_each_case_with_its_title_and_its_thread_as_the_record_names_it():
    from labkit import paths

    nb = json.loads((paths.NOTEBOOKS / record.NOTEBOOK).read_text())
    headings = [line for c in nb["cells"] if c["cell_type"] == "markdown"
                for line in "".join(c["source"]).splitlines() if line.startswith("## Case ")]
    assert headings == [f"## Case {c.number} · {c.title} ({c.reported_in})" for c in record.CASES]


def test_the_order_and_the_engines_are_the_records():
    """The case book says in which order the cases were reported and which engines they come from as the
    records give them; no sentence claims a wider scope or another order."""
    from labkit import paths
    from labkit.docgen.family_blocks import render_order

    text = render_order()
    at = [text.index(c.reported_in) for c in record.CASES]
    dates = [c.report.date for c in record.CASES]
    assert [c.number for c in sorted(record.CASES, key=lambda c: at[c.number - 1])] == \
        [c.number for c in sorted(record.CASES, key=lambda c: dates[c.number - 1])]
    assert text.endswith(f"from {' and '.join(record.engines())}.") and set(record.engines()) == {"vLLM", "SGLang"}
    nb = json.loads((paths.NOTEBOOKS / record.NOTEBOOK).read_text())
    prose = " ".join(" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    family_map = (paths.REPO / "docs" / "VLLM_MAP.md").read_text().split("## The family, read")[1].split("\n## ")[0]
    for where, words in (("notebook 09", prose), ("docs/VLLM_MAP.md", " ".join(family_map.split()))):
        assert text.split(":")[0] in words, where
        for claim in (r"\bevery (serving )?engine\b", r"\ball (serving )?engines\b", r"\blater members\b"):
            assert not re.search(claim, words), (where, claim)


def test_the_command_prints_every_case_and_records_them(tmp_path, monkeypatch, capsys):
    from labkit import records
    from labkit.__main__ import main
    from labkit.family.record import CASES

    monkeypatch.setattr(records, "CPU_FAMILY", tmp_path / "family.json")
    monkeypatch.setattr(records.paths, "REPO", tmp_path)
    assert main(["family", "--record"]) == 0
    out = capsys.readouterr().out
    for case in CASES:
        assert f"case {case.number} · {case.title} ({case.reported_in})" in out
    written = json.loads((tmp_path / "family.json").read_text())
    assert written["provenance"]["command"] == "python -m labkit family --record"
    assert written["cases"] == json.loads(json.dumps(measure.measure("cpu")))


def test_the_notebook_shows_case_4_on_a_gpu_only_from_a_run_of_this_miniature():
    """A GPU record whose case-4 entry measured another miniature (or names none) is not rendered as this
    case's numbers: the sentence says the run is of an earlier miniature, and case 3's numbers stay."""
    from labkit.docgen.family_blocks import measures_current_case_4, render_gpu
    from labkit.gpu.family import KEYS
    from labkit.viz.gpu_records import load_record

    section = json.loads(json.dumps(measure.measure("cpu", keys=KEYS)))
    section["shared-pool"]["output_offset_bytes"] = {"buggy": 0, "owned": 512}
    stamp = {"section_provenance": {"family": {"device": "a test", "date": "2026-01-02", "torch": "x"}}}
    old = json.loads(json.dumps(section))
    del old["static-buffer"]["miniature"]
    old["static-buffer"]["symptom"]["buggy"]["unit"] = "live rows (batch size, row)"
    for entry, current in ((section, True), (old, False)):
        text = render_gpu({"family": entry, **stamp})
        assert measures_current_case_4(entry["static-buffer"]) == current
        assert ("tracked states wrong" in text) == current
        assert ("earlier miniature" in text) == (not current)
        assert "6 of 9 prompts' logprobs differed" in text
    shipped = (load_record() or {}).get("family", {})
    shown = render_gpu(load_record())
    if shipped and not measures_current_case_4(shipped.get("static-buffer")):
        assert "earlier miniature" in shown and "tracked states wrong" not in shown


def test_the_gpu_sections_logic_and_its_rendering_run_on_the_cpu_record():
    """What the GPU section adds (where the allocator put the outputs), its summary and the notebook's
    sentence, computed here from the emulation: the same code reads the H200's run."""
    from labkit.docgen.family_blocks import render_gpu
    from labkit.gpu.family import KEYS, output_offsets, summary_lines

    offsets = output_offsets("cpu")
    assert offsets["buggy"] == 0 and offsets["owned"] != 0
    section = {**measure.measure("cpu", keys=KEYS)}
    section["shared-pool"]["output_offset_bytes"] = offsets
    record = {"family": section, "section_provenance": {"family": {"device": "a test", "date": "2026-01-02",
                                                                   "torch": "x"}}}
    text = render_gpu(record)
    bug = section["shared-pool"]["symptom"]["buggy"]
    assert f"{bug['count']} of {bug['total']} prompts" in text and "at the address of the target graph's" in text
    assert "a test (`family`, 2026-01-02" in text and "real graphs: False" in text
    assert "holds no `family` section yet" in render_gpu({}) and "--sections family" in render_gpu(None)
    tail = section["static-buffer"]
    assert f"Case 4 (real graphs: {tail['real_graphs']}): batches of 5-8 right" in text
    assert f"{tail['symptom']['buggy']['count']} of {tail['symptom']['buggy']['total']} tracked states" in text
    lines = summary_lines(section)
    assert any("shared-pool, buggy" in line and "audit fails" in line for line in lines)
    assert lines[-1].endswith(f"buggy 0, owned {offsets['owned']}")


# -- on a GPU: real CUDA graphs, the caching allocator decides ---------------------------------------------

@gpu
@needs_compiled
def test_case_3_under_real_graphs_the_allocator_gives_the_drafter_the_target_graphs_memory():
    buggy = shared_pool.PromptScoring("buggy", device="cuda")
    assert buggy.target.real_graphs and buggy.drafter.real_graphs
    buggy.score(0)
    assert buggy.shares_memory(), "the caching allocator reused the freed output block"
    owned = shared_pool.PromptScoring("owned", device="cuda")
    owned.score(0)
    assert not owned.shares_memory()
    graphed = tuple(n for n in shared_pool.PROMPT_LENGTHS if n <= shared_pool.TARGET_CAPTURE_SIZES[-1])
    assert shared_pool.symptom("buggy", device="cuda").corrupted == graphed
    assert shared_pool.symptom("copied out", device="cuda").count == 0
    assert shared_pool.symptom("owned", device="cuda").count == 0
    assert not shared_pool.audit("buggy", device="cuda").passed
    assert shared_pool.audit("copied out", device="cuda").passed


@gpu
@needs_compiled
def test_case_4_under_real_graphs_only_the_largest_graph_comes_out_right():
    case = static_buffer.TrackSave("buggy", device="cuda")
    assert case.runner.real_graphs
    expected = tuple(n for n in static_buffer.BATCH_SIZES
                     if static_buffer.destinations_read("buggy", n) == list(range(n)))
    assert static_buffer.right_batch_sizes("buggy", device="cuda") == expected
    assert static_buffer.symptom("fixed", device="cuda").count == 0
    assert not static_buffer.audit("buggy", device="cuda").passed
    assert static_buffer.audit("fixed", device="cuda").passed


@gpu
@needs_compiled
def test_the_gpu_section_records_both_cases_and_where_the_outputs_went():
    from labkit.gpu.family import family_section, summary_lines

    section = family_section()
    pool = section["shared-pool"]
    assert pool["real_graphs"] and section["static-buffer"]["real_graphs"]
    assert section["static-buffer"]["miniature"] == static_buffer.MINIATURE
    assert pool["output_offset_bytes"]["buggy"] == 0 and pool["output_offset_bytes"]["owned"] != 0
    assert not pool["audit"]["buggy"]["passed"] and pool["audit"]["copied out"]["passed"]
    assert any("differ from eager" in line for line in summary_lines(section))
