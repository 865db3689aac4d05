// The inspector's entry point: who the caller is (GET /v1/whoami), then the page the address
// names. Links are real links (keyboard, middle click and the back button work); inside the
// page they are followed without a reload.

import { api, ApiError, storedKey, storeKey } from "./api.js";
import { clear, errorNotice, h, notice } from "./dom.js";
import { sessionsPage } from "./sessions.js";
import { sessionPage } from "./session.js";
import { searchPage } from "./search.js";
import { navigate, setRouter } from "./nav.js";
import { state } from "./state.js";

const main = document.getElementById("main");
const who = document.getElementById("who");


document.addEventListener("click", (event) => {
  const a = event.target.closest?.("a[href]");
  if (!a || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui/")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", () => route());

function renderWho() {
  clear(who);
  const me = state.me;
  if (!me) return;
  const scopes = me.scopes.join(", ");
  if (me.auth === "off") {
    who.append(h("span", {}, "Auth off (loopback): every scope"));
  } else {
    who.append(
      h("span", {}, "Key ", h("code", {}, me.key_id), ` (${me.key_name}) · tenant `, h("code", {}, me.tenant_id),
        ` · scopes: ${scopes}`, me.session_prefix ? ` · sessions ${me.session_prefix}…` : ""),
      " ",
      h("button", { type: "button", class: "link", onclick: () => { storeKey(null); location.reload(); } }, "Forget key"),
    );
  }
  if (!state.canWrite) who.append(" ", h("span", { class: "badge", id: "read-only" }, "read-only"));
}

function keyForm(message) {
  clear(main);
  const input = h("input", { type: "password", id: "api-key", name: "api-key", autocomplete: "off", required: true, spellcheck: "false" });
  const status = h("div", { "aria-live": "polite" }, message ? notice("error", message) : null);
  const form = h(
    "form",
    { class: "card key-form", id: "key-form", "aria-labelledby": "key-title" },
    h("h1", { id: "key-title" }, "API key"),
    h("p", {}, "This server needs an API key. It is kept for this tab only (session storage) and sent to this server alone."),
    h("div", { class: "field" }, h("label", { for: "api-key" }, "API key"), input),
    h("button", { type: "submit" }, "Use this key"),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    try {
      const me = await api("/v1/whoami", { key });
      storeKey(key);
      signedIn(me);
    } catch (err) {
      clear(status).append(errorNotice(err));
      input.focus();
    }
  });
  main.append(form);
  input.focus();
}

function signedIn(me) {
  state.me = me;
  state.canWrite = me.scopes.includes("write");
  renderWho();
  route();
}

let routed = 0;

export async function route() {
  if (!state.me) return;
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  clear(main);
  main.setAttribute("aria-busy", "true");
  delete main.dataset.ready;
  try {
    if (path.startsWith("/ui/sessions/")) {
      const id = decodeURIComponent(path.slice("/ui/sessions/".length));
      await sessionPage(main, id, params);
    } else if (path === "/ui/search") {
      await searchPage(main, params);
    } else {
      await sessionsPage(main, params);
    }
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      storeKey(null);
      state.me = null;
      renderWho();
      keyForm("The key was refused; enter it again.");
      return;
    }
    main.append(errorNotice(err));
  }
  main.setAttribute("aria-busy", "false");
  main.dataset.ready = path;
  // After an in-page navigation, keyboard and screen-reader users start at the new content.
  if (routed++ > 0) main.focus({ preventScroll: true });
}

async function boot() {
  try {
    signedIn(await api("/v1/whoami"));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      const had = storedKey();
      if (had) storeKey(null);
      keyForm(had ? "The stored key was refused; enter it again." : "");
    } else {
      main.append(errorNotice(err));
    }
  }
}

setRouter(route);
boot();
