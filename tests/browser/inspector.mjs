// Drives the inspector in Debian's Chromium (playwright-core, no downloaded browser) and prints
// what the page showed as one JSON document; tests/browser/test_inspector.py compares it with
// the API. Every request the browser makes is recorded: the test asserts none left 127.0.0.1.
//
// Input (JSON in argv[2]): chromium, authOn {url, key, readKey}, authOff {url}, sessionId,
// budget {format, max_tokens, max_recent_tool_results}, artifacts (directory for screenshots).

import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const out = { requests: [], errors: [], steps: {}, timings: {} };
const t0 = Date.now();
const mark = (name) => { out.timings[name] = (Date.now() - t0) / 1000; };
const TIMEOUT = 15000;

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});

async function newPage(width = 1280, height = 900) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("request", (r) => out.requests.push(r.url()));
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });
  return page;
}

const ready = (page, path) =>
  page.waitForFunction((p) => document.querySelector("main")?.dataset.ready === p, path);
const shot = (page, name, fullPage = false) =>
  page.screenshot({ path: `${cfg.artifacts}/${name}.png`, fullPage });

async function signIn(page, base, key) {
  await page.goto(`${base}/ui/`);
  await page.waitForSelector("#key-form");
  out.steps.keyPromptShown = true;
  out.steps.sessionsBeforeKey = await page.locator("table.sessions").count();
  await page.fill("#api-key", "smk_000000000000_not-a-real-key-at-all");
  await page.press("#api-key", "Enter");
  await page.waitForSelector("#key-form .notice.error");
  out.steps.wrongKeyError = await page.locator("#key-form .notice.error").innerText();
  await page.fill("#api-key", key);
  await page.click("#key-form button[type=submit]");
  await ready(page, "/ui/");
}

try {
  const { url: base, key, readKey } = cfg.authOn;
  const sid = encodeURIComponent(cfg.sessionId);
  const page = await newPage();

  mark("before 1");
  // 1. Auth on: the key is asked for once, then kept for the tab.
  await signIn(page, base, key);
  out.steps.sessionRows = await page.locator(`table.sessions tr[data-session="${cfg.sessionId}"]`).count();
  out.steps.who = await page.locator("#who").innerText();
  await shot(page, "sessions");
  await page.reload();
  await ready(page, "/ui/");
  out.steps.keyFormAfterReload = await page.locator("#key-form").count();

  mark("before 2");
  // 2. Working memory.
  await page.click(`a[href="/ui/sessions/${sid}"]`);
  await ready(page, `/ui/sessions/${sid}`);
  out.steps.memoryEntries = await page.locator(".timeline [data-seq]").count();
  out.steps.pairs = await page.locator(".timeline li.pair .outputs [data-type=function_call_output]").count();
  out.steps.images = await page.locator('.timeline img[src^="data:image/png"]').count();
  out.steps.imageLoaded = await page.locator(".timeline img").first().evaluate((img) => img.complete && img.naturalWidth > 0);

  mark("before 3");
  // 3. What the model gets, for a budget typed into the form.
  await page.click('nav.tabs a[data-tab="context"]');
  await page.waitForSelector("#context-response", { state: "attached" });
  await page.selectOption('#budget-form select[name="format"]', cfg.budget.format);
  await page.fill('#budget-form input[name="max_tokens"]', String(cfg.budget.max_tokens));
  await page.fill('#budget-form input[name="max_recent_tool_results"]', String(cfg.budget.max_recent_tool_results));
  await page.click("#budget-form button[type=submit]");
  await page.waitForFunction((f) => {
    const el = document.querySelector("#context-response");
    return el && JSON.parse(el.textContent).format === f;
  }, cfg.budget.format);
  out.steps.budgetFields = await page.$$eval("#budget-form [name]", (els) => els.map((e) => e.name));
  out.steps.contextResponse = JSON.parse(await page.locator("#context-response").textContent());
  out.steps.prompt = JSON.parse(await page.locator("#prompt").textContent());
  out.steps.droppedShown = await page.locator("#dropped-ranges").innerText();
  out.steps.droppedSeqs = await page.$$eval("#context-result .timeline [data-seq].dropped", (els) => els.map((e) => Number(e.dataset.seq)));
  out.steps.clearedSeqs = await page.$$eval("#context-result .timeline [data-seq].cleared", (els) => els.map((e) => Number(e.dataset.seq)));
  out.steps.barSegments = await page.$$eval("#budget-bar .bar-legend li[data-segment]", (els) => els.map((e) => e.dataset.segment));
  // What the API answers for the same budget, asked now (before the writes below change the
  // session), with GET and query parameters where the page used POST and a JSON body.
  const auth = { headers: { Authorization: `Bearer ${key}` } };
  const query = new URLSearchParams(Object.entries(cfg.budget).map(([k, v]) => [k, String(v)]));
  out.steps.apiContext = await (await fetch(`${base}/v1/sessions/${sid}/context?${query}`, auth)).json();
  out.steps.apiItems = (await (await fetch(`${base}/v1/sessions/${sid}/items?limit=1000`, auth)).json()).items;
  await page.locator("#budget-bar").scrollIntoViewIfNeeded();
  await page.evaluate(() => window.scrollTo(0, document.querySelector("nav.tabs").offsetTop - 8));
  await shot(page, "inspector");

  mark("before 4");
  // 4. Compaction: a dry run is shown and commits nothing.
  await page.click('nav.tabs a[data-tab="compactions"]');
  await page.waitForSelector("#compact-form");
  out.steps.commitDisabledBeforePreview = await page.locator("#compact-commit").isDisabled();
  await page.fill('#compact-form input[name="keep_last_items"]', "20");
  await page.click("#compact-preview");
  await page.waitForSelector("#compact-preview-result");
  out.steps.previewCompacted = Number((await page.locator("#compact-preview-result .compacted-items").innerText()).replace(/,/g, ""));
  out.steps.previewRanges = await page.locator("#compact-preview-result .compacted-ranges").innerText();
  out.steps.commitEnabledAfterPreview = await page.locator("#compact-commit").isEnabled();
  await shot(page, "compaction-preview");
  await page.reload();
  await ready(page, `/ui/sessions/${sid}`);
  out.steps.itemsAfterPreview = Number((await page.locator("#session-items").innerText()).replace(/,/g, ""));

  mark("before 5");
  // 5. Snapshots: create, diff against now, restore (the undo snapshot is named).
  await page.click('nav.tabs a[data-tab="snapshots"]');
  await page.waitForSelector("#snapshot-form");
  await page.fill('#snapshot-form input[name="label"]', "from-the-inspector");
  await page.click("#snapshot-create");
  await page.waitForSelector('table.snapshots td:text("from-the-inspector")');
  await page.locator("table.snapshots tbody tr").first().locator(".diff-button").click();
  await page.waitForSelector("#snapshot-diff");
  out.steps.diff = await page.locator("#snapshot-diff").innerText();
  await page.locator("table.snapshots tbody tr").first().locator(".restore-button").click();
  await page.click("#restore-confirm");
  await page.waitForSelector("#undo-snapshot");
  out.steps.undoSnapshot = await page.locator("#undo-snapshot").innerText();
  out.steps.undoOffered = await page.locator("#undo-restore").count();
  await shot(page, "snapshots");

  mark("before 6");
  // 6. Events and search.
  await page.click('nav.tabs a[data-tab="events"]');
  await page.waitForSelector("#events tbody tr");
  out.steps.eventTypes = await page.$$eval("#events tbody tr td:nth-child(2)", (els) => els.map((e) => e.textContent));
  await page.click('nav.tabs a[data-tab="search"]');
  await page.fill("#search-q", "screenshot");
  await page.press("#search-q", "Enter");
  await page.waitForSelector("#search-results[data-count]");
  out.steps.sessionSearchHits = Number(await page.getAttribute("#search-results", "data-count"));
  await page.goto(`${base}/ui/search?q=wires`);
  await page.waitForSelector("#search-results[data-count]");
  out.steps.tenantSearchSessions = await page.$$eval("#search-results .hits a", (els) => [...new Set(els.map((e) => e.textContent))]);
  out.steps.searchModes = {
    chosen: await page.inputValue("#search-mode"),
    answered: await page.getAttribute("#search-results", "data-mode"),
    scores: await page.locator("#search-results .hits .tokens").first().innerText(),
  };

  mark("before 7");
  // 7. A read-only key gets no write actions.
  const reader = await newPage();
  await signIn(reader, base, readKey);
  await reader.goto(`${base}/ui/sessions/${sid}?tab=snapshots`);
  await ready(reader, `/ui/sessions/${sid}`);
  out.steps.readOnly = {
    badge: await reader.locator("#read-only").count(),
    snapshotForm: await reader.locator("#snapshot-form").count(),
    restoreButtons: await reader.locator(".restore-button").count(),
    diffButtons: await reader.locator(".diff-button").count(),
  };
  await reader.goto(`${base}/ui/sessions/${sid}?tab=compactions`);
  await ready(reader, `/ui/sessions/${sid}`);
  out.steps.readOnly.compactForm = await reader.locator("#compact-form").count();

  mark("before 8");
  // 8. Keyboard: skip link first, then the links can be reached and followed with Enter.
  const kb = await newPage();
  await kb.goto(`${cfg.authOff.url}/ui/`);
  await ready(kb, "/ui/");
  out.steps.authOffKeyForm = await kb.locator("#key-form").count();
  out.steps.authOffWho = await kb.locator("#who").innerText();
  await kb.keyboard.press("Tab");
  out.steps.firstTab = await kb.evaluate(() => document.activeElement?.className);
  let reached = false;
  for (let i = 0; i < 40 && !reached; i++) {
    await kb.keyboard.press("Tab");
    reached = await kb.evaluate(() => document.activeElement?.getAttribute("href")?.startsWith("/ui/sessions/") ?? false);
  }
  out.steps.keyboardReachedSession = reached;
  if (reached) {
    await kb.keyboard.press("Enter");
    await kb.waitForFunction(() => location.pathname.startsWith("/ui/sessions/") && document.querySelector("main")?.dataset.ready?.startsWith("/ui/sessions/"));
    out.steps.keyboardOpened = await kb.evaluate(() => location.pathname);
  }

  mark("before 9");
  // 9. Phone width: nothing wider than the screen.
  const phone = await newPage(390, 844);
  await phone.goto(`${cfg.authOff.url}/ui/sessions/${sid}?tab=context&max_tokens=2000`);
  await phone.waitForSelector("#context-response", { state: "attached" });
  out.steps.phoneOverflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await shot(phone, "phone-context");

  mark("before 9b");
  // 9b. A session written in openai-chat: the prompt view opens in its own format (canonical is
  // a choice), hints show no raw Markdown, an image URL that is not a web address is no link.
  const chat = await newPage();
  const chatPath = `/ui/sessions/${cfg.chatSessionId}`;
  await chat.goto(`${cfg.authOff.url}${chatPath}?tab=context`);
  await chat.waitForSelector("#context-response", { state: "attached" });
  out.steps.chat = {
    openingFormat: await chat.inputValue('#budget-form select[name="format"]'),
    formatOptions: await chat.$$eval('#budget-form select[name="format"] option', (els) => els.map((e) => e.value)),
    responseFormat: JSON.parse(await chat.locator("#context-response").textContent()).format,
    promptTitle: await chat.locator("#prompt-title").innerText(),
    hintsWithBackticks: await chat.$$eval("#budget-form .hint", (els) => els.filter((e) => e.textContent.includes("`")).length),
    hintCodes: await chat.locator("#budget-form .hint code").count(),
  };
  await chat.selectOption('#budget-form select[name="format"]', "canonical");
  await chat.click("#budget-form button[type=submit]");
  await chat.waitForFunction(() => JSON.parse(document.querySelector("#context-response")?.textContent || "{}").format === "canonical");
  out.steps.chat.canonicalTitle = await chat.locator("#prompt-title").innerText();
  await chat.goto(`${cfg.authOff.url}${chatPath}`);
  await ready(chat, chatPath);
  out.steps.chat.imageLinks = await chat.$$eval(".timeline .image-link a", (els) => els.map((e) => e.getAttribute("href")));
  out.steps.chat.refusedImages = await chat.$$eval(".timeline .image-link.refused", (els) => els.map((e) => e.textContent));
  await chat.goto(`${cfg.authOff.url}${chatPath}?tab=compactions`);
  await ready(chat, chatPath);
  await chat.waitForSelector("#compact-form");
  out.steps.chat.compactPlaceholders = await chat.$$eval('#compact-form input[name="instructions"], #compact-form input[name="model"]', (els) => els.map((e) => e.placeholder));

  mark("before 10");
  // 10. /docs and /redoc render from local files.
  const docs = await newPage();
  await docs.goto(`${base}/docs`);
  await docs.waitForSelector(".swagger-ui .opblock", { timeout: 60000 });
  out.steps.docsOperations = await docs.locator(".swagger-ui .opblock").count();
  await shot(docs, "docs");
  await docs.goto(`${base}/redoc`);
  await docs.waitForSelector(".api-content h1", { timeout: 60000 });
  out.steps.redocTitle = await docs.locator(".api-content h1").first().innerText();
  await shot(docs, "redoc");
  mark("end");
} catch (err) {
  out.failure = String(err?.stack || err);
} finally {
  await browser.close();
  process.stdout.write(JSON.stringify(out));
}
