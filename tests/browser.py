"""Helpers for the browser tests: a JupyterLab server on loopback, headless Chromium, and a
page that may not reach past this machine.

Chromium comes from Debian (``apt-get install chromium``; ``.ci/run`` installs it) and is
driven by Playwright's Python API without Playwright's own browser download.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


# schemes that never touch the network
LOCAL_SCHEMES = {"file", "data", "blob", "about"}


def leaves_machine(url: str) -> bool:
    """Whether loading ``url`` would go past this machine (anything but loopback or a file)."""
    parsed = urlparse(url)
    if parsed.scheme in LOCAL_SCHEMES:
        return False
    host = (parsed.hostname or "").strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name that is not localhost: resolving it already leaves the machine


def block_the_network(page) -> list[str]:
    """Abort every request of ``page`` that would leave the machine; returns the list of
    such URLs, filled as the page runs (web sockets included)."""
    left: list[str] = []

    def route(request_route):
        url = request_route.request.url
        if leaves_machine(url):
            left.append(url)
            request_route.abort()
        else:
            request_route.continue_()

    page.route("**/*", route)
    page.on("websocket", lambda ws: left.append(ws.url) if leaves_machine(ws.url) else None)
    return left


def browser_missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None if they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    if not Path(CHROMIUM).exists():
        return "no Chromium at /usr/bin/chromium (apt-get install chromium)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_lab(root: Path, settings_dir: Path, timeout: float = 60.0):
    """Start JupyterLab on 127.0.0.1 (free port, random token); yield its base URL + token.

    Settings and workspaces live in ``settings_dir``, so no tabs are restored from an
    earlier session and nothing is written to the user's JupyterLab state.
    """
    port, token = free_port(), secrets.token_hex(16)
    user_settings = settings_dir / "@jupyterlab" / "apputils-extension"
    user_settings.mkdir(parents=True, exist_ok=True)
    # no news pop-up, no update check: both would try the internet and cover the page
    (user_settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings_dir), MPLBACKEND="module://matplotlib_inline.backend_inline")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           f"--LabApp.workspaces_dir={settings_dir / 'workspaces'}",
           "--allow-root", "--LabApp.expose_app_in_browser=True",
           "--ServerApp.open_browser=False"]
    log = open(settings_dir / "jupyterlab.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start; see "
                                       f"{settings_dir / 'jupyterlab.log'}") from None
                time.sleep(0.5)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
