"""Every case of the family measured at once, as the JSON a record keeps.

:func:`measure` runs each case's buggy and fixed forms under graphs and eagerly, and its audit, on
one device (the CPU with emulated graphs and pool; a GPU with real ``torch.cuda.CUDAGraph`` s when
the compiled backend runs), and returns, per case (by its key): each form's symptom against the
eager run, each form's audit (verdict, summary, sentences), and what the case alone measures. The
CPU record (``python -m labkit family --record``) and the GPU record's ``family`` section are
written from it; the notebook's sentences about the cases are rendered from those records.
"""

from __future__ import annotations

import contextlib

import torch

from labkit.family import hidden_state_cache, shared_pool, stale_slot, static_buffer
from labkit.family.record import CASES


def _audited(report) -> dict:
    return {"passed": report.passed, "summary": report.summary(), "sentences": report.sentences()}


def _stale_slot(device) -> dict:
    return {
        "symptom": {name: {form: stale_slot.symptom(name, form).as_record() for form in stale_slot.FORMS}
                    for name in stale_slot.SCHEDULES},
        "audit": {form: _audited(stale_slot.audit(form)) for form in stale_slot.FORMS},
        "audit_by_schedule": {name: _audited(stale_slot.audit("buggy", name)) for name in stale_slot.SCHEDULES},
    }


def _hidden_state_cache(device) -> dict:
    symptoms = {form: hidden_state_cache.symptom(form, device=device) for form in hidden_state_cache.FORMS}
    corrupted = symptoms["buggy"].corrupted
    return {
        "symptom": {form: s.as_record() for form, s in symptoms.items()},
        "owner_rows": [hidden_state_cache.owner_of(slot) for slot in corrupted],
        "live_tokens": len(hidden_state_cache.live_slots()),
        "padded_rows": hidden_state_cache.HiddenStateCache(device=device).runner.rows_for(
            len(hidden_state_cache.live_slots())),
        "audit": {form: _audited(hidden_state_cache.audit(form, device=device)) for form in hidden_state_cache.FORMS},
    }


def _shared_pool(device) -> dict:
    shares = {}
    for form in shared_pool.FORMS:
        case = shared_pool.PromptScoring(form, device=device)
        case.score(0)
        shares[form] = case.shares_memory()
    return {
        "symptom": {form: shared_pool.symptom(form, device=device).as_record() for form in shared_pool.FORMS},
        "next_tokens_differ": {form: shared_pool.next_tokens_differ(form, device=device) for form in shared_pool.FORMS},
        "shares_memory": shares,
        "largest_graph_tokens": shared_pool.TARGET_CAPTURE_SIZES[-1],
        "prompt_lengths": list(shared_pool.PROMPT_LENGTHS),
        "real_graphs": shared_pool.PromptScoring(device=device).target.real_graphs,
        "audit": {form: _audited(shared_pool.audit(form, device=device)) for form in shared_pool.FORMS},
        "padding_audit": _audited(shared_pool.padding_audit("buggy", device=device)),
    }


def _static_buffer(device) -> dict:
    return {
        "miniature": static_buffer.MINIATURE,
        "symptom": {form: static_buffer.symptom(form, device=device).as_record() for form in static_buffer.FORMS},
        "right_batch_sizes": {form: list(static_buffer.right_batch_sizes(form, device=device))
                              for form in static_buffer.FORMS},
        "capture_sizes": list(static_buffer.CAPTURE_SIZES),
        "max_rows": static_buffer.MAX_ROWS,
        "destinations_read": {form: static_buffer.destinations_read(form) for form in static_buffer.FORMS},
        "real_graphs": static_buffer.TrackSave(device=device).runner.real_graphs,
        "audit": {form: _audited(static_buffer.audit(form, device=device)) for form in static_buffer.FORMS},
    }


MEASURES = {"stale-slot": _stale_slot, "hidden-state-cache": _hidden_state_cache, "shared-pool": _shared_pool,
            "static-buffer": _static_buffer}


def measure(device="cpu", keys=None) -> dict:
    """Each case's (by key; `keys`: some of them) results on `device`. On the CPU under the compiled
    backend (a GPU box measuring the CPU record) the kernels run as their torch references, in the
    rows' order as on any CPU: compiled, colliding rows race and case 1 would differ run to run."""
    from labkit import backends

    keys = list(keys) if keys is not None else [c.key for c in CASES]
    on_cpu = torch.device(device).type == "cpu" and backends.backend() == "triton"
    with backends.using_backend("torch") if on_cpu else contextlib.nullcontext():
        return {key: MEASURES[key](device) for key in keys}
