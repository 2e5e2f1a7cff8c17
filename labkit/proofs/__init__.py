"""Proofs that the fix is right, one concept per module:

    audit             the padding-invariance audit of any step(rows) over described buffers
    lifetime          the output-lifetime audit: what a stage hands on holds until its reader reads it
    audit_report      what an audit found, in words (AuditReport, Corruption, Overwrite, the errors)
    speculator_audit  the audit applied to the kit's speculators, by mode; hypothesis batches
    ownership         who wrote each q in one launch (OwnershipTable, trace_launch)
    stats             total variation, histograms, chi-square, convergence slopes
    distribution      speculative decoding emits p after the fix and provably not before
    siblings          two sibling bugs of PR #47066: int32 offsets, shared noise

Nothing here imports from labkit.viz; the proof's figures are in labkit.viz.proof_plots.
"""
