"""GPU tests, and the CPU side of ``python -m labkit gpu``.

Tests marked ``gpu`` run on a CUDA GPU with the compiled backend (skipped without CUDA:
tests/conftest.py): compiled kernels against their torch references, the sampling distribution,
the race between colliding rows, compute-sanitizer's memcheck, the toy models' batch invariance,
and the bug end to end under real CUDA graphs. The unmarked tests run anywhere: the command line,
the record it writes, memcheck's report parsing, and the race's bookkeeping in the interpreter.

What differs from the CPU interpreter, and how the checks allow for it:

* programs run concurrently, so when two rows store to one slot the winner is a race. Where rows
  collide, the tests assert what holds for every order: each element of q equals one candidate's
  value, and the collision itself (two stores counted) is there; never which row won;
* the compiled kernel scales by a correctly rounded reciprocal and takes its outer log from the
  hardware lg2 unit (``fast_math``), so stored q agrees with ``logits / T`` to 1e-6 relative and
  sampled tokens agree with the reference except at float-rounding ties (none in these cases).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from labkit import backends
from labkit.errors import LabkitInputError
from labkit.gpu import cli
from labkit.gpu.records import RECORD_NAME
from labkit.gpu.sanitizer import parse_memcheck
from labkit.gpu.sections import SECTIONS, Section
from labkit.records import add_command
from labkit.records import read as read_record
from labkit.records import write as write_record

DEVICE = "cuda"
REPO = Path(__file__).resolve().parents[1]
gpu = pytest.mark.gpu
needs_compiled = pytest.mark.skipif(backends.backend() != "triton",
                                    reason="needs the compiled Triton backend (LABKIT_BACKEND=triton)")
needs_interpreter = pytest.mark.skipif(not backends.KERNELS_INTERPRETED,
                                       reason="needs Triton's CPU interpreter (programs in grid order)")


# -- the command line and its record (any machine) ----------------------------------------------------

def test_cli_lists_every_section(capsys):
    assert cli.main(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(SECTIONS)
    assert {"race_blocks", "torch_natural", "sanitizer"} <= set(listed)


@pytest.mark.parametrize("argv", [["--sections", "kernel"], ["--out", "x", "--sections", "kernel,nope"],
                                  ["--out", "x", "--sections", ","]])
def test_cli_refuses_a_missing_out_or_unknown_sections(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--out" in err or "nope" in err or "no section" in err


def test_parse_sections_keeps_order_and_reports_unknown_names():
    assert cli.parse_sections(" race_blocks, kernel ,x,") == (["race_blocks", "kernel"], ["x"])


def test_python_m_labkit_gpu_without_cuda_says_why_and_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_BACKEND", "TRITON_INTERPRET")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO))  # hides a GPU where there is one
    out = tmp_path / "rec"
    done = subprocess.run([sys.executable, "-m", "labkit", "gpu", "--out", str(out), "--sections", "race_blocks"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("python -m labkit gpu: error: needs a CUDA device")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists(), "nothing is written when nothing can be measured"


def test_record_is_rewritten_whole_and_appends_name_each_command(tmp_path):
    path = tmp_path / RECORD_NAME
    write_record(path, {"provenance": {"command": "python -m labkit gpu --out a"}, "kernel": {"sizes": []}})
    record = add_command(read_record(path), "python -m labkit gpu --out a --append --sections race")
    record["race"] = {"launches": 3}
    write_record(path, record)
    again = read_record(path)
    assert again["provenance"]["commands"] == ["python -m labkit gpu --out a",
                                               "python -m labkit gpu --out a --append --sections race"]
    assert again["race"] == {"launches": 3} and again["kernel"] == {"sizes": []}
    assert [p.name for p in tmp_path.iterdir()] == [RECORD_NAME]  # no temporary file left behind


def test_a_failing_section_is_recorded_and_the_others_still_run(tmp_path):
    def boom(quick):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    registry = {"first": Section("first", "", lambda quick: {"quick": quick}),
                "broken": Section("broken", "", boom),
                "last": Section("last", "", lambda quick: {"value": 1})}
    path = tmp_path / RECORD_NAME
    record = cli.run_sections(["first", "broken", "last"], {"provenance": {}}, path, quick=True,
                              registry=registry, log=lambda msg: None)
    on_disk = json.loads(path.read_text())
    assert on_disk == record
    assert record["first"] == {"quick": True} and record["last"] == {"value": 1}
    assert "illegal memory access" in record["broken"]["error"]
    assert set(record["section_seconds"]) == {"first", "broken", "last"}


def test_summary_names_failed_sections_and_reads_the_new_ones():
    from labkit.gpu.summary import summary_lines

    entry = {"vocab": 30, "num_blocks": 1, "block_v": 32, "launches": 4, "mixed_blocks": 0,
             "padded_share_per_launch": [1.0, 0.0, 1.0, 1.0], "whole_launch_wins": {"padded": 3, "live": 1}}
    record = {"provenance": {}, "race_blocks": {"vocab_30": entry},
              "sanitizer": {"fixed": {"errors": 0, "invalid_reads": 0, "invalid_writes": 0},
                            "fill_only": {"errors": 5, "invalid_reads": 4, "invalid_writes": 1}},
              "kernel": {"error": "RuntimeError: boom"}}
    text = "\n".join(summary_lines(record))
    assert "won by the padded row 3, by the live row 1, of 4; padded share of q 75.0%" in text
    assert "memcheck, fill_only: 5 errors (4 invalid reads, 1 invalid writes)" in text
    assert text.rstrip().endswith("failed (their error is in the record): kernel")


MEMCHECK_REPORT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at gumbel_sample_kernel+0x2d0
=========     by thread (0,0,0) in block (7,0,0)
=========     Address 0x7f00000001fc is out of bounds
=========     and is 4 bytes before the nearest allocation at 0x7f0000000200 of size 32 bytes
========= Invalid __global__ read of size 8 bytes
=========     at gumbel_sample_kernel+0x2f0
========= Invalid __global__ write of size 4 bytes
=========     at gumbel_sample_kernel+0x400
PROBE {"case": "fill_only", "launched": true, "cuda_error": "RuntimeError: unspecified launch failure", "refused": null}
========= ERROR SUMMARY: 3 errors
"""


def test_memcheck_report_is_counted():
    r = parse_memcheck(MEMCHECK_REPORT)
    assert (r["errors"], r["invalid_reads"], r["invalid_writes"]) == (3, 2, 1)
    assert r["probe"]["case"] == "fill_only" and r["probe"]["launched"]
    assert any("4 bytes before" in line for line in r["excerpt"])
    clean = parse_memcheck("PROBE {\"case\": \"fixed\"}\n========= ERROR SUMMARY: 0 errors\n")
    assert (clean["errors"], clean["invalid_reads"], clean["invalid_writes"]) == (0, 0, 0)
    assert parse_memcheck("compute-sanitizer: command not found")["errors"] is None


@needs_interpreter
@pytest.mark.parametrize("fixed", [False, True])
def test_race_bookkeeping_where_programs_run_in_grid_order(fixed):
    """In the interpreter the padded row 7 runs after the live row 6 in every vocab block, so the
    race has one outcome: the padded row everywhere before the fix, the live row after it."""
    from labkit.gpu.race import race_blocks

    # Three blocks of 1024, the last one partial, over two launches (the interpreter runs each
    # 1024-lane block's argmax lane by lane: a few blocks show the rule as well as many).
    launches = 2
    r = race_blocks(2100, launches, block_v=1024, fixed=fixed, device="cpu")
    assert (r["num_blocks"], r["rows"], r["slot"], r["neither_elements"]) == (3, [6, 7], 7, 0)
    assert r["mapping"][7] == (-1 if fixed else 7)
    won = 0 if fixed else launches
    assert r["padded_wins_per_block"] == [won] * 3
    assert r["example_owner"] == [0 if fixed else 1] * 3
    assert r["padded_share_per_launch"] == [0.0 if fixed else 1.0] * launches
    assert r["whole_launch_wins"] == {"padded": won, "live": launches - won} and r["mixed_blocks"] == 0


# -- kernels against references (GPU) -------------------------------------------------------------------

def _case(seed, rows, vocab, M=16, padded=0, stale=False, greedy_slots=()):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    live = rows - padded
    slots = torch.randperm(M, device=DEVICE, generator=g)[:live].to(torch.int32)
    if stale and live:
        pad = slots[torch.randint(0, live, (padded,), device=DEVICE, generator=g)]
    else:
        pad = torch.full((padded,), -1, dtype=torch.int32, device=DEVICE)
    mapping = torch.cat([slots, pad])
    temperature = 0.5 + torch.rand(M, device=DEVICE, generator=g)
    temperature[list(greedy_slots)] = 0.0
    seeds = torch.randint(0, 2**62, (M,), device=DEVICE, generator=g)
    logits = 3 * torch.randn(rows, vocab, device=DEVICE, generator=g)
    positions = torch.randint(0, 5000, (rows,), device=DEVICE, generator=g)
    return logits, mapping, temperature, seeds, positions


def _collided_q_is_made_of_candidates(q_slot, logits, rows_here, t) -> bool:
    cands = torch.stack([logits[r] / t if float(t) != 0.0 else logits[r] for r in rows_here])
    return bool(torch.isclose(q_slot[None, :], cands, rtol=1e-6, atol=0).any(dim=0).all())


@gpu
@needs_compiled
@pytest.mark.parametrize("vocab", [30, 1000, 4097, 32000, 151936])
@pytest.mark.parametrize("padded,stale", [(0, False), (3, False), (3, True)])
@pytest.mark.parametrize("fast_math", [0, 2])
def test_compiled_gumbel_kernel_matches_torch_reference(vocab, padded, stale, fast_math):
    from labkit.kernels import SamplingState, WriteTrace, gumbel_sample, gumbel_sample_torch

    rows, M, k = 9, 16, 3
    logits, mapping, temperature, seeds, positions = _case(vocab + padded, rows, vocab, M, padded, stale,
                                                           greedy_slots=(0, 5))
    masked = True if (padded and not stale) else fast_math == 0
    q_k = torch.full((M, k, vocab), 7.0, device=DEVICE)
    q_t = q_k.clone()
    tr_k, tr_t = WriteTrace.empty(M, k, DEVICE), WriteTrace.empty(M, k, DEVICE)
    t_k = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q_k), draft_step=1, masked=masked,
                        trace=tr_k, fast_math=fast_math)
    t_t = gumbel_sample_torch(logits, SamplingState(mapping, temperature, seeds, positions, q_t), draft_step=1,
                              masked=masked, trace=tr_t)
    assert torch.equal(t_k, t_t)
    assert torch.equal(tr_k.writes, tr_t.writes)  # counted atomically: the same in every order
    slots = mapping.tolist()
    collided = {s for s in slots if s >= 0 and slots.count(s) > 1}
    for slot in range(M):
        if slot in collided:
            rows_here = [r for r, s in enumerate(slots) if s == slot]
            assert int(tr_k.writer[slot, 1]) in rows_here
            assert _collided_q_is_made_of_candidates(q_k[slot, 1], logits, rows_here, temperature[slot]), \
                "a collided q element matches no candidate row"
        else:
            torch.testing.assert_close(q_k[slot], q_t[slot], rtol=1e-6, atol=0)
            assert torch.equal(tr_k.writer[slot], tr_t.writer[slot])
    assert torch.all(q_k[:, 0] == 7.0) and torch.all(q_k[:, 2] == 7.0)


@gpu
@needs_compiled
@pytest.mark.parametrize("block_v,num_warps", [(None, None), (1024, 4), (2048, 4), (8192, 16)])
@pytest.mark.parametrize("samples_per_req", [1, 4])
def test_block_configurations_and_dflash_rows_agree(block_v, num_warps, samples_per_req):
    from labkit.kernels import SamplingState, gumbel_sample, gumbel_sample_torch

    rows, vocab, M, k = 16, 128256, 8, 4
    logits, mapping, temperature, seeds, positions = _case(3, rows, vocab, M=M * 4)
    mapping = torch.arange(rows // samples_per_req, dtype=torch.int32, device=DEVICE)
    mapping = mapping.repeat_interleave(samples_per_req)
    q_k = torch.zeros(M * 4, k, vocab, device=DEVICE)
    q_t = q_k.clone()
    t_k = gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q_k), draft_step=0,
                        samples_per_req=samples_per_req, block_v=block_v, num_warps=num_warps)
    t_t = gumbel_sample_torch(logits, SamplingState(mapping, temperature, seeds, positions, q_t), draft_step=0,
                              samples_per_req=samples_per_req)
    assert torch.equal(t_k, t_t)
    torch.testing.assert_close(q_k, q_t, rtol=1e-6, atol=0)  # no two rows share a (slot, step)


@gpu
@needs_compiled
def test_early_exit_keeps_live_rows_and_skips_padded_ones():
    from labkit.kernels import SamplingState, gumbel_sample

    logits, mapping, temperature, seeds, positions = _case(4, 64, 151936, M=64, padded=30)
    outs = []
    for early in (False, True):
        q = torch.full((64, 1, 151936), 5.0, device=DEVICE)
        outs.append((gumbel_sample(logits, SamplingState(mapping, temperature, seeds, positions, q), draft_step=0,
                                   early_exit=early), q))
    (t0, q0), (t1, q1) = outs
    assert torch.equal(t0[:34], t1[:34]) and torch.equal(q0, q1)
    untouched = torch.ones(64, dtype=torch.bool, device=DEVICE)
    untouched[mapping[:34].long()] = False
    assert torch.all(q1[untouched] == 5.0)


@gpu
@needs_compiled
@pytest.mark.parametrize("rows,vocab,block_v", [(9, 4097, None), (64, 151936, None), (512, 128256, None),
                                                (256, 151936, 1024)])
def test_the_single_pass_matches_two_passes_in_every_graph_replay(rows, vocab, block_v):
    """The packed words and their read-out launch on the GPU (started early by programmatic dependent
    launch where the GPU has it): the same tokens as the reduction in torch, replay after replay of
    one graph."""
    from labkit.gpu.kernel import kernel_case
    from labkit.gpu.timing import graphed
    from labkit.kernels.gumbel import kernel_launcher

    case = kernel_case(rows, vocab, padded=rows // 4, seed=rows)
    two, two_finish = kernel_launcher(*case, draft_step=1, block_v=block_v, single_pass=False)
    two()
    want = two_finish().clone()
    one, one_finish = kernel_launcher(*case, draft_step=1, block_v=block_v, single_pass=True)

    def call():
        one()
        return one_finish()

    tokens = call()
    replay = graphed(call, 3)  # three calls per replay
    for _ in range(10):
        tokens.fill_(-1)
        replay()
        torch.cuda.synchronize()
        assert torch.equal(tokens, want)


if backends.HAS_TRITON:
    import triton
    import triton.language as tl

    from labkit.kernels.noise import row_key, uniform

    @triton.jit
    def _uniform_kernel(seed_ptr, pos_ptr, out_ptr, base, n, salt, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        key = row_key(tl.load(seed_ptr + row), tl.load(pos_ptr + row), salt)
        tl.store(out_ptr + row * n + offs, uniform(key, base + offs), mask=offs < n)


def _first_all_ones_draw(key, n):
    """Indices of `key` whose hash has its top 24 bits all ones (1 in 2**24 draws)."""
    from labkit.kernels.noise import GOLDEN, MASK32, mix32_torch

    for base in range(0, 1 << 28, n):
        idx = torch.arange(base, base + n, device=DEVICE)
        top = mix32_torch(key ^ ((idx * GOLDEN) & MASK32)) >> 8
        hits = (top == (1 << 24) - 1).nonzero().flatten()
        if len(hits):
            return base, idx, top, hits
    raise AssertionError("no all-ones draw in 2**28 indices (expected about 16)")


@gpu
@needs_compiled
def test_noise_is_bit_identical_and_never_reaches_one():
    """Triton's hash and torch's agree bit for bit on the GPU; and the 24-bit value that used to
    round to u = 1.0 (an infinite Gumbel noise) gives the largest float below 1 in both."""
    from labkit.kernels.noise import U_MAX, row_key_torch, uniform_torch

    n, salt = 1 << 22, 0x2545F491
    seed = torch.tensor([123456789012345, 7, 2**61 + 3], device=DEVICE)
    pos = torch.tensor([0, 40, 99999], device=DEVICE)
    out = torch.empty(3, n, device=DEVICE)
    _uniform_kernel[(3, n // 1024)](seed, pos, out, 0, n, salt, BLOCK=1024)
    keys = row_key_torch(seed, pos, salt)
    ref = uniform_torch(keys[:, None], torch.arange(n, device=DEVICE)[None, :])
    assert torch.equal(out, ref)
    assert 0.0 < float(out.min()) and float(out.max()) <= U_MAX < 1.0
    key = keys[:1]
    base, idx, top, hits = _first_all_ones_draw(key, n)
    raw = ((top[hits[0]]).to(torch.float32) + 0.5) * (1.0 / (1 << 24))
    assert float(raw) == 1.0, "without the clamp float32 rounding gives exactly 1.0"
    _uniform_kernel[(1, n // 1024)](seed[:1], pos[:1], out, base, n, salt, BLOCK=1024)
    assert float(out[0, hits[0]]) == U_MAX
    assert float(uniform_torch(key, idx[hits[0]])) == U_MAX


@gpu
@needs_compiled
@pytest.mark.parametrize("fast_math", [0, 1, 2])
def test_sampling_is_distributed_as_softmax_small_vocab(fast_math):
    """Token frequencies over 2**20 seeds against softmax(logits / T): a chi-square test."""
    from labkit.gpu.correctness import small_vocab_distribution

    r = small_vocab_distribution(fast_math)
    assert r["z"] < 4.5, f"chi-square {r['chi2']:.1f} on {r['dof']} dof (z = {r['z']:.1f}): not softmax"


@gpu
@needs_compiled
def test_sampling_tail_at_a_real_vocabulary_and_fast_math_agrees_with_exact():
    """At vocab 151936 the winning Gumbel values come from u within ~1e-5 of 1, where the inner log
    needs relative accuracy. Tokens fall in 4 classes (index % 4) with logits 0, .5, 1, 1.5: class
    frequencies over 65536 draws against softmax; and fast math picks the same tokens as exact math."""
    from labkit.gpu.correctness import real_vocab_distribution

    r = real_vocab_distribution()
    fast = r["vocab_151936_fast2"]
    assert r["vocab_151936_tokens_fast2_vs_fast0_differ"] <= 2, r
    assert fast["chi2"] < 20.0, f"class frequencies {fast['class_counts']} vs {fast['expected']}"


@gpu
@needs_compiled
@pytest.mark.parametrize("pad_value", [0, -1])
@pytest.mark.parametrize("num_reqs", [0, 3, 16])
def test_compiled_dflash_prepare_matches_reference(pad_value, num_reqs):
    from labkit.kernels import prepare_dflash_sample_mapping

    M, k = 16, 4
    mapping = torch.randperm(M, device=DEVICE).to(torch.int32)
    positions = torch.randint(0, 100, (M,), device=DEVICE)
    outs = []
    for backend in ("triton", "torch"):
        sm = torch.full((M * k,), 99, dtype=torch.int32, device=DEVICE)
        sp = torch.full((M * k,), 99, dtype=torch.int64, device=DEVICE)
        prepare_dflash_sample_mapping(mapping, positions, sm, sp, num_reqs=num_reqs, k=k,
                                      pad_value=pad_value, backend=backend)
        outs.append((sm, sp))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@gpu
@needs_compiled
@pytest.mark.parametrize("vocab", [30, 1030, 32000])
@pytest.mark.parametrize("probabilistic", [True, False])
def test_compiled_rejection_kernel_matches_reference(vocab, probabilistic):
    from labkit.kernels import SamplingState, rejection_sample, rejection_sample_torch

    g = torch.Generator(device=DEVICE).manual_seed(vocab)
    n, k, M = 12, 3, 16
    target = 2 * torch.randn(n, k + 1, vocab, device=DEVICE, generator=g)
    mapping = torch.randperm(M, device=DEVICE, generator=g)[:n].to(torch.int32)
    temperature = 0.5 + torch.rand(M, device=DEVICE, generator=g)
    temperature[int(mapping[0])] = 0.0
    seeds = torch.randint(0, 2**62, (M,), device=DEVICE, generator=g)
    positions = torch.randint(0, 500, (n,), device=DEVICE, generator=g)
    q = 2 * torch.randn(M, k, vocab, device=DEVICE, generator=g) if probabilistic else None
    drafts = torch.randint(0, vocab, (n, k), device=DEVICE, generator=g)
    state = SamplingState(mapping, temperature, seeds, positions, q)
    a = rejection_sample(target, drafts, state, backend="triton")
    b = rejection_sample_torch(target, drafts, state)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.num_accepted, b.num_accepted)


def test_launch_config_keeps_the_interpreters_teaching_configuration():
    from labkit.kernels.gumbel_tuning import SINGLE_PASS, launch_config

    assert launch_config(7, 2049, interpreted=True) == dict(block_v=1024, num_warps=4, fast_math=0,
                                                            single_pass=False, pdl=False)
    assert launch_config(512, 151936, interpreted=False)["single_pass"] == SINGLE_PASS
    big = launch_config(512, 151936, interpreted=False)
    assert big["block_v"] >= 1024 and big["fast_math"] >= 1
    small = launch_config(1, 151936, interpreted=False)
    assert small["block_v"] == 1024  # one row: small blocks keep the GPU busy
    # Programmatic dependent launch is asked for compiled, and granted by the launch's own device only.
    from labkit.kernels.gumbel_tuning import DEPENDENT_LAUNCH, dependent_launch_on

    assert big["pdl"] == DEPENDENT_LAUNCH and not dependent_launch_on(torch.device("cpu"))
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
        assert dependent_launch_on(device) == (torch.cuda.get_device_capability(device)[0] >= 9)


# -- the torch samplers the benchmarks compare with ---------------------------------------------------

@gpu
@needs_compiled
def test_torch_hash_port_draws_the_kernels_tokens_and_stores_its_q():
    from labkit.gpu.kernel import kernel_case
    from labkit.gpu.torch_samplers import hash_port_sample
    from labkit.kernels import SamplingState, gumbel_sample

    logits, state = kernel_case(64, 32000)
    slots, temperature, seeds, positions, q = (
        state.idx_mapping, state.temperature, state.seeds, state.positions, state.draft_logits)
    q_port = q.clone()
    tokens = gumbel_sample(logits, SamplingState(slots, temperature, seeds, positions, q), draft_step=1, fast_math=0)
    port = hash_port_sample(logits, state.with_q(q_port), draft_step=1, vocab_index=torch.arange(32000, device=DEVICE))
    assert torch.equal(tokens, port)
    live = slots.long()
    torch.testing.assert_close(q_port[live, 1], q[live, 1], rtol=1e-6, atol=0)


@gpu
@needs_compiled
@pytest.mark.parametrize("name", ["rand_gumbel", "multinomial"])
def test_natural_torch_samplers_draw_from_softmax_and_store_q(name):
    from labkit.gpu.torch_samplers import NATURAL_SAMPLERS
    from labkit.kernels import SamplingState

    n, vocab, temp = 1 << 18, 32, 0.7
    g = torch.Generator(device=DEVICE).manual_seed(9)
    row = 2.0 * torch.randn(vocab, device=DEVICE, generator=g)
    logits = row.expand(n, vocab).contiguous()
    slots = torch.arange(n, dtype=torch.int32, device=DEVICE)
    q = torch.zeros(n, 1, vocab, device=DEVICE)
    zeros = torch.zeros(n, dtype=torch.int64, device=DEVICE)  # seeds and positions: unused by these samplers
    state = SamplingState(slots, torch.full((n,), temp, device=DEVICE), zeros, zeros, q)
    tokens = NATURAL_SAMPLERS[name](logits, state, draft_step=0)
    torch.testing.assert_close(q[:, 0], logits / temp)
    counts = torch.bincount(tokens, minlength=vocab).double()
    expected = torch.softmax(row.double() / temp, dim=0) * n
    keep = expected >= 5
    chi2, dof = float((((counts - expected) ** 2) / expected)[keep].sum()), int(keep.sum()) - 1
    assert (chi2 - dof) / math.sqrt(2 * dof) < 4.5, f"chi-square {chi2:.1f} on {dof} dof"


# -- the race ---------------------------------------------------------------------------------------------

@gpu
@needs_compiled
@pytest.mark.parametrize("vocab,graph", [(30, False), (30, True), (151936, False)])
def test_colliding_rows_race_and_q_is_always_one_rows_values(vocab, graph):
    """docs/MECHANICS.md's timeline: rows 6 (live) and 7 (padded) both hold slot 7. On the GPU
    either may store last, block by block; in every order each element of q[7] is one of the two
    candidates' values (never anything else)."""
    from labkit.gpu.race import race_stats

    stats = race_stats(launches=300 if vocab < 1000 else 40, vocab=vocab, graph=graph)
    print(stats)
    assert stats["neither_elements"] == 0
    assert stats["padded_row_won"] + stats["live_row_won"] + stats["mixed"] == stats["launches"]
    assert 0.0 <= stats["padded_share_of_elements"] <= 1.0


@gpu
@needs_compiled
@pytest.mark.parametrize("vocab", [30, 151936])
def test_race_blocks_records_whose_values_land_in_each_block(vocab):
    from labkit.gpu.race import race_blocks
    from labkit.kernels.gumbel_tuning import launch_config

    launches = 40
    r = race_blocks(vocab, launches)
    print({k: v for k, v in r.items() if k != "padded_share_per_launch"})
    assert r["block_v"] == launch_config(8, vocab, interpreted=False)["block_v"]
    assert r["num_blocks"] == -(-vocab // r["block_v"]) == len(r["padded_wins_per_block"]) == len(r["example_owner"])
    assert r["neither_elements"] == 0 and r["rows"] == [6, 7] and r["mapping"][7] == 7
    assert all(0 <= w <= launches for w in r["padded_wins_per_block"])
    assert set(r["example_owner"]) <= {0, 1}
    shares = r["padded_share_per_launch"]
    assert len(shares) == launches and all(0.0 <= s <= 1.0 for s in shares)
    wins = r["whole_launch_wins"]
    assert wins["padded"] == sum(s == 1.0 for s in shares) and wins["live"] == sum(s == 0.0 for s in shares)


@gpu
@needs_compiled
@pytest.mark.parametrize("vocab", [30, 151936])
def test_with_the_fix_q_is_the_live_rows_in_every_launch(vocab):
    from labkit.gpu.race import race_blocks

    r = race_blocks(vocab, 20, fixed=True)
    assert r["mapping"][7] == -1 and r["neither_elements"] == 0
    assert r["whole_launch_wins"] == {"padded": 0, "live": 20}
    assert r["padded_wins_per_block"] == [0] * r["num_blocks"] and r["mixed_blocks"] == 0


# -- compute-sanitizer -------------------------------------------------------------------------------------

@gpu
@needs_compiled
def test_memcheck_finds_the_fill_only_reads_and_nothing_in_the_fixed_kernel():
    """The fill alone (padded rows -1, unmasked kernel, host checks off) reads temperature[-1] and
    seeds[-1]; the masked kernel reads and writes nothing out of bounds."""
    from labkit.gpu.sanitizer import find_compute_sanitizer, memcheck

    binary = find_compute_sanitizer()
    if binary is None:
        pytest.skip("compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda*/bin, "
                    "or LABKIT_COMPUTE_SANITIZER=/path/to/it)")
    fixed = memcheck("fixed", binary)
    print(fixed)
    assert fixed["probe"] == {"case": "fixed", "launched": True, "cuda_error": None, "refused": None}, fixed
    assert (fixed["errors"], fixed["invalid_reads"], fixed["invalid_writes"]) == (0, 0, 0), fixed
    fill = memcheck("fill_only", binary)
    print(fill)
    assert fill["probe"]["launched"] and fill["probe"]["refused"] is None, fill
    assert fill["invalid_reads"] >= 1 and fill["errors"] >= fill["invalid_reads"] + fill["invalid_writes"], fill


# -- the toy models on the GPU ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_models():
    """The toy models on the GPU (their linear layers use the row-wise Triton kernel there)."""
    from labkit.models import load_toy_models

    if backends.backend() != "triton":
        pytest.skip("needs the compiled Triton backend")
    return load_toy_models(DEVICE)


@gpu
@needs_compiled
def test_toy_models_are_batch_invariant_on_the_gpu_eager_and_in_graphs():
    """Eager runs use num_reqs rows, graphs the padded size: a row's logits must not depend on it.
    (cuBLAS alone is not invariant: that is why RowwiseLinear uses labkit.kernels.rowwise_linear.)"""
    from labkit.gpu.correctness import batch_invariance, layer_invariance

    result = batch_invariance()
    print(result, layer_invariance())
    assert not any(r["mismatched_sizes_eager"] or r["mismatched_sizes_graph"] for r in result.values()), result


# -- end to end under real CUDA graphs ------------------------------------------------------------------

@gpu
@needs_compiled
def test_graph_runner_applies_a_step_once_on_the_call_that_captures():
    """GraphRunner warms a new graph's step up eagerly before capturing it (Triton compiles outside
    the capture); replaying it on that call as well would apply the step twice, and the drafter,
    which shifts its context and positions in place, would draft from a context one step ahead."""
    from labkit.gpu.drafter import graph_step_applications

    assert graph_step_applications() == 1


@pytest.fixture(scope="module")
def gpu_bench(gpu_models):
    from labkit.bench.modes import ALL_MODES
    from labkit.bench.repro import BenchConfig, run_bench

    return run_bench(BenchConfig(), ALL_MODES, progress=False, device=DEVICE, models=gpu_models).to_json()["modes"]


@gpu
@needs_compiled
def test_gpu_bench_the_fix_matches_gpu_eager_in_every_mode(gpu_bench):
    """No collision after the fix, so nothing depends on the order of stores: 50 of 50 identical."""
    m = gpu_bench
    print({name: (r["identical_to_eager"], r["corrupted"], r["tokens_per_s"]) for name, r in m.items()})
    for mode in ("graph-fixed", "greedy-graph-buggy", "dflash-fixed"):
        assert m[mode]["identical_to_eager"] == m[mode]["responses"] == 50, mode
    assert m["graph-host-only"]["error"] and "mask" in m["graph-host-only"]["error"]


def _collided(launch) -> list[tuple[int, int]]:
    """(slot, step) of live slots that more than one row stored to (counted in every order)."""
    return [(s, step) for s in launch.live_slots for step in range(launch.writes.shape[1])
            if int(launch.writes[s, step]) > 1]


def _rows_of(launch, slot) -> list[int]:
    return [r for r in range(launch.rows) if int(launch.mapping[r]) == slot]


@gpu
@needs_compiled
@pytest.mark.parametrize("mode", ["graph-buggy", "graph-kernel-only"])
def test_gpu_buggy_graphs_collide_and_q_holds_only_candidates(mode, gpu_models):
    """Before the fix, padded rows store to live slots: the collision is there in every order, and
    each element of the live q is one colliding row's value. Which row wins is the GPU's race
    (measured by python -m labkit gpu --sections race_blocks), so it is not asserted here."""
    from labkit.bench.modes import mode_named
    from labkit.bench.repro import BenchConfig, bench_requests
    from labkit.engine import Engine

    cfg = BenchConfig(prompts=24)
    config = mode_named(mode).config.at_shapes_of(cfg.shapes)
    run = Engine(gpu_models, config, record=True).generate(bench_requests(cfg, gpu_models.tokenizer))
    checked = 0
    for rec in run.records:
        launch = rec.launch
        for slot, step in _collided(launch):
            rows = _rows_of(launch, slot)
            t = launch.temperature[slot]
            cands = torch.stack([launch.row_logits[r, step] / t for r in rows])
            assert torch.isclose(launch.draft_logits[slot, step][None], cands, rtol=1e-6, atol=0).any(0).all()
            checked += 1
    assert checked > 0, "the bench's shrinking batches leave live slots in padded rows"


@gpu
@needs_compiled
@pytest.mark.parametrize("capture_sizes", [(1, 2, 4, 8), (1, 2, 4, 8, 16)])
def test_every_capture_size_is_a_real_cuda_graph_and_the_buggy_run_collides(capture_sizes, gpu_models):
    from labkit.bench.modes import mode_named
    from labkit.config import DrafterConfig
    from labkit.corpus import sample_prompts
    from labkit.engine import Engine, make_requests

    shapes = DrafterConfig(k=3, max_num_reqs=capture_sizes[-1], capture_sizes=capture_sizes)

    def run(mode, record=False):
        requests = make_requests(gpu_models.tokenizer, sample_prompts(24, 3), 3, min_new_tokens=12,
                                 max_new_tokens=40, arrivals_per_step=0.7)
        engine = Engine(gpu_models, mode_named(mode).config.at_shapes_of(shapes), record=record)
        return engine, engine.generate(requests)

    _, eager = run("eager")
    engine, buggy = run("graph-buggy", record=True)
    _, fixed = run("graph-fixed")
    runner, spec = engine.speculator.runner, engine.speculator
    used = {rec.launch.rows for rec in buggy.records}
    assert runner.real_graphs and runner.num_captures == len(used)
    assert all(isinstance(runner.graph_for(rows, spec.run_rows), torch.cuda.CUDAGraph) for rows in used)
    assert runner.num_captures == len(used), "graph_for returned the graphs already captured"
    assert any(_collided(rec.launch) for rec in buggy.records)
    assert fixed.outputs == eager.outputs
    _, greedy_eager = run("greedy-eager")
    _, greedy_buggy = run("greedy-graph-buggy")
    assert greedy_buggy.outputs == greedy_eager.outputs


@gpu
@needs_compiled
@pytest.mark.parametrize("drafter", ["autoregressive", "dflash"])
@pytest.mark.parametrize("use_graphs", [False, True])
def test_a_checked_draft_step_from_host_inputs_never_synchronises_with_the_gpu(drafter, use_graphs, gpu_models):
    """With the checks on, a draft step whose inputs come from the host (as the
    engine hands them over) checks them on the host and launches everything without waiting for
    the GPU. torch's sync debug mode turns any synchronising call inside the step into an error."""
    from labkit.bench.scenario import propose_inputs
    from labkit.config import DrafterConfig
    from labkit.speculator import build_speculator

    config = DrafterConfig(drafter=drafter, k=2 if drafter == "dflash" else 4, max_num_reqs=8,
                           capture_sizes=(1, 2, 4, 8), use_graphs=use_graphs)
    spec = build_speculator(gpu_models.draft, config, device=DEVICE, validate=True)
    inputs = propose_inputs(spec, [5, 0, 3], seed=2)
    host = (inputs.slots.tolist(), *(t.cpu() for t in inputs[1:]))
    want = spec.propose(*inputs)  # the same step from inputs on the GPU (compiles, captures)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = spec.propose(*host)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(got, want)
    with pytest.raises(LabkitInputError, match="temperature"):  # and the host-side check still refuses
        spec.propose(host[0], torch.full_like(host[1], -1.0), *host[2:])


# -- records: merging a re-measurement, the stale-slot probe (CPU) ------------------------------------------

def test_a_re_measured_section_replaces_its_run_and_keeps_it_only_where_every_run_is_data():
    from labkit.records import merge_sections

    base = {"provenance": {"date": "2026-01-01"}, "section_provenance": {"kernel": {"date": "2026-01-01"},
                                                                          "race": {"date": "2026-01-01"}},
            "kernel": {"sizes": [1]}, "race": {"launches": 1},
            "superseded": {"kernel": [{"data": {"sizes": [0]}, "cited_by": "notebooks/04_timing.ipynb"}]}}
    new = {"provenance": {"date": "2026-02-02", "device": "GPU", "command": "python -m labkit gpu"},
           "kernel": {"sizes": [2]}, "race": {"launches": 2}, "section_seconds": {"kernel": 3.0}}
    said = merge_sections(base, new, ["kernel", "race"], "the kernel changed")
    assert base["kernel"] == {"sizes": [2]} and base["section_provenance"]["kernel"]["date"] == "2026-02-02"
    # the kernel's replaced run leaves the record; the cited one stays
    assert base["superseded"]["kernel"] == [{"data": {"sizes": [0]}, "cited_by": "notebooks/04_timing.ipynb"}]
    assert base["superseded"]["race"] == [{"data": {"launches": 1}, "provenance": {"date": "2026-01-01"},
                                           "superseded_because": "the kernel changed"}]
    assert said == ["kernel: the run of 2026-01-01 leaves the record (git log -p keeps it)",
                    "race: the run of 2026-01-01 stays under superseded (every run of it is data)"]
    with pytest.raises(KeyError):
        merge_sections(base, new, ["graphs"], "no such section")


def test_the_stale_slot_probe_sees_the_padded_row_land_in_a_live_q_on_the_cpu():
    from labkit.gpu.sanitizer_probe import _inputs, stale_overwrites

    tensors, _guards = _inputs(stale=True, device="cpu")
    seen = stale_overwrites(tensors, launches=3, backend="torch")
    assert seen["mapping"] == [0, 1, 2, 4, 5, 6, 7, 7] and seen["rows"] == [6, 7] and seen["slot"] == 7
    # On the CPU the padded row stores last every time: every launch overwrites live slot 7's q.
    assert seen["padded_values_in_live_q"] == seen["live_q_differs_from_unpadded"] == 3


# -- the record against the code it measured --------------------------------------------------------

def _shipped_gpu_record() -> dict:
    from labkit import records

    return read_record(records.GPU)


def test_every_section_of_the_gpu_record_describes_the_code_as_it_is():
    from labkit.gpu.measured_with import stale, unstamped

    record = _shipped_gpu_record()
    assert unstamped(record) == [], "sections whose stamp does not say which launch defaults they ran"
    found = stale(record)
    assert found == [], "the code moved on since these were measured:\n" + "\n".join(found)


def test_a_changed_launch_default_marks_every_section_measured_with_the_old_one(monkeypatch):
    from labkit.gpu.measured_with import NOT_AT_THE_DEFAULTS, stale
    from labkit.kernels import gumbel_tuning

    record = _shipped_gpu_record()
    monkeypatch.setattr(gumbel_tuning, "GPU_NUM_WARPS", gumbel_tuning.GPU_NUM_WARPS * 2)
    found = stale(record)
    at_defaults = [s for s in record if s in record["section_provenance"] and s not in NOT_AT_THE_DEFAULTS]
    assert len(found) == len(at_defaults) > 5
    for section, line in zip(at_defaults, found, strict=True):
        assert line.startswith(f"labkit/data/gpu/runs.json, section {section}: measured with the kernel's launch "
                               f"defaults num_warps {gumbel_tuning.GPU_NUM_WARPS // 2} (the code now has "
                               f"{gumbel_tuning.GPU_NUM_WARPS})"), line
        assert f"`python -m labkit gpu --out DIR --sections {section}`" in line
        assert f"`python -m labkit record merge DIR/gpu_benchmarks.json --sections {section}`" in line


def test_a_changed_size_or_shape_marks_the_sections_measured_at_the_old_one(monkeypatch):
    from labkit.gpu import sizes
    from labkit.gpu.measured_with import stale

    record = _shipped_gpu_record()
    monkeypatch.setattr(sizes, "TOY_CAPTURE_SIZES", (*sizes.TOY_CAPTURE_SIZES, 2 * sizes.TOY_CAPTURE_SIZES[-1]))
    monkeypatch.setattr(sizes, "PEER_SHAPES", sizes.PEER_SHAPES[1:])
    found = stale(record)
    assert [line.split(":")[0] for line in found] == [
        f"labkit/data/gpu/runs.json, section {s}" for s in ("graphs", "staircase_toy", "peers")]
    assert "capture sizes [1, 2, 4, 8, 16, 32, 64]; the code now measures at [1, 2, 4, 8, 16, 32, 64, 128]" in found[0]
    assert all("--sections " + s in line for s, line in zip(("graphs", "staircase_toy", "peers"), found, strict=True))


def test_each_section_of_a_run_is_stamped_with_the_launch_defaults_it_ran(tmp_path):
    from labkit.gpu.measured_with import kernel_defaults

    invocation = {"device": "NVIDIA GPU", "command": "python -m labkit gpu --out x",
                  "kernel_defaults": kernel_defaults()}
    registry = {"kernel": Section("kernel", "", lambda quick: {"sizes": []})}
    record = cli.run_sections(["kernel"], {"provenance": invocation}, tmp_path / RECORD_NAME, registry=registry,
                              log=lambda msg: None, invocation=invocation)
    assert record["section_provenance"]["kernel"]["kernel_defaults"] == kernel_defaults()
