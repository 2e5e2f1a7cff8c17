"""Which HTTP proxy the hub runs in front of itself and the learners' servers.

JupyterHub routes every request through configurable-http-proxy, the Node program it documents
and installs by default; that is the one used wherever Node is installed, pinned here and put in
``build/hub-proxy`` by npm (``make hub`` installs it, and so does ``hub start`` when npm is there).
A box without Node (the GPU box has none, and no network to fetch it) gets the Python port of the
same program from PyPI (the ``configurable-http-proxy`` package, in the kit's ``hub`` extra): the
same command line and REST API, which is all JupyterHub's ConfigurableHTTPProxy talks to.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from labkit import paths

NODE_PROXY_VERSION = "5.3.0"
NODE_PROXY_DIR = paths.BUILD / "hub-proxy"
CHOICES = ("auto", "node", "python")


def node_proxy() -> Path:
    return NODE_PROXY_DIR / "node_modules" / ".bin" / "configurable-http-proxy"


def install_node_proxy(quiet: bool = True) -> Path:
    """npm install the pinned configurable-http-proxy into build/hub-proxy (a few MB, seconds)."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("installing the Node proxy needs npm, which is not on PATH (--proxy python runs the "
                           "Python port instead)")
    cmd = [npm, "install", "--prefix", str(NODE_PROXY_DIR), "--no-audit", "--no-fund",
           f"configurable-http-proxy@{NODE_PROXY_VERSION}"]
    done = subprocess.run(cmd + (["--loglevel=error"] if quiet else []), capture_output=True, text=True)
    if done.returncode != 0 or not node_proxy().exists():
        raise RuntimeError(f"npm could not install configurable-http-proxy@{NODE_PROXY_VERSION}: "
                           f"{(done.stderr or done.stdout).strip()[-400:]}")
    return node_proxy()


def proxy_command(choice: str = "auto") -> tuple[list[str], str]:
    """(command, one line saying which proxy and why)."""
    if choice not in CHOICES:
        raise ValueError(f"--proxy {choice!r}: one of {', '.join(CHOICES)}")
    has_node = shutil.which("node") is not None
    if choice == "node" or (choice == "auto" and has_node):
        if not has_node:
            raise RuntimeError("--proxy node: node is not on PATH (--proxy python runs the Python port)")
        path = node_proxy() if node_proxy().exists() else install_node_proxy()
        return [str(path)], f"configurable-http-proxy {NODE_PROXY_VERSION} (Node, {path})"
    if importlib.util.find_spec("configurable_http_proxy") is None:
        raise RuntimeError("no proxy: this box has no Node, and the Python port of configurable-http-proxy is not "
                           "installed (pip install -e room/ brings it)")
    from importlib.metadata import version

    cmd = [sys.executable, "-c", "import sys; from configurable_http_proxy.cli import main; sys.exit(main())"]
    why = "no Node on this box" if choice == "auto" else "--proxy python"
    return cmd, f"configurable-http-proxy {version('configurable-http-proxy')} (the Python port: {why})"
