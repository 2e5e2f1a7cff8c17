"""What every checker shares: verdicts, hints, guarded memory, and a workshop that works without Triton."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap

import pytest
from workshop_helpers import assert_rejected, kept_answers  # noqa: F401 (autouse)

import labkit  # noqa: F401  (first: sets TRITON_INTERPRET)
from labkit import backends
from labkit.workshop import checkers as ex
from labkit.workshop.checkers import tl, triton
from labkit.workshop.feedback import CheckResult, Shown, never_raises, verdict_html

needs_interpreter = pytest.mark.skipif(not backends.KERNELS_INTERPRETED, reason="the access log needs the interpreter")


def test_hints_give_more_away_step_by_step_and_only_the_last_shows_the_fix():
    for exercise, fix in (("a", "= -1"), ("c", "= -1"), ("b-triton", "mask="), ("b-torch", "continue"),
                          ("d-triton", "tl.int64"), ("d-torch", "torch.int64")):
        hints = [repr(ex.hint(exercise, n)) for n in (1, 2, 3)]
        assert hints[0].startswith(f"Hint 1/3 for ({exercise[0]}")
        assert "(the fix)" in hints[2] and fix in hints[2]
        assert all(fix not in h and "(the fix)" not in h for h in hints[:2]), exercise
    assert "Hint 2/3" in repr(ex.hint("(a)", 2))


def test_hints_never_raise():
    assert "no exercise 'z'" in repr(ex.hint("z"))
    assert "hints 1 to 3" in repr(ex.hint("b", 9))
    assert "hints 1 to 3" in repr(ex.hint("a", "2"))


def test_a_result_shows_its_warnings_and_is_true_only_when_solved():
    result = CheckResult("a", True, "Exercise (a) solved. Fine.", ["something to know"])
    assert bool(result) and repr(result) == "Exercise (a) solved. Fine.\nWarning: something to know"
    assert not CheckResult("a", False, "Exercise (a) not solved yet: no.")


class _Part(Shown):
    def text(self) -> str:
        return "part as text"

    def html(self) -> str:
        return "<p>part</p>"


def test_a_result_shows_what_it_carries_below_its_verdict():
    plain = CheckResult("b", False, "Exercise (b) not solved yet: <row 7>.", notes=["(a note)"])
    assert repr(plain) == "Exercise (b) not solved yet: <row 7>.\n(a note)"
    assert plain._repr_html_() == verdict_html(repr(plain), solved=False)  # nothing below the verdict
    shown = CheckResult("b", False, "Exercise (b) not solved yet: <row 7>.", launch=_Part(), reveal=_Part())
    assert shown._repr_html_() == verdict_html("Exercise (b) not solved yet: <row 7>.", False) + "<p>part</p>" * 2
    assert repr(shown) == "Exercise (b) not solved yet: <row 7>.\n\npart as text\n\npart as text"


def test_a_verdict_shows_as_html_that_wraps_by_word_with_its_code_as_code():
    """JupyterLab may break plain-text output inside a word ("a fter"); the HTML wraps at spaces only."""
    text = "Exercise (a) not solved yet: after your `copy_idx_mapping` the rejection sampler verifies <q>.\nNext line."
    page = verdict_html(text, solved=False)
    style = re.search(r'style="([^"]*)"', page).group(1)
    assert "word-break:normal" in style and "white-space:pre-wrap" in style  # spaces wrap, words stay whole
    assert "<code>copy_idx_mapping</code>" in page and "&lt;q&gt;" in page and "\nNext line" in page
    assert verdict_html(text, True) != page  # solved and not solved look different
    body = re.sub(r"<[^>]+>", "", page)
    assert html.unescape(body) == text.replace("`", "")  # the words themselves are unchanged


def test_a_fault_inside_a_checker_is_reported_not_raised():
    @never_raises("z")
    def check(_):
        raise KeyError("the kit's own bug")

    result = check(None)
    assert not result.solved and "the kit stopped with KeyError" in result.message


@triton.jit
def kernel_wild(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                vocab_size, salt, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(mapping_ptr + row)
    temp = tl.load(temperature_ptr + slot * 1000000)  # far outside every buffer for slot -1
    tl.store(token_ptr + row, temp.to(tl.int64))


@needs_interpreter
def test_an_access_outside_every_buffer_is_refused_before_it_happens():
    result = ex.check_kernel(kernel_wild)
    assert_rejected(result, "outside every buffer", "stopped it before it happened", "padded rows are 7")
    # The drawing replays the launch row by row: every row but slot 0's reaches a million rows away.
    assert result.launch.hits == [f"row {r} (slot {s}) reached memory outside every buffer (the checker stopped it)"
                                  for r, s in enumerate([0, 1, 2, 4, 5, 6, 7, -1]) if s != 0]


_WITHOUT_TRITON = textwrap.dedent("""
    import sys
    sys.modules["triton"] = None  # as on macOS and Windows: no Triton at all
    import torch
    from labkit import backends
    from labkit.kernels.noise import gumbel_torch, row_key_torch
    from labkit.workshop import checkers as ex
    assert backends.backend() == "torch" and not backends.HAS_TRITON

    def gumbel_rows(logits, idx_mapping, temperature, seeds, positions, q, salt):
        tokens = torch.zeros(logits.shape[0], dtype=torch.int64)
        for row in range(logits.shape[0]):
            slot = int(idx_mapping[row])
            if slot < 0:
                continue
            temp = float(temperature[slot])
            scaled = logits[row] / temp if temp else logits[row]
            q[slot] = scaled
            noise = gumbel_torch(row_key_torch(seeds[slot], positions[row], salt), torch.arange(logits.shape[1]))
            tokens[row] = (scaled + noise).argmax() if temp else scaled.argmax()
        return tokens

    def q_offset(slot, step, stride_slot, stride_step):
        return slot.to(ex.tl.int64) * stride_slot + step * stride_step  # the stand-in tl of notebook 07

    @ex.triton.jit  # the stand-in: the Triton cell still defines its function
    def gumbel_kernel(logits_ptr, mapping_ptr, temperature_ptr, seeds_ptr, pos_ptr, q_ptr, token_ptr,
                      vocab_size, salt, BLOCK_V: ex.tl.constexpr):
        pass

    print(ex.check_kernel(gumbel_rows).solved, ex.check_offset(q_offset).solved)
    print(ex.check_kernel({"gumbel_kernel": gumbel_kernel}).message)
""")


def test_the_workshop_imports_and_checks_torch_versions_without_triton():
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    out = subprocess.run([sys.executable, "-c", _WITHOUT_TRITON], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "True True"
    assert "Triton cannot run on this machine" in lines[1] and "gumbel_rows" in lines[1]


def test_importing_the_checkers_imports_no_triton_of_its_own():
    import ast
    from pathlib import Path

    for path in Path(ex.__file__).parent.glob("*.py"):
        if path.name == "offset_kernels.py":
            continue  # the two harness kernels, imported only where Triton runs
        tree = ast.parse(path.read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [n.module for n in top if isinstance(n, ast.ImportFrom)]
        assert not any(name and name.split(".")[0] == "triton" for name in names), path.name
