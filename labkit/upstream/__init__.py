"""vLLM's own code, audited: its Gumbel sampling kernel run in the kit's stale-padding scenario.

Nothing of vLLM is kept in this repository: every module here reads a vLLM tree the user names
(an installation, a source checkout, or the few files the tests extract from a release wheel).

    releases             the vLLM releases the kit audits in its tests, named once
    fetch                a release's few audited files, from the package registry, cached under build/
    loader               find a tree; load its sampling kernel file alone, with a one-module shim
    kernel_api           the kernel file's gumbel_sample signatures the kit knows, and how to call each
    audit                the scenario (a padded row holding a live slot, one holding -1) and its verdict
    speculator_reading   whether the tree's speculator fills padded rows with -1, read with Python's ast
    report               the whole audit of one tree, in words and as JSON (``python -m labkit audit-vllm``)
"""
