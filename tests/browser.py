"""Headless Chromium for the report tests: a page's DOM after load, with the count of
images that decoded (page.py's CHECK script sets data-images-decoded)."""

import os
import re
import shutil
import subprocess

import pytest


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make test` installs it (Debian package chromium)")
        pytest.skip("chromium is not installed (make test installs it)")
    return exe


def browser_command(html_path, profile_dir) -> list[str]:
    """The headless command line; its last two items are --dump-dom and the page."""
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile_dir}", "--virtual-time-budget=5000",
            "--dump-dom", html_path.resolve().as_uri()]


def rendered(html_path, profile_dir, images: int) -> str:
    """The DOM Chromium builds from `html_path`; asserts that all `images` decoded."""
    dom = subprocess.run(browser_command(html_path, profile_dir), capture_output=True, text=True,
                         timeout=120).stdout
    m = re.search(r'data-images-decoded="(\d+)/(\d+)"', dom)
    assert m and m.group(1) == m.group(2) == str(images), dom[:500]
    return dom
