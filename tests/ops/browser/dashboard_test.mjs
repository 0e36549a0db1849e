// The browser half of dashboard_browser_test.sh: node dashboard_test.mjs URL SCREENSHOT.
// Opens the dashboard in headless Chromium and waits (bounded) for what a user should see
// while two clients ("alpha" and "beta") run spin jobs on the same 4 devices.
import { chromium } from "playwright-core";

const [url, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.ATOLL_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});

const step = async (what, fn) => {
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    throw new Error(`${what}: ${e.message.split("\n")[0]}`);
  }
  console.log(`ok   ${what} (${Date.now() - t0} ms)`);
};

let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 760 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  const wait = (fn, arg, timeout = 20000) => page.waitForFunction(fn, arg, { timeout, polling: 100 });

  await step("page loads and the event stream is live", async () => {
    await page.goto(url);
    await page.waitForSelector("#status.live", { timeout: 15000 });
  });
  await step("4 devices on 2 hosts of island0", async () => {
    await wait(() => document.querySelectorAll("#devices .device").length === 4 &&
                     document.querySelectorAll("#devices .host").length === 2 &&
                     document.querySelector('#devices [data-island="island0"]') !== null);
  });
  await step("devices show non-zero utilisation", async () => {
    await wait(() => [...document.querySelectorAll("#devices .device")]
      .filter((d) => parseFloat(d.dataset.busy) > 0).length >= 2);
  });
  await step("memory in use per host", async () => {
    await wait(() => [...document.querySelectorAll("#devices .host .mem")]
      .every((m) => /memory .* \/ .*, \d+ objects/.test(m.textContent)));
  });
  await step("programs of both clients are listed", async () => {
    await wait(() => new Set([...document.querySelectorAll("#programs tbody tr[data-run]")]
      .map((r) => r.dataset.client)).size >= 2);
    await wait(() => /alpha/.test(document.querySelector("#clients").textContent) &&
                     /beta/.test(document.querySelector("#clients").textContent));
  });
  await step("the timeline shows both clients' gangs", async () => {
    await wait(() => (document.getElementById("timeline").dataset.clients || "")
      .split(",").filter(Boolean).length >= 2);
    await wait(() => {
      const legend = document.getElementById("legend").textContent;
      return /alpha/.test(legend) && /beta/.test(legend);
    });
  });

  const before = await page.evaluate(() => ({
    spans: +document.getElementById("timeline").dataset.spans,
    runs: [...document.querySelectorAll("#programs tbody tr[data-run]")].map((r) => r.dataset.run),
    gangs: [...document.querySelectorAll("#devices .device")].map((d) => +d.dataset.gangs),
  }));
  await step("the timeline, the programs and the devices update", async () => {
    await wait((n) => +document.getElementById("timeline").dataset.spans >= n + 16, before.spans);
    await wait((runs) => [...document.querySelectorAll("#programs tbody tr[data-run]")]
      .some((r) => !runs.includes(r.dataset.run)), before.runs);
    await wait((gangs) => [...document.querySelectorAll("#devices .device")]
      .some((d, i) => +d.dataset.gangs > gangs[i]), before.gangs);
    await wait(() => document.querySelector('#programs tbody tr[data-state="done"]') !== null);
  });
  // Let the timeline fill a little for the picture (docs/dashboard.png: 8000 ms).
  await page.waitForTimeout(Number(process.env.ATOLL_SCREENSHOT_WAIT_MS || 1500));
  await page.screenshot({ path: screenshot });
  console.log(`screenshot: ${screenshot}`);
  const summary = await page.evaluate(() => ({
    devices: document.querySelectorAll("#devices .device").length,
    programs: document.querySelectorAll("#programs tbody tr[data-run]").length,
    spans: +document.getElementById("timeline").dataset.spans,
    clients: document.getElementById("timeline").dataset.clients,
  }));
  console.log(`seen: ${JSON.stringify(summary)}`);
  if (errors.length) throw new Error(`errors in the page: ${errors.join("; ")}`);
} catch (e) {
  console.error(`FAIL ${e.message}`);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
