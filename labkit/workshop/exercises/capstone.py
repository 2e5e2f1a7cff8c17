"""The capstone: your functions of exercises (a), (b) and (c) in the engine, on notebook 01's workload.

    result = run_capstone(globals())      # finds copy_idx_mapping, gumbel_kernel (or gumbel_rows),
    result                                # build_sample_mapping; prints the table and your launch
    result.solved, result.rows, result.ownership

First the three checkers must pass (a fix that reads outside a buffer must not run unguarded).
Once your fix matches the eager run, in a learner's folder the docs that explain the fix arrive in
its ``docs/`` (:func:`~labkit.workshop.editions.student.deliver_docs_after_the_exercises`).
Then the engine runs notebook 01's workload (the bench's default: 50 prompts) three times per
drafter: the kit's eager run (the reference), the kit's graphs before the fix, and graphs with
your pieces in place of the kit's fix -- your copy_idx_mapping writes idx_mapping, your kernel samples and
stores q (:class:`~labkit.workshop.harness.learner_sampler.LearnerSampler`), your function builds DFlash's
sample mapping. "identical" means the response equals the eager run's token for token.

Last, the ownership map of each drafter's own launch: notebook 02's timeline (8 requests, then slot 3
finishes) through your copy_idx_mapping and your kernel (and for DFlash, your sample mapping), with the
write trace of the step that pads 7 rows to a graph of 8 (:class:`~labkit.proofs.ownership.OwnershipTable`).

Where it runs: your Triton kernel in Triton's CPU interpreter (compiled on a GPU); on the CPU the
kit's own kernels (the reference runs, verification, DFlash's sample positions) use the torch
backend, which has the same semantics, on one thread.

How long, measured on a 2-core x86 CPU with the default 50 prompts: about 9 s with the torch
version of your kernel; about 75 s with your Triton kernel in the interpreter, which runs one
program (one row) at a time at about 8 ms each -- some 4,000 programs per drafter, 35 s each; the
kit's own runs take about 1 s each. ``prompts=`` and ``drafters=`` trade the table's size for time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from labkit import backends
from labkit.config import FixSwitches
from labkit.errors import LabkitInputError
from labkit.proofs.ownership import OwnershipTable
from labkit.workshop.exercises.kept_code import variant_of
from labkit.workshop.feedback import CheckResult, Text, resolve
from labkit.workshop.harness.launches import kernel_device, kit_work_on
from labkit.workshop.harness.learner_sampler import LearnerSampler
from labkit.workshop.harness.learner_specs import LearnerDFlashSpeculator, LearnerSpeculator

# The kit's host part is off (your copy_idx_mapping writes idx_mapping), and the kit lets whatever
# it wrote reach the sampler: what a padded row does is up to your kernel.
YOUR_FIX = FixSwitches(host=False, kernel=True, dflash=True)
# Per drafter: the eager run your fix must match, and the kit's run before the fix.
REFERENCE_MODES = {"autoregressive": ("eager", "graph-buggy"), "dflash": ("dflash-eager", "dflash-buggy")}
# Each drafter's own launch: the step of notebook 02's timeline that pads 7 live rows to a graph of 8.
YOUR_LAUNCH = "notebook 02's timeline, step t+1 (live slots [0, 1, 2, 4, 5, 6, 7], 7 rows padded to a graph of 8)"
LAUNCH_OF = {
    "autoregressive": (YOUR_LAUNCH, "your (a) and (b)"),
    "dflash": ("notebook 02's timeline, step t+1, DFlash (7 live requests, k = 2: 14 sample rows padded to 16)",
               "your (a), (b) and (c)"),
}


@dataclass
class CapstoneRow:
    drafter: str
    run: str
    responses: int
    identical: int

    @property
    def corrupted(self) -> int:
        return self.responses - self.identical


@dataclass
class CapstoneResult:
    solved: bool
    message: str
    rows: list[CapstoneRow] = field(default_factory=list)
    ownership: object = None  # OwnershipTable of your launch (the first drafter's)
    where: str = ""
    launch: object = None  # its LaunchRecord
    launches: dict = field(default_factory=dict)  # drafter -> the LaunchRecord of its own launch, in run order

    def ownership_map(self):
        """The write-ownership map of your launch, as a figure (:mod:`labkit.viz.ownership_plots`); a note
        instead while the capstone has not run."""
        from labkit.viz.ownership_plots import ownership_map

        if self.launch is None:
            return Text("No launch to map yet: the capstone runs once exercises (a), (b) and (c) are solved.")
        drafter = next(iter(self.launches), "autoregressive")
        launch, through = LAUNCH_OF[drafter]
        return ownership_map(self.launch, title=f"Your launch: {launch}, through {through}")

    def __repr__(self) -> str:
        parts = [self.message]
        if self.rows:
            parts += ["", format_rows(self.rows), "", self.where]
        for drafter, record in self.launches.items():  # each drafter's own launch, once
            launch, through = LAUNCH_OF[drafter]
            parts += ["", f"Your own {drafter} launch at {launch}, through {through}:",
                      str(OwnershipTable.from_record(record))]
        return "\n".join(parts)

    __str__ = __repr__

    def __bool__(self) -> bool:
        return self.solved


def format_rows(rows: list[CapstoneRow]) -> str:
    head = f"{'drafter':<15} {'run':<36} {'identical to eager':>18} {'corrupted':>9}"
    lines = [head]
    for r in rows:
        lines.append(f"{r.drafter:<15} {r.run:<36} {f'{r.identical} of {r.responses}':>18} {r.corrupted:>9}")
    return "\n".join(lines)


def _learner_pieces(namespace, copy_idx_mapping, kernel, sample_mapping):
    """The three functions, from keywords or a namespace; or the CheckResult of the first that fails."""
    from labkit.workshop.exercises import record
    from labkit.workshop.exercises.checks import checker
    from labkit.workshop.exercises.reveal import learner_names

    pieces = []
    for ex, given in (("a", copy_idx_mapping), ("b", kernel), ("c", sample_mapping)):
        fn, _, verdict = resolve(ex, given if given is not None else namespace, *learner_names(ex))
        if verdict is None:
            verdict = checker(record.exercise(ex))(fn)
        if not verdict.solved:
            return verdict
        pieces.append(fn)
    return pieces


def run_capstone(namespace: dict | None = None, *, copy_idx_mapping=None, kernel=None, sample_mapping=None,
                 prompts: int = 50, seed: int = 0, drafters=("autoregressive", "dflash"),
                 check_first: bool = True, progress=None) -> CapstoneResult:
    """Your fix in the engine: the table of notebook 01 with your pieces, and your launch's ownership map.

    namespace: where to find your functions (``globals()``); or pass them as `copy_idx_mapping`, `kernel`
    (gumbel_kernel, or gumbel_rows where Triton cannot run) and `sample_mapping`. prompts, seed:
    the workload (notebook 01's: 50 prompts, seed 0). drafters: which drafters to run (DFlash is
    where your sample mapping matters). progress: ``progress(run, done, total)`` as requests finish.
    """
    if prompts < 1:
        raise LabkitInputError(f"prompts must be at least 1, got {prompts}")
    unknown = [d for d in drafters if d not in REFERENCE_MODES]
    if unknown or not drafters:
        raise LabkitInputError(f"drafters must be some of {', '.join(REFERENCE_MODES)}, got {list(drafters)}")
    if check_first:
        pieces = _learner_pieces(namespace or {}, copy_idx_mapping, kernel, sample_mapping)
        if isinstance(pieces, CheckResult):
            return CapstoneResult(False, "Not yet: the capstone runs your pieces only once their checkers pass. "
                                         + pieces.message)
    else:
        pieces = [copy_idx_mapping, kernel, sample_mapping]
    copy_idx_mapping, kernel, sample_mapping = pieces
    variant = variant_of(kernel)
    sampler = LearnerSampler(kernel, variant)
    device = kernel_device() if variant == "triton" else torch.device("cpu")
    with kit_work_on(device):
        work = Workload(prompts, seed, tuple(drafters), progress)
        rows = _engine_rows(copy_idx_mapping, sampler, sample_mapping, work, device)
        launches = {drafter: your_launch(copy_idx_mapping, sampler, device, drafter=drafter,
                                         sample_mapping=sample_mapping) for drafter in drafters}
    ok = all(r.identical == r.responses for r in rows if r.run == "your fix")
    yours = [r for r in rows if r.run == "your fix"]
    summary = ", ".join(f"{r.identical} of {r.responses} identical to eager ({r.drafter})" for r in yours)
    message = f"your fix: {summary}.{_docs_now_open()}" if ok else f"Not yet: your fix gave {summary}."
    first = launches[drafters[0]]
    return CapstoneResult(ok, message, rows, OwnershipTable.from_record(first), _where(variant, device), first,
                          launches)


def _docs_now_open() -> str:
    """Every exercise is done: the docs that explain the whole fix reach a learner's folder now."""
    from labkit.workshop.learner_folder import DOCS_AFTER_THE_EXERCISES, deliver_docs_after_the_exercises

    delivered = deliver_docs_after_the_exercises()
    names = " and ".join(f"docs/{doc}" for doc in DOCS_AFTER_THE_EXERCISES)
    if delivered:
        return (f" The docs that explain the fix part by part, and where each part lives in vLLM, are now in your "
                f"folder: {names}.")
    return f" The kit's {names} explain the fix part by part, and where each part lives in vLLM."


def _where(variant: str, device: torch.device) -> str:
    yours = {"torch": "your torch function", "triton": "your Triton kernel"}[variant]
    place = "in Triton's CPU interpreter" if variant == "triton" and device.type == "cpu" else f"on {device.type}"
    return (f"{yours} ran {place}; the kit's own kernels (reference runs, verification) on the "
            f"{backends.backend() if device.type != 'cpu' else 'torch'} backend.")


@dataclass(frozen=True)
class Workload:
    prompts: int
    seed: int
    drafters: tuple
    progress: object = None

    def generate(self, engine, cfg, run: str) -> dict:
        from labkit.bench.repro import bench_requests

        report = None if self.progress is None else (lambda done, total: self.progress(run, done, total))
        return engine.generate(bench_requests(cfg, engine.models.tokenizer), progress=report).outputs


def _engine_rows(copy_idx_mapping, sampler, sample_mapping, work: Workload, device) -> list[CapstoneRow]:
    from labkit.bench.modes import mode_named
    from labkit.bench.repro import BenchConfig
    from labkit.engine import Engine
    from labkit.models import load_toy_models

    cfg = BenchConfig(prompts=work.prompts, seed=work.seed)
    models = load_toy_models(device)
    rows = []
    for drafter in work.drafters:
        eager, buggy = REFERENCE_MODES[drafter]
        outputs = {}
        for run, mode in (("eager (reference)", eager), (f"kit before the fix ({buggy})", buggy)):
            engine = Engine(models, mode_named(mode).config.at_shapes_of(cfg.shapes), device=device)
            outputs[run] = work.generate(engine, cfg, f"{drafter}: {run}")
        config = dataclasses.replace(mode_named(buggy).config.at_shapes_of(cfg.shapes), fix=YOUR_FIX)
        if drafter == "dflash":
            spec = LearnerDFlashSpeculator(models.draft, config, sample_mapping=sample_mapping,
                                           copy_idx_mapping=copy_idx_mapping,
                                           sampler=sampler, device=device)
        else:
            spec = LearnerSpeculator(models.draft, config, copy_idx_mapping=copy_idx_mapping, sampler=sampler,
                                     device=device)
        engine = Engine(models, device=device, speculator=spec)
        outputs["your fix"] = work.generate(engine, cfg, f"{drafter}: your fix")
        reference = outputs["eager (reference)"]
        for run, out in outputs.items():
            same = sum(out[rid] == reference[rid] for rid in reference)
            rows.append(CapstoneRow(drafter, run, len(reference), same))
    return rows


def your_launch(copy_idx_mapping, sampler, device, drafter: str = "autoregressive", sample_mapping=None):
    """The LaunchRecord (with its write trace) of your kernel at the timeline's second step, with your
    copy_idx_mapping; for the DFlash `drafter`, the sample rows your `sample_mapping` built."""
    from labkit.bench.scenario import MECHANICS_SCHEDULE, TIMELINE, propose_inputs
    from labkit.models import load_toy_models

    draft = load_toy_models(device).draft
    config = dataclasses.replace(TIMELINE, drafter=drafter, fix=YOUR_FIX)
    if drafter == "dflash":
        spec = LearnerDFlashSpeculator(draft, config, sample_mapping=sample_mapping, copy_idx_mapping=copy_idx_mapping,
                                       sampler=sampler, device=device, record=True)
    else:
        spec = LearnerSpeculator(draft, config, copy_idx_mapping=copy_idx_mapping, sampler=sampler, device=device,
                                 record=True)
    for step, slots in enumerate(MECHANICS_SCHEDULE):
        spec.propose(*propose_inputs(spec, slots, step=step))
    return spec.last_record
