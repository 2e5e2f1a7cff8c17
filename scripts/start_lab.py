"""Start JupyterLab on the first notebook and print the address to open (``make lab``).

It picks a free port and a random token itself, so the address it prints is the one the server
answers on. ``--allow-root`` is passed only when running as root (containers, many cloud VMs),
where JupyterLab otherwise refuses to start; nobody else needs it. Without a screen (no DISPLAY
on Linux) no browser is opened: open the printed address yourself, through an SSH tunnel from a
remote machine.

    python scripts/start_lab.py [--ip 127.0.0.1] [--port 0] [jupyter lab options ...]
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIRST_NOTEBOOK = "notebooks/00_setup_and_tour.ipynb"


def free_port(ip: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def has_screen() -> bool:
    if not sys.platform.startswith("linux"):
        return True  # macOS and Windows open the default browser without a DISPLAY
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab_command(ip: str, port: int, token: str, *, as_root: bool, open_browser: bool,
                extra: list[str] = ()) -> list[str]:
    """The ``jupyter lab`` command line (python -m jupyter, so no venv needs to be active)."""
    cmd = [sys.executable, "-m", "jupyter", "lab",
           f"--ServerApp.ip={ip}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO}"]
    if as_root:
        cmd.append("--allow-root")  # JupyterLab refuses root without it ("Running as root is not recommended")
    if not open_browser:
        cmd.append("--no-browser")
    return cmd + list(extra) + [FIRST_NOTEBOOK]


def lab_url(ip: str, port: int, token: str) -> str:
    host = "127.0.0.1" if ip in ("", "0.0.0.0", "localhost") else ip
    return f"http://{host}:{port}/lab/tree/{FIRST_NOTEBOOK}?token={token}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ip", default=os.environ.get("LAB_IP") or "127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("LAB_PORT") or 0),
                        help="port (default: a free one)")
    args, extra = parser.parse_known_args(argv)
    port = args.port or free_port(args.ip if args.ip != "0.0.0.0" else "")
    token = secrets.token_hex(24)
    cmd = lab_command(args.ip, port, token, as_root=is_root(), open_browser=has_screen(), extra=extra)
    url = lab_url(args.ip, port, token)
    bar = "=" * 78
    print(f"{bar}\n  JupyterLab is starting. Open the lab at:\n\n    {url}\n", flush=True)
    if args.ip == "0.0.0.0":
        print("  (listening on every interface: use this machine's address in place of 127.0.0.1)")
    elif not has_screen():
        print(f"  On a remote machine, tunnel first: ssh -L {port}:127.0.0.1:{port} <this machine>")
    if is_root():
        print("  Running as root: started with --allow-root; the token above still guards the server.")
    print(f"  Stop it with Ctrl-C.\n{bar}", flush=True)
    os.chdir(REPO)
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
