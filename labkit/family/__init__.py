"""The family: four ways a captured graph corrupts a live request, each reproduced and audited.

Notebook 09 walks them as cases, one module each, every one with a buggy and a fixed form, run
under graphs (real ``torch.cuda.CUDAGraph`` s on a GPU, emulated elsewhere) and compared with the
same work run eagerly:

    stale_slot          case 1, vLLM #47066: the kit's own drafter, two batches that shrank
    hidden_state_cache  case 2, vLLM #43810: a paged cache stored through a padded slot mapping
    shared_pool         case 3, vLLM #53488: a target graph and a drafter graph sharing one memory pool
    static_buffer       case 4, SGLang PR #32555: Mamba2 decode saves states through a static buffer's stale tail

    record              one record per case: its title, its thread and fix, where each was read, its prediction cell
    symptom             what a graph run corrupted, counted against the eager run

Each case module gives ``symptom(form)`` (a :class:`~labkit.family.symptom.Symptom`) and ``audit(form)``
(an :class:`~labkit.proofs.audit_report.AuditReport` of padding invariance or of output lifetime).
"""
