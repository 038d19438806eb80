"""Helpers for the browser tests: a JupyterLab server on loopback and headless Chromium.

Chromium comes from Debian (``apt-get install chromium``; ``.ci/run`` installs it) and is
driven by Playwright's Python API without Playwright's own browser download.
"""

from __future__ import annotations

import contextlib
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

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


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
