"""The maintainers' and the set-up's commands of ``python -m labkit`` (``--help`` lists them).

    lab            JupyterLab on an edition's first notebook (``make lab``)
    setup          the set-up's questions: where pip takes the pins from, a wheelhouse, JupyterLab's
                   defaults, the edition a server started elsewhere opens (the Makefile, binder/postBuild)
    bench_cpu      how long the kit makes a CPU user wait, against the targets (``make bench-cpu``)
    mutants        each part of the fix broken on purpose; a test must notice (``make mutants``)
    run_notebooks  execute notebooks and report the cells that raised (GPU boxes)
    train_models   regenerate the toy corpus and train the toy models
"""
