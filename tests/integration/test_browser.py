"""The status page of `catchup serve` in a real headless browser (Debian's chromium, driven by
Selenium through Debian's chromedriver): the verdict in the title, the jobs, a job's page with
its failure; text a user or a job wrote (a script, quotes, a right-to-left override) stays
text and never runs; no page scrolls sideways at 1280 or 390 px; screenshots are kept as test
artifacts (artifacts/status-*.png, or $CATCHUP_TEST_ARTIFACTS) for the docs' pictures; every
page has no serious or critical accessibility violation by axe-core (the npm package, pinned
in .ci/axe, injected into the page), and every link and control is reached by the keyboard."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project
from paths import ROOT

HOSTILE = "<script>document.title='pwned'</script>"
RTL = "\u202e"  # a right-to-left override: shown escaped, never reordering the page
WIDTHS = (1280, 390)
AXE = ROOT / ".ci" / "axe"
PAGES = (
    ("home", "/"),
    ("job", "/jobs/failing"),
    ("hostile", "/jobs/hostile"),
    ("period", "/jobs/failing/2026-10-03"),
    ("keys", "/keys/tenants"),
)


def axe_source() -> str:
    """axe-core's script, as .ci/axe pins it: installed there from the npm registry on first
    use (as .ci/run does), through npm's lock file."""
    script = AXE / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("needs npm for axe-core (.ci/run installs it: npm ci --prefix .ci/axe)")
        subprocess.run(
            [npm, "ci", "--prefix", str(AXE), "--no-audit", "--no-fund"],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return script.read_text()


def violations(browser: Any, source: str) -> list[str]:
    """axe-core's serious and critical violations of the page the browser shows, one line
    each (the rule, its impact, the first element it names)."""
    browser.execute_script(source)
    found = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(JSON.stringify(r.violations)), e => done(JSON.stringify(String(e))));"
    )
    said = json.loads(found)
    assert isinstance(said, list), said
    return [
        f"{v['id']} ({v['impact']}): {v['nodes'][0]['target'] if v['nodes'] else ''} {v['help']}"
        for v in said
        if v["impact"] in ("serious", "critical")
    ]


def tab_stops(browser: Any) -> tuple[int, int]:
    """How many elements Tab reaches before it comes round again, and how many links and
    controls the page has: the keyboard reaches each one."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    wanted = browser.execute_script(
        "document.activeElement && document.activeElement.blur();"
        "return document.querySelectorAll('a[href], input, button, summary').length"
    )
    reached: set[int] = set()
    for _ in range(wanted + 5):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        which = browser.execute_script(
            "const e = document.activeElement;"
            "return e === document.body ? null : [...document.querySelectorAll('*')].indexOf(e)"
        )
        if which is None or which in reached:
            break
        reached.add(which)
    return len(reached), wanted


@pytest.mark.slow
def test_the_status_page_in_a_real_browser(project: Project, sql: Any) -> None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    source = axe_source()

    says = f"echo \"{HOSTILE} 'quoted' {RTL}right-to-left\"; exit 3"
    project.write(
        '[serve]\ntitle = "acme billing"\n'
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        '[jobs.hostile]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f"evidence = '''SELECT \"{HOSTILE}\" FROM {project.schema}.jobs'''\n"
        '[jobs.failing]\nschedule = "daily"\nstart = "2026-10-01"\n'
        f"command = ['sh', '-c', '''{says}''']\n"
        '[jobs.tenants]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        'keys = ["acme", "globex"]\n'
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
            for name, path in PAGES:
                browser.get(base + path)
                # from the top of the page as it loaded: Tab reaches every link and control
                reached, wanted = tab_stops(browser)
                assert reached == wanted, f"{path}: Tab reaches {reached} of {wanted} at {width}"
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
                    assert "gap ranges in 4 jobs" in title, title
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
                elif name == "period":
                    assert title.startswith("2026-10-03 of failing: failed")
                    for text in ("Attempt 1", "exit code 3", "Changes by hand"):
                        assert text in body, text
                    tail = browser.find_element(By.CSS_SELECTOR, "details pre").text
                    assert HOSTILE in tail and "\\u202eright" in tail
                found = violations(browser, source)
                assert not found, f"{path} at {width} px: " + "; ".join(found)
                browser.execute_script(  # the picture from the top, as the page opened
                    "document.activeElement && document.activeElement.blur(); scrollTo(0, 0)"
                )
                shot = folder / f"status-{name}-{width}.png"
                assert browser.save_screenshot(str(shot))
                assert shot.stat().st_size > 10_000
    finally:
        browser.quit()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
