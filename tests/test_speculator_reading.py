"""labkit.upstream.speculator_reading on small speculator shapes written here (no vLLM code): the
host fill found, its condition named, and its absence said."""

from __future__ import annotations

import textwrap
from pathlib import Path

from labkit.upstream.speculator_reading import SPEC_DECODE, read_speculators


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        path = tmp_path / SPEC_DECODE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    return tmp_path


FILL_ALWAYS = """
    class Drafter:
        def _copy_request_inputs(self, num_reqs, idx_mapping):
            self.idx_mapping[:num_reqs].copy_(idx_mapping)
            self.idx_mapping[num_reqs:].fill_(-1)
"""
FILL_GUARDED = """
    class Drafter:
        def _copy_request_inputs(self, num_reqs, idx_mapping):
            self.idx_mapping[:num_reqs].copy_(idx_mapping)
            if self.draft_logits is not None:
                self.idx_mapping[num_reqs:].fill_(-1)
"""
INLINE_NO_FILL = """
    class OldDrafter:
        def propose(self, batch, num_reqs):
            idx_mapping = self.idx_mapping[:num_reqs]  # a read, not a write
            self.idx_mapping[:num_reqs].copy_(batch.idx_mapping)
            return idx_mapping
"""
ASSIGNMENTS = """
    class Drafter:
        def copy(self, n, slots):
            self.idx_mapping[:n] = slots
            self.idx_mapping[n:] = -1
"""
FILL_ELSEWHERE = """
    class Drafter:
        def _copy_request_inputs(self, num_reqs, idx_mapping):
            self.idx_mapping[:num_reqs].copy_(idx_mapping)
            self._pad(num_reqs)

        def _pad(self, num_reqs):
            self.idx_mapping[num_reqs:].fill_(-1)
"""


def test_an_unconditional_fill_is_found_with_its_line(tmp_path):
    reading = read_speculators(_tree(tmp_path, {"speculator.py": FILL_ALWAYS}))
    (copy,) = reading.copies
    assert copy.function == "Drafter._copy_request_inputs" and copy.unconditional
    assert copy.pad_fills[0].line == 5 and copy.pad_fills[0].code == "self.idx_mapping[num_reqs:].fill_(-1)"
    assert reading.fills_padded_rows is True
    assert "on every step" in copy.sentence() and copy.sentence().endswith(": yes")


def test_a_guarded_fill_names_its_condition(tmp_path):
    reading = read_speculators(_tree(tmp_path, {"speculator.py": FILL_GUARDED}))
    (copy,) = reading.copies
    assert copy.fills_padded_rows and not copy.unconditional
    assert copy.pad_fills[0].conditions == ["if self.draft_logits is not None"]
    assert "only if self.draft_logits is not None" in copy.sentence()


def test_an_inline_copy_without_fill_says_no_and_reads_are_not_writes(tmp_path):
    reading = read_speculators(_tree(tmp_path, {"eagle/speculator.py": INLINE_NO_FILL}))
    (copy,) = reading.copies
    assert copy.function == "OldDrafter.propose" and copy.live_copy.line == 5
    assert reading.fills_padded_rows is False
    assert reading.lines()[-1] == "speculator fills padded rows with -1: no"


def test_assignments_count_as_the_copy_and_the_fill(tmp_path):
    reading = read_speculators(_tree(tmp_path, {"speculator.py": ASSIGNMENTS}))
    assert reading.fills_padded_rows is True


def test_a_fill_in_a_helper_of_the_same_file_is_followed_and_named(tmp_path):
    reading = read_speculators(_tree(tmp_path, {"speculator.py": FILL_ELSEWHERE}))
    (copy,) = reading.copies
    assert reading.fills_padded_rows is True and reading.part()["state"] == "fills"
    assert "Drafter._copy_request_inputs" in copy.sentence() and "in Drafter._pad, called on line" in copy.sentence()


FILL_THROUGH_A_PARAMETER = """
    def pad_rows(buffer, n):
        buffer[n:] = -1

    class Drafter:
        def _copy_request_inputs(self, num_reqs, idx_mapping):
            live = self.idx_mapping[:num_reqs]
            live.copy_(idx_mapping)
            pad_rows(self.idx_mapping, num_reqs)
"""
FILL_IN_ANOTHER_FILE = """
    from elsewhere import pad_rows

    class Drafter:
        def _copy_request_inputs(self, num_reqs, idx_mapping):
            self.idx_mapping[:num_reqs].copy_(idx_mapping)
            pad_rows(self.idx_mapping, num_reqs)
            use(self.idx_mapping[:num_reqs])  # the live rows only: nothing to follow
"""


def test_a_helper_given_the_buffer_is_followed_and_one_of_another_file_is_named_not_judged(tmp_path):
    reading = read_speculators(_tree(tmp_path, {"a/speculator.py": FILL_THROUGH_A_PARAMETER}))
    assert reading.part()["state"] == "fills" and "in pad_rows" in reading.copies[0].pad_fills[0].code
    elsewhere = read_speculators(_tree(tmp_path / "b", {"speculator.py": FILL_IN_ANOTHER_FILE}))
    part = elsewhere.part()
    assert part["state"] == "unknown" and "hands idx_mapping to another file's function" in part["says"]
    (copy,) = elsewhere.copies
    assert [c.code for c in copy.unfollowed] == ["pad_rows(self.idx_mapping, num_reqs)"]
    assert "could not follow" in copy.sentence()


def test_an_unreadable_file_is_named_and_the_others_still_read(tmp_path):
    tree = _tree(tmp_path, {"speculator.py": FILL_ALWAYS, "broken.py": "def f(:\n"})
    (tree / SPEC_DECODE / "latin.py").write_bytes(b"x = '\xff'\n")
    (tree / SPEC_DECODE / "folder.py").mkdir()
    reading = read_speculators(tree)
    assert reading.fills_padded_rows is True and len(reading.unreadable) == 3
    assert any("SyntaxError" in u and "line 1" in u for u in reading.unreadable)
    assert any("not UTF-8" in u for u in reading.unreadable)
    assert any("is a folder where the kit expects a Python file" in u for u in reading.unreadable)


def test_a_tree_without_speculators_says_so(tmp_path):
    reading = read_speculators(tmp_path)
    assert reading.fills_padded_rows is None and "no " + SPEC_DECODE in reading.lines()[0]


# -- the host fill, run in the kit's scenario (labkit.upstream.host_step_run) ----------------------------------
# The reading above finds the function that copies the live slots; the run decides what the captured
# buffer's padded row holds when the graph replays. Each broken shape below has a statement the reading
# alone took for a fill.

def _host(tmp_path, body: str, caller: str = "") -> dict:
    from labkit.upstream.host_step_run import audit_host_fill

    source = "import torch\n\n" + textwrap.dedent(body) + textwrap.dedent(caller or """
        class Drafter2(Drafter):
            def propose(self, num_reqs, batch):
                self._copy_request_inputs(num_reqs, batch, None, None)
    """)
    (tmp_path / SPEC_DECODE).mkdir(parents=True, exist_ok=True)
    (tmp_path / SPEC_DECODE / "speculator.py").write_text(source)
    return audit_host_fill(tmp_path).part()


COPY = """
    class Drafter:
        def _copy_request_inputs(self, num_reqs, idx_mapping, temperature, seeds):
            self.idx_mapping[:num_reqs].copy_(idx_mapping)
            {fill}
"""


def test_a_fill_the_run_shows_is_a_fill_and_its_row_is_named(tmp_path):
    part = _host(tmp_path, COPY.format(fill="self.idx_mapping[num_reqs:].fill_(-1)"))
    assert part["state"] == "fills" and "row 7 held -1" in part["says"], part
    assert part["runs"][0]["padded_rows"] == [-1] and part["runs"][0]["live_rows"] == [0, 1, 2, 4, 5, 6, 7]


def test_fills_the_reading_took_for_a_fill_are_shown_not_to_be_one(tmp_path):
    for i, fill in enumerate(("self.idx_mapping[num_reqs + 1:].fill_(-1)",  # off by one: the padded row is missed
                              # false exactly when the graph pads
                              "if num_reqs == self.max_num_reqs: self.idx_mapping[num_reqs:].fill_(-1)",
                              "self.idx_mapping[num_reqs:].fill_(-1); self.idx_mapping[num_reqs:] = idx_mapping[0]")):
        reading = read_speculators(_tree(tmp_path / str(i), {"speculator.py": COPY.format(fill=fill)}))
        assert reading.part()["state"] == "fills", fill  # the statement's shape: what the reading alone said
        part = _host(tmp_path / f"run{i}", COPY.format(fill=fill))
        assert part["state"] == "no fill", (fill, part)


def test_a_condition_the_scenario_cannot_decide_or_a_write_elsewhere_is_could_not_judge(tmp_path):
    unknown_attribute = _host(tmp_path / "a", COPY.format(
        fill="if not self.use_cuda_graphs: self.idx_mapping[num_reqs:].fill_(-1)"))
    assert unknown_attribute["state"] == "unknown" and "reads self.use_cuda_graphs" in unknown_attribute["says"]
    later = _host(tmp_path / "b", COPY.format(fill="self.idx_mapping[num_reqs:].fill_(-1)"), """
        class Drafter2(Drafter):
            def propose(self, num_reqs, batch):
                self._copy_request_inputs(num_reqs, batch, None, None)
                self.idx_mapping[num_reqs:].fill_(0)
    """)
    assert later["state"] == "unknown" and "calls fill_ on self.idx_mapping outside the host fill" in later["says"]
    conditional = _host(tmp_path / "c", COPY.format(fill="self.idx_mapping[num_reqs:].fill_(-1)"), """
        class Drafter2(Drafter):
            def propose(self, num_reqs, batch, eager):
                if eager:
                    self._copy_request_inputs(num_reqs, batch, None, None)
    """)
    assert conditional["state"] == "unknown" and "only under a condition" in conditional["says"]


def test_the_fix_written_another_way_is_shown_to_fill(tmp_path):
    for i, fill in enumerate(("pad = self.idx_mapping[num_reqs:]; pad.fill_(-1)",
                              "self.idx_mapping[num_reqs:] = torch.full_like(self.idx_mapping[num_reqs:], -1)",
                              "self._pad(num_reqs)\n\n        def _pad(self, n):\n"
                              "            self.idx_mapping[n:] = -1")):
        part = _host(tmp_path / str(i), COPY.format(fill=fill))
        assert part["state"] == "fills", (fill, part)
