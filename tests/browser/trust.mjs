// Drives the inspector in Debian's Chromium (playwright-core) through what issue 41 item 11 found
// wrong, and prints what the page showed as one JSON document; tests/browser/
// test_inspector_trust.py compares it with the API.
//
// Input (JSON in argv[2]): chromium, url (a server with auth off and an embedder), sessionId,
// artifacts (directory for screenshots).

import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const out = { requests: [], errors: [], steps: {} };
const TIMEOUT = 15000;
const base = cfg.url;
const sid = encodeURIComponent(cfg.sessionId);
const path = `/ui/sessions/${sid}`;

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
const shot = (page, name) => page.screenshot({ path: `${cfg.artifacts}/${name}.png`, fullPage: true });
const ready = (page) =>
  page.waitForFunction((p) => document.querySelector("main")?.dataset.ready === p, path);
const api = async (p, init = {}) => {
  const r = await fetch(`${base}${p}`, { ...init, headers: { "Content-Type": "application/json" } });
  if (!r.ok) throw new Error(`${init.method || "GET"} ${p}: ${r.status} ${await r.text()}`);
  return r.json();
};

async function legendOf(page) {
  return Object.fromEntries(await page.$$eval("#budget-bar .bar-legend li[data-segment]",
    (els) => els.map((e) => [e.dataset.segment, e.textContent])));
}

async function budget(page, query) {
  await page.goto(`${base}${path}?tab=context&${query}`);
  await page.waitForSelector("#context-response", { state: "attached" });
  return {
    report: JSON.parse(await page.locator("#context-response").textContent()).report,
    legend: await legendOf(page),
  };
}

try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("request", (r) => out.requests.push(r.url()));
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });

  // 1. The timeline: which outputs are shown under which call.
  await page.goto(`${base}${path}`);
  await ready(page);
  out.steps.pairs = await page.$$eval(".timeline > li.pair", (lis) => lis.map((li) => ({
    call: Number(li.dataset.seq),
    outputs: [...li.querySelectorAll(".outputs [data-seq]")].map((e) => Number(e.dataset.seq)),
  })));
  out.steps.loneOutputs = await page.$$eval(".timeline > li[data-type=function_call_output]",
    (els) => els.map((e) => Number(e.dataset.seq)));
  await shot(page, "trust-timeline");

  // 2. Search by meaning in the session: what each hit shows.
  await page.goto(`${base}${path}?tab=search&q=zebra&mode=semantic`);
  await page.waitForSelector("#search-results[data-count]");
  out.steps.search = {
    answered: await page.getAttribute("#search-results", "data-mode"),
    hits: await page.$$eval("#search-results .hits li", (lis) => lis.map((li) => ({
      seq: li.querySelector(".seq")?.textContent,
      kind: li.querySelector(".kind")?.textContent,
      text: li.querySelector(".snippet")?.textContent ?? "",
    }))),
  };
  await shot(page, "trust-search");

  // 3. The budget bar, with recall and without: the same 40 tokens for the rest of the prompt
  // (too few for the first turn, which recall finds), 150 more for the recall block.
  const recallQuery = "format=openai-chat&max_tokens=190&recall=150";
  const withRecall = await budget(page, recallQuery);
  const recalledMarked = await page.$$eval("#context-result .timeline [data-seq].recalled",
    (els) => els.map((e) => Number(e.dataset.seq)).sort((a, b) => a - b));
  await page.locator("#budget-bar").scrollIntoViewIfNeeded();
  await shot(page, "trust-budget");
  const without = await budget(page, "format=openai-chat&max_tokens=40");
  out.steps.budget = { withRecall, without, recalledMarked };

  // 4. A snapshot, then the newest item replaced under its own id: the diff with now.
  await page.goto(`${base}${path}?tab=snapshots`);
  await page.waitForSelector("#snapshot-form");
  await page.fill('#snapshot-form input[name="label"]', "trust-check");
  await page.click("#snapshot-create");
  await page.waitForSelector('table.snapshots td:text("trust-check")');
  const popped = (await api(`/v1/sessions/${sid}/items/pop`, { method: "POST" })).item;
  await api(`/v1/sessions/${sid}/items`, {
    method: "POST",
    body: JSON.stringify({ items: [{ type: "message", role: "user", id: popped.id, content: popped.content.replace("zebra", "okapi") }] }),
  });
  await page.reload();
  await page.waitForSelector('table.snapshots td:text("trust-check")');
  await page.locator("table.snapshots tbody tr", { hasText: "trust-check" }).locator(".diff-button").click();
  await page.waitForSelector("#snapshot-diff");
  out.steps.diff = {
    text: await page.locator("#snapshot-diff").innerText(),
    changed: await page.$$eval("#snapshot-diff .diff.changed li", (lis) => lis.map((li) => ({
      fields: [...li.querySelectorAll("dt")].map((e) => e.textContent),
      before: li.querySelector("del")?.textContent,
      after: li.querySelector("ins")?.textContent,
    }))),
  };
  await shot(page, "trust-diff");
} catch (err) {
  out.failure = String(err?.stack || err);
} finally {
  await browser.close();
  process.stdout.write(JSON.stringify(out));
}
