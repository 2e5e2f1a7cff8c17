"""A learner's kernel in a room: the room's limits first, then IPython's kernel as usual.

The room's kernel spec (:func:`labkit.classroom.runtime.room_kernel_spec`, found first on the
learners' ``JUPYTER_PATH`` under the name ``python3``) starts every learner's kernel as
``python -m labkit.classroom.kernel -f CONNECTION_FILE``. Before the first cell runs, the kernel
holds itself to its GPU share, reports both limits in ``labkit.describe()``, and explains a memory
error under its traceback (:mod:`labkit.classroom.limits`). That ``python -m`` line is the kernel
spec's, never typed by anyone: the kit's commands are ``python -m labkit ...``.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> None:
    from ipykernel.kernelapp import IPKernelApp

    from labkit import backends
    from labkit.classroom import limits

    limits.apply()
    backends.describe_also(limits.describe)
    app = IPKernelApp.instance()
    app.initialize(argv)
    limits.install_messages(app.shell)
    app.start()


if __name__ == "__main__":
    main()
