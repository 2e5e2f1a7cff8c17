"""Case 1, vLLM #47066: a padded row of the drafter's graph stores its q by the slot it still holds.

The kit's own drafter (:mod:`labkit.speculator`) at the timeline's shapes (k = 2, eight request
slots, graphs of 1, 2, 4 and 8 rows), driven through two schedules of two steps: eight live
requests, then seven after one of them finished. :data:`SCHEDULES` names them by the slot that
finished. Each q record a live request owns (``draft_logits[slot, step, :]``) is compared with the
same schedule run eagerly; the audit is :func:`~labkit.proofs.speculator_audit.audit_speculator`.
"""

from __future__ import annotations

from dataclasses import replace

from labkit.bench.runs import timeline_run
from labkit.bench.scenario import MECHANICS_BATCH, TIMELINE
from labkit.config import FixSwitches
from labkit.errors import one_of
from labkit.family.symptom import Symptom, differs, largest_difference
from labkit.proofs.audit_report import AuditReport
from labkit.proofs.speculator_audit import audit_speculator

ALL_SLOTS = tuple(range(TIMELINE.max_num_reqs))
SCHEDULES = {
    "slot 3 finished": (ALL_SLOTS, MECHANICS_BATCH),
    "slot 7 finished": (ALL_SLOTS, ALL_SLOTS[:-1]),
}
FORMS = {"buggy": FixSwitches.before(), "fixed": FixSwitches.after()}
READER = "the rejection sampler"


def config(form: str, *, use_graphs: bool = True):
    """The timeline's drafter in `form` ("buggy": before PR #47066, "fixed": with it)."""
    one_of("form", form, FORMS)
    return replace(TIMELINE, fix=FORMS[form], use_graphs=use_graphs)


def symptom(schedule: str = "slot 3 finished", form: str = "buggy") -> Symptom:
    """The live q records of `schedule` run under graphs in `form` that differ from its eager run."""
    one_of("schedule", schedule, SCHEDULES)
    steps = SCHEDULES[schedule]
    graphed = timeline_run(steps, config(form))
    eager = timeline_run(steps, config(form, use_graphs=False))
    corrupted, total, largest = [], 0, 0.0
    for step, (got, want) in enumerate(zip(graphed.launches, eager.launches, strict=True)):
        for slot in got.live_slots:
            for draft_step in range(TIMELINE.k):
                total += 1
                a, b = got.draft_logits[slot, draft_step], want.draft_logits[slot, draft_step]
                if differs(a, b):
                    corrupted.append((step, slot, draft_step))
                    largest = max(largest, largest_difference(a, b))
    return Symptom("q records (step, slot, draft step)", tuple(corrupted), total, largest)


def audit(form: str = "buggy", schedule: str = "slot 3 finished", **kwargs) -> AuditReport:
    """The padding-invariance audit of the drafter in `form` on the second batch of `schedule`."""
    from labkit.models import shared_toy_models
    from labkit.speculator import build_speculator

    one_of("schedule", schedule, SCHEDULES)
    drafter = config(form)
    models = kwargs.pop("models", None) or shared_toy_models(_device())
    return audit_speculator(lambda: build_speculator(models.draft, drafter, record=True), SCHEDULES[schedule][-1],
                            reader=READER, name=f"drafter, {form}, {schedule}", **kwargs)


def _device():
    from labkit.backends import default_device

    return default_device()
