/* Model profiles.  The API key field is write-only: the server never returns a key, only
   whether one is set (PROF-2), so the form shows "Key set" and sends a key only when typed.
   Memory knobs (CTX-22) are sent only when changed, so an untouched knob keeps following the
   server's default; an emptied one returns to it.  An empty answer reserve is automatic. */
(function () {
  "use strict";
  const { api, items, el, fmtTokens, toast, t, tn } = window.chatmem;
  const list = document.getElementById("profile-list");
  const empty = document.getElementById("profiles-empty");
  const form = document.getElementById("profile-form");
  const error = document.getElementById("profile-error");
  const $ = (id) => document.getElementById(id);
  let profiles = [];
  /* Memory knob → its input; the values shown when the form opened (to send only changes). */
  const KNOBS = {
    economy_pairs: "pf-economy-pairs",
    economy_batch: "pf-economy-batch",
    full_threshold_fraction: "pf-full-fraction",
    full_threshold_cap: "pf-full-cap",
    full_keep_messages: "pf-full-keep",
    window_messages: "pf-window-messages",
    window_chars: "pf-window-chars",
    instructions_role: "pf-instructions-role",
    image_tokens: "pf-image-tokens", // PROJ-2: empty follows the provider's formula
    auto_rank: "pf-auto-rank", // USE-4: the place in Auto's order; empty: not ranked
  };
  let shown = {};

  /* The server's automatic answer reserve for a window (CTX-22), for the placeholder. */
  function autoReserve(window) {
    return Math.min(4096, Math.max(1024, Math.floor(window / 8)));
  }
  function showAutoReserve() {
    const window = Number($("pf-window").value) || 32768;
    $("pf-reserve").placeholder = tn("automatic: {n} token", "automatic: {n} tokens", autoReserve(window));
  }

  /* The profile's own price overrides (the form edits these, not the price table's). */
  function priceIn(p) { return p.input_price_per_mtok ?? null; }
  function priceOut(p) { return p.output_price_per_mtok ?? null; }
  function isFree(p) { return !!(p.free || (p.prices && p.prices.free)); }

  /* Issue 29: a profile's request parameters, shown in its line ("pinned: temperature 0.2"). */
  function paramsText(params) {
    return Object.entries(params || {}).map(([k, v]) => k + " " + JSON.stringify(v)).join(", ");
  }
  function requestLine(p) {
    const parts = [];
    if (Object.keys(p.request_pins || {}).length) parts.push(t("pinned: {params}", { params: paramsText(p.request_pins) }));
    if (Object.keys(p.request_defaults || {}).length) parts.push(t("defaults: {params}", { params: paramsText(p.request_defaults) }));
    return parts.join(" · ");
  }
  /* The JSON of a request parameters field: null when empty; an error names the field. */
  function paramsOf(id, label) {
    const text = $(id).value.trim();
    if (!text) return null;
    try { return JSON.parse(text); }
    catch (err) { throw new Error(t("{field}: not valid JSON", { field: label })); }
  }

  function render() {
    list.replaceChildren();
    for (const p of profiles) {
      const result = el("span", { class: "test-result small", role: "status" });
      const testButton = el("button", { type: "button", text: t("Test connection") });
      testButton.addEventListener("click", () => test(p, testButton, result));
      // Somebody else's shared profile (SEC-4): usable, not editable, its endpoint unseen.
      const editable = p.editable !== false;
      list.append(el("li", { "data-id": p.id }, [
        el("span", { class: "profile-name", text: p.name }),
        el("span", { class: "muted small", text: [p.model, t("{tokens} tokens", { tokens: fmtTokens(p.context_window) })].concat(p.stateless ? [t("stateless")] : [], isFree(p) ? [t("free")] : [], p.auto_rank != null ? [t("Auto: {n}", { n: p.auto_rank })] : []).join(" · ") }),
        el("span", { class: "badge key-state", text: editable ? (p.has_api_key ? t("Key set") : t("No key")) : t("Shared") }),
        ...(requestLine(p) ? [el("span", { class: "muted small request-params", text: requestLine(p) })] : []),
        el("span", { class: "spacer" }),
        testButton,
        ...(editable ? [
          el("button", { type: "button", text: t("Edit"), onclick: () => edit(p) }),
          el("button", { type: "button", class: "danger", text: t("Delete"), onclick: () => remove(p) }),
        ] : []),
        result,
      ]));
    }
    empty.hidden = profiles.length > 0;
  }

  async function load() {
    try { profiles = items(await api("GET", "/api/v1/profiles"), "profiles"); }
    catch (err) { toast(err.message); profiles = []; }
    render();
  }

  async function test(p, button, result) {
    button.disabled = true;
    result.className = "test-result small";
    result.textContent = t("Testing…");
    try {
      const body = await api("POST", "/api/v1/profiles/" + p.id + "/test");
      const ok = !body || body.ok !== false;
      result.textContent = ok
        ? (body && body.latency_ms ? t("Connection works ({ms} ms)", { ms: Math.round(body.latency_ms) }) : t("Connection works"))
        : t("Failed: {error}", { error: (body.error && body.error.message) || body.message || t("no answer") });
      result.classList.add(ok ? "ok" : "fail");
    } catch (err) {
      result.textContent = t("Failed: {error}", { error: err.message });
      result.classList.add("fail");
    } finally {
      button.disabled = false;
    }
  }

  function edit(p) {
    form.hidden = false;
    error.hidden = true;
    $("profile-form-title").textContent = p ? t("Edit {name}", { name: p.name }) : t("Add a model");
    $("pf-id").value = p ? p.id : "";
    $("pf-name").value = p ? p.name : "";
    $("pf-base-url").value = p ? p.base_url : "";
    $("pf-model").value = p ? p.model : "";
    $("pf-api-key").value = "";
    $("pf-api-key").placeholder = p && p.has_api_key ? t("Key set — type to replace") : t("Optional");
    $("pf-key-state").textContent = p && p.has_api_key ? t("Key set") : t("No key set");
    $("pf-window").value = p ? p.context_window : 32768;
    $("pf-reserve").value = p && !p.answer_reserve_auto && p.answer_reserve != null ? p.answer_reserve : "";
    showAutoReserve();
    shown = {};
    for (const [knob, id] of Object.entries(KNOBS)) {
      const input = $(id);
      if (input.tagName === "SELECT") input.value = (p && p[knob]) || "system";
      else input.value = p && p[knob] != null ? p[knob] : "";
      shown[knob] = input.value;
    }
    $("pf-tokenizer").value = (p && p.tokenizer) || "estimate";
    $("pf-price-in").value = p && priceIn(p) != null ? priceIn(p) : "";
    $("pf-price-out").value = p && priceOut(p) != null ? priceOut(p) : "";
    $("pf-free").checked = !!(p && isFree(p));
    $("pf-stateless").checked = !!(p && p.stateless);
    $("pf-accepts-images").checked = !!(p && p.accepts_images);
    // Issue 17: recall — empty follows the memory mode (null), else always or never.
    $("pf-recall").value = p && p.recall === true ? "on" : p && p.recall === false ? "off" : "";
    for (const [field, id] of [["request_defaults", "pf-request-defaults"], ["request_pins", "pf-request-pins"]]) {
      const params = (p && p[field]) || {};
      $(id).value = Object.keys(params).length ? JSON.stringify(params) : "";
    }
    $("pf-name").focus();
  }

  async function remove(p) {
    if (!confirm(t("Delete the model profile “{name}”?", { name: p.name }))) return;
    try { await api("DELETE", "/api/v1/profiles/" + p.id); await load(); }
    catch (err) { toast(err.message); }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const id = $("pf-id").value;
    const body = {
      name: $("pf-name").value.trim(),
      base_url: $("pf-base-url").value.trim(),
      model: $("pf-model").value.trim(),
      context_window: Number($("pf-window").value),
      tokenizer: $("pf-tokenizer").value,
      stateless: $("pf-stateless").checked,
      accepts_images: $("pf-accepts-images").checked,
      free: $("pf-free").checked,
      recall: { on: true, off: false }[$("pf-recall").value] ?? null,
    };
    // Empty answer reserve: automatic (a change sends null to return to it).
    if ($("pf-reserve").value !== "") body.answer_reserve = Number($("pf-reserve").value);
    else if (id) body.answer_reserve = null;
    for (const [knob, inputId] of Object.entries(KNOBS)) {
      const input = $(inputId);
      if (input.value === shown[knob]) continue;
      if (input.value === "") { if (id) body[knob] = null; }
      else body[knob] = input.tagName === "SELECT" ? input.value : Number(input.value);
    }
    // Empty price fields mean "from the price table" (null), not zero.
    body.input_price_per_mtok = $("pf-price-in").value === "" ? null : Number($("pf-price-in").value);
    body.output_price_per_mtok = $("pf-price-out").value === "" ? null : Number($("pf-price-out").value);
    const key = $("pf-api-key").value;
    if (key) body.api_key = key;
    try {
      body.request_defaults = paramsOf("pf-request-defaults", t("Defaults"));
      body.request_pins = paramsOf("pf-request-pins", t("Pinned"));
      await api(id ? "PATCH" : "POST", "/api/v1/profiles" + (id ? "/" + id : ""), body);
      $("pf-api-key").value = ""; // never keep a key in the page longer than needed
      form.hidden = true;
      await load();
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    }
  });

  $("pf-window").addEventListener("input", showAutoReserve);
  $("add-profile").addEventListener("click", () => edit(null));
  // Enabled only now: a click before this script ran (a slow page) would do nothing.
  $("add-profile").disabled = false;
  $("pf-cancel").addEventListener("click", () => { $("pf-api-key").value = ""; form.hidden = true; });
  load();
})();
