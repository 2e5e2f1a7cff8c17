"""vLLM's own code, audited: is a tree affected by PR #47066, and every release's answer.

Nothing of vLLM is kept in this repository: every module here reads a vLLM tree the user names
(an installation, a source checkout, or the few files read from a release on the package index).

    fetch                a release's few audited files, read from the index by range requests, cached under build/
    loader               find a tree; load its sampling kernel with what it imports from vLLM, never vLLM itself
    kernel_api           how to call each release's gumbel_sample, by what its parameters are
    audit                the scenario (padded rows in a launch) and what the release's kernel does with them
    speculator_reading   the speculator's host side, read with Python's ast: which function copies the live slots
    host_step_run        that function run in the kit's scenario; when it runs and other writes, read
    dflash_reading       DFlash's pad, read with Python's ast: the evidence, the answer where no run
    dflash_run           DFlash's input preparation, run in the kit's scenario with the host writes around it
    interpreter_index    a scalar loop bound under Triton's interpreter before 3.7 (DFlash's preparation needs it)
    report               the whole audit of one tree and its one verdict (``python -m labkit audit-vllm``)
    record               the release matrix and its record (``python -m labkit upstream matrix``)
    releases             the few releases the unit tests read by name
"""
