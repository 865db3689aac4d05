// In-page navigation: history entries for real addresses, followed by the router app.js sets.

let router = () => {};

export function setRouter(fn) {
  router = fn;
}

export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  router();
}
