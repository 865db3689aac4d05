// Drives the inspector in Debian's Chromium (playwright-core) through issue 46's inspector part
// and prints what the page showed as one JSON document; tests/browser/test_inspector_pictures.py
// compares it with the API.
//
// Input (JSON in argv[2]): chromium, url (a server with auth off and an embedder), phase
// ("empty": a new server's list; "session": one session's views), sessionId, budget (query
// string of the two reads), recallBudget (query string of a read with recall), artifacts.

import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const out = { requests: [], errors: [], steps: {} };
const TIMEOUT = 20000;
const base = cfg.url;
const sid = encodeURIComponent(cfg.sessionId ?? "");
const path = `/ui/sessions/${sid}`;

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
const shot = (page, name, fullPage = false) => page.screenshot({ path: `${cfg.artifacts}/${name}.png`, fullPage });
const ready = (page, p) => page.waitForFunction((want) => document.querySelector("main")?.dataset.ready === want, p);
const api = async (p, init = {}) => {
  const r = await fetch(`${base}${p}`, { ...init, headers: { "Content-Type": "application/json" } });
  if (!r.ok) throw new Error(`${init.method || "GET"} ${p}: ${r.status} ${await r.text()}`);
  return r.json();
};

async function chart(page) {
  return page.$eval("#usage-chart", (svg) => ({
    points: [...svg.querySelectorAll("circle.wm")].map((c) => ({ version: Number(c.dataset.version), tokens: Number(c.dataset.tokens) })),
    budget: svg.querySelector(".budget-line")?.dataset.tokens ?? null,
    compactions: [...svg.querySelectorAll(".compaction")].map((g) => Number(g.dataset.version)),
    reads: [...svg.querySelectorAll("path.read")].map((p) => ({ version: Number(p.dataset.version), tokens: Number(p.dataset.tokens), share: Number(p.dataset.share) })),
    title: svg.querySelector("title")?.textContent,
  }));
}

const response = async (page) => JSON.parse(await page.locator("#context-response").textContent());

try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("request", (r) => out.requests.push(r.url()));
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });

  if (cfg.phase === "empty") {
    await page.goto(`${base}/ui/`);
    await ready(page, "/ui/");
    out.steps.empty = {
      tables: await page.locator("table.sessions").count(),
      text: await page.locator("#empty-state").innerText(),
      commands: await page.locator("#first-session").textContent(),
      docs: await page.getAttribute("#empty-docs", "href"),
    };
    await shot(page, "empty-state");
  } else {
    // 1. At 1400x900 every tab's own content starts on the first screen; the details are folded.
    const tops = {};
    for (const tab of ["memory", "context", "compactions", "snapshots", "events", "search"]) {
      await page.goto(`${base}${path}?tab=${tab}`);
      await ready(page, path);
      tops[tab] = await page.$eval("#panel", (el) => el.getBoundingClientRect().top);
      if (tab === "memory") {
        out.steps.detailsOpen = await page.$eval("#session-details", (d) => d.open);
        out.steps.memoryLegend = await page.locator("#panel .legend").count();
        out.steps.memoryText = await page.locator("#panel").innerText();
        await shot(page, "session-tab-first");
        await page.click("#session-details > summary");
        await page.click("#session-metadata > summary");
        out.steps.metadata = await page.locator("#session-metadata pre").textContent();
        out.steps.configFolded = await page.$eval("#session-config", (d) => !d.open);
        await shot(page, "session-details");
      }
    }
    out.steps.panelTops = tops;

    // 2. Pictures over time: the first read, then the agent writes, then the same read again.
    await page.goto(`${base}${path}?tab=context&${cfg.budget}`);
    await page.waitForSelector("#usage-chart");
    out.steps.first = { chart: await chart(page), response: await response(page), none: await page.locator("#read-diff-none").count() };
    await page.locator("#usage").scrollIntoViewIfNeeded();
    await shot(page, "over-time");
    await api(`/v1/sessions/${sid}/items`, {
      method: "POST",
      body: JSON.stringify({ format: "openai-chat", items: [
        { role: "assistant", content: "The last file is read; the failing test is test_budget." },
        { role: "user", content: "Fix test_budget, then run the whole suite." }] }),
    });
    await page.click("#budget-form button[type=submit]");
    await page.waitForSelector("#read-diff-summary");
    out.steps.second = {
      chart: await chart(page),
      response: await response(page),
      summary: await page.locator("#read-diff-summary").innerText(),
      stableHeld: await page.locator("#stable-held").innerText(),
      added: await page.$$eval("#read-diff li.added", (lis) => lis.map((li) => li.textContent)),
      removed: await page.$$eval("#read-diff li.removed", (lis) => lis.map((li) => li.textContent)),
      stableEnd: await page.$$eval("#read-diff li.stable-end", (lis) => lis.map((li) => li.textContent)),
      stableBadges: await page.$$eval("#read-diff .badge.stable", (els) => els.map((e) => e.textContent)),
      share: await page.locator("#read-share").innerText(),
      legend: await page.$$eval("#context-result .legend [data-mark]", (els) => els.map((e) => e.dataset.mark)),
    };
    await page.locator("#read-diff").scrollIntoViewIfNeeded();
    await shot(page, "read-diff");

    // 3. A read with recall: the table shows each entry's text and the API's score.
    await page.goto(`${base}${path}?tab=context&${cfg.recallBudget}`);
    await page.waitForSelector("#context-response", { state: "attached" });
    out.steps.recall = {
      response: await response(page),
      rows: await page.$$eval("#recalled tbody tr", (trs) => trs.map((tr) => ({
        seq: Number(tr.dataset.seq),
        text: tr.querySelector(".recall-text").textContent,
        score: tr.querySelector(".score").textContent,
      }))),
      meaning: await page.locator("#score-meaning").innerText(),
      link: await page.getAttribute("#score-meaning a", "href"),
    };
    await page.locator("#recalled").scrollIntoViewIfNeeded();
    await shot(page, "recall-table");
  }
} catch (err) {
  out.failure = String(err?.stack || err);
} finally {
  await browser.close();
  process.stdout.write(JSON.stringify(out));
}
