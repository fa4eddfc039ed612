"""The status page of `catchup serve` in a real headless browser (Debian's chromium, driven by
Selenium through Debian's chromedriver): the jobs and gaps are there, text a user wrote that
looks like a script stays text and never runs, and a screenshot is kept as a test artifact
(artifacts/status-page.png, or $CATCHUP_TEST_ARTIFACTS)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project
from paths import ROOT

HOSTILE = "<script>document.title='pwned'</script>"


@pytest.mark.slow
def test_the_status_page_in_a_real_browser(project: Project, sql: Any) -> None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        '[jobs.hostile]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f"evidence = '''SELECT \"{HOSTILE}\" FROM {project.schema}.jobs'''\n"
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    # the browser keeps the real clock: under a moved one (libfaketime, CI) chromium hangs, and
    # the dates it shows come from catchup serve anyway
    real = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME")}
    service = Service(executable_path=driver_path, env=real)
    browser = webdriver.Chrome(options=options, service=service)
    try:

        def loaded() -> bool:
            try:
                browser.get(f"http://127.0.0.1:{port}/")
            except Exception:  # the server is not listening yet
                return False
            return "hostile" in browser.find_element(By.TAG_NAME, "body").text

        wait_for(loaded, timeout=60, what="the page with the jobs")
        body = browser.find_element(By.TAG_NAME, "body").text
        for text in ("catchup status", "billing", "missing", "2026-10-01", "legend:"):
            assert text in body, text
        assert HOSTILE in body  # shown, as text
        assert browser.title == "catchup status"  # and never run
        assert browser.execute_script("return document.scripts.length") == 0
        folder = Path(os.environ.get("CATCHUP_TEST_ARTIFACTS") or ROOT / "artifacts")
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / "status-page.png"
        assert browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
    finally:
        browser.quit()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
