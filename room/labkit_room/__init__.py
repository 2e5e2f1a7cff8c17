"""A room on one server: a JupyterHub for a workshop, each learner with their own system user,
JupyterLab and fresh student edition (``python -m labkit hub start``; docs/INSTRUCTOR_GUIDE.md,
"One shared server").

    room            the names, start notebook, addresses and per-learner limits, for one box and Kubernetes
    enforcement     which limits this box enforces and which it cannot, one line each, said at start
    accounts        the learners' system users (created and removed by the room), uids that own nothing
    auth            the authenticator and the generated passwords (self-contained: Kubernetes mounts it)
    groups          a control group per learner: v1, v2 or systemd, by what the box has
    sandbox         what a learner's server enters before it runs: group, private folders, rlimits
    spawner         each learner's JupyterLab as that learner, in their sandbox, logging to their own log
    reaper          the server's parent: passes on the hub's signals, reads every orphan's exit status
    warm            the room warmed at its start: each learner's server and a kernel on notebook 00
    view            the instructor's room view (a hub service): verdicts in from kernels, the board out
    culler          the idle culler from the session's start (a hub service, run as a script)
    runtime         what the learners' processes run: an interpreter they can execute, the kit, their folder
    kernel          a learner's kernel: its own network, a private pipe, the room's limits
    learner_server  what a learner's server sends (a sandbox on all but JupyterLab's page) and guards
    proxy           configurable-http-proxy: Node's where there is Node, else its Python port
    control         start and stop a room; jupyterhub_config.py is the configuration it starts JupyterHub with
    client          a learner's side over HTTP: log in, start the server, run cells in a kernel (the warm start,
                    the tests, the bench)

Its own distribution (room/pyproject.toml), beside the lesson: ``pip install labkit`` installs none of
it. The instruments that measure and attack a room (the bench, a hostile learner) are in room/bench/,
in no distribution.
"""
