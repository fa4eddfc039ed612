"""The status page of `catchup serve` in a real headless browser (Debian's chromium, driven by
Selenium through Debian's chromedriver): the verdict in the title, the jobs, a job's page with
its failure; text a user or a job wrote (a script, quotes, a right-to-left override) stays
text and never runs; no page scrolls sideways at 1280 or 390 px; screenshots are kept as test
artifacts (artifacts/status-*.png, or $CATCHUP_TEST_ARTIFACTS) for the docs' pictures."""

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
RTL = "\u202e"  # a right-to-left override: shown escaped, never reordering the page
WIDTHS = (1280, 390)


@pytest.mark.slow
def test_the_status_page_in_a_real_browser(project: Project, sql: Any) -> None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    says = f"echo \"{HOSTILE} 'quoted' {RTL}right-to-left\"; exit 3"
    project.write(
        '[serve]\ntitle = "acme billing"\n'
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        '[jobs.hostile]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f"evidence = '''SELECT \"{HOSTILE}\" FROM {project.schema}.jobs'''\n"
        '[jobs.failing]\nschedule = "daily"\nstart = "2026-10-01"\n'
        f"command = ['sh', '-c', '''{says}''']\n"
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    assert project.cli("-q", "run", "failing", "--period", "2026-10-03").exit_code == 1
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    # the browser keeps the real clock: under a moved one (libfaketime, CI) chromium hangs, and
    # the dates it shows come from catchup serve anyway
    real = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME")}
    service = Service(executable_path=driver_path, env=real)
    browser = webdriver.Chrome(options=options, service=service)
    folder = Path(os.environ.get("CATCHUP_TEST_ARTIFACTS") or ROOT / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    try:

        def loaded() -> bool:
            try:
                browser.get(base + "/")
            except Exception:  # the server is not listening yet
                return False
            return "hostile" in browser.find_element(By.TAG_NAME, "body").text

        wait_for(loaded, timeout=60, what="the page with the jobs")
        for width in WIDTHS:
            browser.set_window_size(width, 1000)
            for name, path in (
                ("home", "/"),
                ("job", "/jobs/failing"),
                ("hostile", "/jobs/hostile"),
            ):
                browser.get(base + path)
                body = browser.find_element(By.TAG_NAME, "body").text
                assert browser.execute_script("return document.scripts.length") == 0
                title = browser.title
                assert title.endswith(" · acme billing") and "pwned" not in title, title
                assert "postgres" not in body.lower()  # nothing of the database on the page
                wide = browser.execute_script(
                    "return [document.documentElement.scrollWidth, window.innerWidth]"
                )
                assert wide[0] <= wide[1], f"{path} scrolls sideways at {width} px: {wide}"
                if name == "home":
                    assert title.startswith("3 gap ranges in 3 jobs") or "gap range" in title
                    for text in ("billing", "failing", "Scheduler:", "no tick recorded yet"):
                        assert text in body, text
                    assert HOSTILE in body  # shown, as text
                elif name == "job":
                    assert title.startswith("failing: ")
                    for text in ("Failures that still stand", "exit code 3", "catchup replay"):
                        assert text in body, text
                    browser.find_element(By.TAG_NAME, "summary").click()  # the output tail
                    tail = browser.find_element(By.CSS_SELECTOR, "details pre").text
                    assert HOSTILE in tail and "'quoted'" in tail and "\\u202eright" in tail
                    assert RTL not in browser.page_source
                shot = folder / f"status-{name}-{width}.png"
                assert browser.save_screenshot(str(shot))
                assert shot.stat().st_size > 10_000
    finally:
        browser.quit()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
