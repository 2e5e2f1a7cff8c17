"""GPU measurements: the timing harness, the benchmark sections, and the records they write (`python -m labkit.gpu`)."""
