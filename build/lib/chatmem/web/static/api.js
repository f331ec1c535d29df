/* Shared helpers: the JSON API client (with the CSRF header), number formats, small DOM tools.
   Every page script uses window.chatmem; nothing here knows about a particular page. */
(function () {
  "use strict";

  class ApiError extends Error {
    constructor(status, code, message, data) {
      super(message || code || ("HTTP " + status));
      this.status = status; this.code = code || "error"; this.data = data || {};
    }
  }

  function cookie(name) {
    const hit = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
    return hit ? decodeURIComponent(hit.slice(name.length + 1)) : "";
  }

  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    const token = cookie("chatmem_csrf");
    if (token) h["X-CSRF-Token"] = token;
    return h;
  }

  async function parse(response) {
    if (response.status === 204) return null;
    const text = await response.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
    if (!response.ok) {
      const err = (body && body.error) || {};
      if (response.status === 401 && !location.pathname.startsWith("/signin") && location.pathname !== "/") {
        location.assign("/?next=" + encodeURIComponent(location.pathname));
      }
      throw new ApiError(response.status, err.code, err.message || response.statusText, err);
    }
    return body;
  }

  async function api(method, path, body, options) {
    const init = { method, headers: headers(options && options.headers), credentials: "same-origin" };
    if (options && options.signal) init.signal = options.signal;
    if (body instanceof FormData) {
      init.body = body;
    } else if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return parse(await fetch(path, init));
  }

  /* Lists may come bare or wrapped ({items: [...]}, {conversations: [...]}, …). */
  function items(body, key) {
    if (Array.isArray(body)) return body;
    if (!body) return [];
    if (key && Array.isArray(body[key])) return body[key];
    for (const k of ["items", "data", "results"]) if (Array.isArray(body[k])) return body[k];
    return [];
  }

  /* Numbers follow the page's language (PROJ-4): 1234 → "1,234" / "1 234" / "1.234"; token
     counts are compact as the original Russian page writes them ("45 тыс. / 1 млн"):
     45000 → "45K" / "45 тыс." / "45 rb", 1500000 → "1.5M" / "1,5 млн". */
  const lang = () => document.documentElement.lang || "en";
  const formats = new Map();
  function numberFormat(options) {
    const key = lang() + JSON.stringify(options);
    if (!formats.has(key)) formats.set(key, new Intl.NumberFormat(lang(), options));
    return formats.get(key);
  }

  function fmtTokens(n) {
    return numberFormat({ notation: "compact" }).format(Math.max(0, Math.round(Number(n) || 0)));
  }

  function fmtInt(n) { return numberFormat({}).format(Math.round(Number(n) || 0)); }

  /* 45 → "45%" / "45 %" (Russian puts a space before the sign). */
  function fmtPercent(n) { return numberFormat({ style: "percent" }).format((Number(n) || 0) / 100); }

  function fmtPrice(amount, currency) {
    const x = Number(amount) || 0;
    const options = { style: "currency", currency: currency || "USD", currencyDisplay: "narrowSymbol" };
    if (x === 0) Object.assign(options, { maximumFractionDigits: 0 });
    else if (x < 0.01) Object.assign(options, { maximumSignificantDigits: 2 });
    else Object.assign(options, { minimumFractionDigits: x < 1 ? 3 : 2, maximumFractionDigits: x < 1 ? 3 : 2 });
    try { return numberFormat(options).format(x); } catch (_) { return currency + " " + fmtInt(x); }
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of [].concat(children || [])) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  let toastTimer = 0;
  function toast(message) {
    const box = document.getElementById("toast");
    if (!box) return;
    box.textContent = message;
    box.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { box.hidden = true; }, 4000);
  }

  function debounce(fn, ms) {
    let t = 0;
    return function (...args) { clearTimeout(t); t = setTimeout(() => fn.apply(this, args), ms); };
  }

  const signOut = document.getElementById("sign-out");
  if (signOut) {
    signOut.addEventListener("click", async () => {
      try { await api("POST", "/api/v1/auth/logout"); } catch (_) { /* the cookie may be gone already */ }
      location.assign("/");
    });
  }

  /* Search forms filter as one types and are never submitted (an event listener, not an
     inline onsubmit: the pages' CSP allows no inline script, SEC-3). */
  document.addEventListener("submit", (event) => {
    if (event.target instanceof HTMLFormElement && event.target.hasAttribute("data-no-submit")) event.preventDefault();
  });

  window.chatmem = { ApiError, api, items, cookie, fmtTokens, fmtInt, fmtPercent, fmtPrice, el, toast, debounce };
})();
