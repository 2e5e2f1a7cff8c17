"""The vLLM releases the kit's tests audit, named once (tests, the GPU section and the docs read them here).

* ``FIXED``: the newest release when this was written (PyPI's list of vllm releases, read on
  2026-12-02, ends at 0.33.0, its x86_64 wheel uploaded 2026-11-02 10:13 UTC); its sampling kernel
  masks rows whose slot is -1 and its speculator fills the padded rows of ``idx_mapping`` with -1
  (vLLM PR #47066).
* ``UNMASKED``: the newest release before 2026-06-30 that has Model Runner V2's slot-indexed draft
  sampling without the mask. PyPI lists the 0.24.0 x86_64 wheel as uploaded 2026-06-30 01:18 UTC,
  before the fix was merged (3cecee40, 18:25 UTC the same day; 0.25.0 followed on 2026-07-11); its
  ``vllm/v1/worker/gpu/sample/gumbel.py`` stores ``processed_logits_ptr + req_state_idx *
  processed_logits_stride`` with only the vocabulary mask (read in the wheel
  ``vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl``, whose ``vllm/_version.py`` names commit
  ``ee0da84ab``).

Which verdict each release gets is not written here: the tests derive it by running the kit's own
buggy and fixed kernels in the same scenario.
"""

from __future__ import annotations

FIXED = "0.33.0"
UNMASKED = "0.24.0"
RELEASES = (FIXED, UNMASKED)
