"""GPU measurements and the record they write (``python -m labkit gpu --out DIR``).

    timing.py           timing: L2 flush, CUDA-event medians, graphs holding one call, checkpoints
    records.py          provenance and the JSON record
    sections.py         the sections by name; cli.py runs them, summary.py prints the headline numbers
    kernel.py           the sampling kernel: bandwidth, the fix's cost, torch comparisons, block sweep
    torch_samplers.py   the sampling step in plain torch (the kit's hash noise, torch.rand, multinomial)
    drafter.py          a draft step in graphs vs eager; the toy engine end to end
    staircase.py        cost against live rows for padded graphs
    race.py             colliding rows: who wins q, per launch and per vocab block
    correctness.py      the fast kernel's distribution; the toy models' batch invariance
    sanitizer.py        compute-sanitizer memcheck on the fixed kernel and on the PR's host part alone
                        (sanitizer_probe.py is the launch it watches)

Only :mod:`labkit.viz` reads the records (labkit/data/gpu/ keeps copies); this package writes them.
"""
