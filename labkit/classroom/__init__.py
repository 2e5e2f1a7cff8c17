"""A room on one server: a JupyterHub for a workshop, each learner with their own system user,
JupyterLab and fresh student edition (``python -m labkit hub start``; docs/INSTRUCTOR_GUIDE.md,
"One shared server").

    room        the names, start notebook and per-learner limits, for one box and for Kubernetes
    accounts    the learners' system users (created and removed by the room) and their passwords
    auth        the authenticator that checks the room's generated passwords
    spawner     each learner's JupyterLab as that learner, under the memory limit
    runtime     what the learners' processes run: an interpreter they can execute, the kit, their folder
    proxy       configurable-http-proxy: Node's where there is Node, else its Python port
    control     start and stop a room; jupyterhub_config.py is the configuration it starts JupyterHub with
    client      a learner's side over HTTP: log in, start the server, run cells in a kernel (tests, bench)
"""
