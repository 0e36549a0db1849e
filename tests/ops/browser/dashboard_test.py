"""The browser half of dashboard_browser_test.sh: python dashboard_test.py URL SCREENSHOT.

Opens the dashboard in headless Chromium (Debian's /usr/bin/chromium, driven by playwright
for Python from requirements.lock; playwright's bundled driver, no browser download) and
waits, bounded, for what a user should see while two clients ("alpha" and "beta") run spin
jobs on the same 4 devices. Exits 1, naming the first check that failed, otherwise 0.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

from playwright.sync_api import Page, sync_playwright


def step(what: str, check: Callable[[], None]) -> None:
    start = time.monotonic()
    try:
        check()
    except Exception as e:  # playwright's TimeoutError and page errors alike
        raise RuntimeError(f"{what}: {str(e).splitlines()[0]}") from None
    print(f"ok   {what} ({(time.monotonic() - start) * 1000:.0f} ms)", flush=True)


def wait(page: Page, expression: str, arg: Any = None, timeout_ms: int = 20000) -> None:
    page.wait_for_function(expression, arg=arg, timeout=timeout_ms, polling=100)


def check_dashboard(page: Page, screenshot: str) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))

    def loads() -> None:
        page.goto(url)
        page.wait_for_selector("#status.live", timeout=15000)

    step("page loads and the event stream is live", loads)
    step("4 devices on 2 hosts of island0", lambda: wait(page, """() =>
        document.querySelectorAll("#devices .device").length === 4 &&
        document.querySelectorAll("#devices .host").length === 2 &&
        document.querySelector('#devices [data-island="island0"]') !== null"""))
    step("devices show non-zero utilisation", lambda: wait(page, """() =>
        [...document.querySelectorAll("#devices .device")]
          .filter((d) => parseFloat(d.dataset.busy) > 0).length >= 2"""))
    step("memory in use per host", lambda: wait(page, """() =>
        [...document.querySelectorAll("#devices .host .mem")]
          .every((m) => /memory .* \\/ .*, \\d+ objects/.test(m.textContent))"""))

    def both_clients_listed() -> None:
        wait(page, """() => new Set([...document.querySelectorAll("#programs tbody tr[data-run]")]
            .map((r) => r.dataset.client)).size >= 2""")
        wait(page, """() => /alpha/.test(document.querySelector("#clients").textContent) &&
            /beta/.test(document.querySelector("#clients").textContent)""")

    step("programs of both clients are listed", both_clients_listed)

    def timeline_has_both() -> None:
        wait(page, """() => (document.getElementById("timeline").dataset.clients || "")
            .split(",").filter(Boolean).length >= 2""")
        wait(page, """() => {
            const legend = document.getElementById("legend").textContent;
            return /alpha/.test(legend) && /beta/.test(legend); }""")

    step("the timeline shows both clients' gangs", timeline_has_both)

    before = page.evaluate("""() => ({
        spans: +document.getElementById("timeline").dataset.spans,
        runs: [...document.querySelectorAll("#programs tbody tr[data-run]")].map((r) => r.dataset.run),
        gangs: [...document.querySelectorAll("#devices .device")].map((d) => +d.dataset.gangs),
    })""")

    def updates() -> None:
        wait(page, '(n) => +document.getElementById("timeline").dataset.spans >= n + 16',
             before["spans"])
        wait(page, """(runs) => [...document.querySelectorAll("#programs tbody tr[data-run]")]
            .some((r) => !runs.includes(r.dataset.run))""", before["runs"])
        wait(page, """(gangs) => [...document.querySelectorAll("#devices .device")]
            .some((d, i) => +d.dataset.gangs > gangs[i])""", before["gangs"])
        wait(page, """() =>
            document.querySelector('#programs tbody tr[data-state="done"]') !== null""")

    step("the timeline, the programs and the devices update", updates)
    # Let the timeline fill a little for the picture (docs/dashboard.png: 8000 ms).
    page.wait_for_timeout(int(os.environ.get("ATOLL_SCREENSHOT_WAIT_MS", "1500")))
    page.screenshot(path=screenshot)
    print(f"screenshot: {screenshot}")
    summary = page.evaluate("""() => ({
        devices: document.querySelectorAll("#devices .device").length,
        programs: document.querySelectorAll("#programs tbody tr[data-run]").length,
        spans: +document.getElementById("timeline").dataset.spans,
        clients: document.getElementById("timeline").dataset.clients,
    })""")
    print(f"seen: {json.dumps(summary)}")
    if errors:
        raise RuntimeError(f"errors in the page: {'; '.join(errors)}")


if __name__ == "__main__":
    url, screenshot = sys.argv[1:3]
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("ATOLL_CHROMIUM", "/usr/bin/chromium"),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        try:
            check_dashboard(browser.new_page(viewport={"width": 1400, "height": 760}),
                            screenshot)
        except RuntimeError as e:
            print(f"FAIL {e}", file=sys.stderr)
            sys.exit(1)
        finally:
            browser.close()
