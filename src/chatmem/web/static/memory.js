/* Memory, visible: the counter under the input (CTX-17), the memory window "What goes into the
   next request" (CTX-18), files with their states (CTX-16) and Compress now (CTX-11).
   Everything shown comes from one plan: GET /api/v1/conversations/{id}/context?draft=…,
   refreshed (debounced) while the user types so the counter is live with the draft. */
(function () {
  "use strict";
  const { api, items, el, fmtTokens, fmtInt, fmtPrice, toast, debounce } = window.chatmem;
  const MODE_NAMES = { off: "No memory", economy: "Economy", full: "Everything", window: "Recent messages" };
  const FILE_STATES = { in_memory: "In memory", out_of_memory: "Out of memory", pinned: "Pinned", excluded: "Excluded", auto: "In memory" };
  const REFUSALS = {
    nothing_to_compress: "Nothing to compress yet",
    compaction_running: "Compression is already running, try again in a minute",
    turn_running: "Compression is already running, try again in a minute",
    insufficient_credits: "Not enough credits to compress the memory",
  };

  const dialog = document.getElementById("memory-window");
  const counter = document.getElementById("counter");
  const counterText = document.getElementById("counter-text");
  const counterFill = document.getElementById("counter-fill");
  const compressForm = document.getElementById("compress-form");
  const compressButton = document.getElementById("compress-button");
  const compressFocus = document.getElementById("compress-focus");
  const compressResult = document.getElementById("compress-result");
  const fileList = document.getElementById("mw-file-list");
  const noFiles = document.getElementById("mw-no-files");

  const state = { conversationId: "", profile: null, plan: null, draft: "", files: [], seq: 0, compressing: false };

  function percent(plan) {
    const w = plan.tokens.window || 1;
    return Math.min(100, Math.round((plan.tokens.used / w) * 100));
  }

  function renderCounter(plan) {
    const t = plan.tokens;
    const text = fmtTokens(t.used) + " / " + fmtTokens(t.window);
    counterText.textContent = plan.price && plan.price.free ? "Free · " + text : text;
    counter.classList.remove("level-muted", "level-light", "level-red");
    counter.classList.add("level-" + (plan.level || "muted"));
    counterFill.style.width = percent(plan) + "%";
    counter.title = "What goes into the next request";
  }

  /* "Compress now" shows its price before it runs (CTX-11): asked from the server, which
     knows which messages the summary would cover. */
  async function loadCompactionPrice() {
    if (!state.conversationId || state.compressing) return;
    try {
      const focus = compressFocus.value.trim();
      const body = await api("GET", "/api/v1/conversations/" + state.conversationId + "/compact/price" + (focus ? "?focus=" + encodeURIComponent(focus) : ""));
      state.compactionPrice = body;
    } catch (_) { state.compactionPrice = null; }
    renderCompressButton();
  }

  function renderCompressButton() {
    if (state.compressing) return;
    const p = state.compactionPrice;
    const free = state.plan && state.plan.price && state.plan.price.free;
    if (!p) compressButton.textContent = "Compress now";
    else if (free || !p.price) compressButton.textContent = "Compress now · free";
    else compressButton.textContent = "Compress now · ≈ " + fmtPrice(p.price, p.currency);
  }

  function renderWindow(plan) {
    const t = plan.tokens;
    document.getElementById("mw-used").textContent = "Used ≈ " + fmtInt(t.used) + " of " + fmtInt(t.window) + " tokens";
    document.getElementById("mw-percent").textContent = percent(plan) + "%";
    document.getElementById("mw-meter").style.width = percent(plan) + "%";
    for (const row of dialog.querySelectorAll("#mw-breakdown tr[data-key]")) {
      row.querySelector("td").textContent = fmtInt(t[row.dataset.key] || 0);
    }
    const price = plan.price || {};
    const priceLine = document.getElementById("mw-price");
    priceLine.textContent = price.free ? "Next request: free" : "Next request ≈ " + fmtPrice(price.next_request, price.currency) + " + answer";
    const compLine = document.getElementById("mw-compaction-price");
    const comp = plan.compaction || {};
    compLine.hidden = !comp.needed;
    compLine.textContent = price.free ? "+ memory compression: free" : "+ memory compression ≈ " + fmtPrice(price.compaction, price.currency);
    const threshold = document.getElementById("mw-threshold");
    threshold.hidden = !comp.threshold;
    threshold.textContent = "Auto-compress from " + fmtTokens(comp.threshold || 0);
    const stateless = !!(state.profile && state.profile.stateless);
    document.getElementById("mw-mode").textContent = MODE_NAMES[plan.mode] || plan.mode;
    document.getElementById("mw-change").hidden = stateless;
    document.getElementById("mw-stateless").hidden = !stateless;
    // A plan that overflows but will compact first is sent after compaction (CTX-19): the
    // compression line above says so; "does not fit" is for what compaction cannot save.
    document.getElementById("mw-does-not-fit").hidden = plan.fits !== false || !!comp.needed;
    renderCompressButton();
    renderFiles(plan);
  }

  function fileTokens(f) {
    const prof = state.profile || {};
    const tok = prof.tokenizer && f["tokens_" + prof.tokenizer.replace("_base", "")];
    return f.tokens ?? tok ?? f.tokens_estimate ?? 0;
  }

  function renderFiles(plan) {
    fileList.replaceChildren();
    const statuses = plan.files || {};
    const known = new Map(state.files.map((f) => [f.id, f]));
    for (const id of Object.keys(statuses)) if (!known.has(id)) known.set(id, { id, name: id });
    for (const f of known.values()) {
      const status = statuses[f.id] || f.state || "in_memory";
      const li = el("li", { "data-id": f.id, "data-state": status }, [
        el("span", { class: "file-name", text: f.name }),
        el("span", { class: "muted small file-tokens", text: fmtInt(fileTokens(f)) + " tokens" }),
        el("span", { class: "badge file-state", text: FILE_STATES[status] || status }),
      ]);
      const actions = [];
      if (status === "pinned") actions.push(["Unpin", "auto"]);
      else if (status !== "excluded") actions.push(["Pin", "pinned"]);
      if (status === "excluded") actions.push(["Include", "auto"]);
      else actions.push(["Exclude", "excluded"]);
      for (const [label, next] of actions) {
        li.append(el("button", { type: "button", class: "link-button", text: label, "aria-label": label + " " + f.name, onclick: () => setFileState(f, next) }));
      }
      fileList.append(li);
    }
    noFiles.hidden = known.size > 0;
  }

  async function setFileState(f, next) {
    try {
      await api("PATCH", "/api/v1/files/" + f.id, { state: next });
      f.state = next;
      await refreshNow();
      await loadFiles();
    } catch (err) { toast(err.message); }
  }

  async function loadFiles() {
    if (!state.conversationId) { state.files = []; return; }
    try {
      // The messages endpoint lists the conversation's files; one message keeps it cheap.
      const body = await api("GET", "/api/v1/conversations/" + state.conversationId + "/messages?limit=1");
      state.files = (body && body.files) || [];
    } catch (_) {
      state.files = state.files || [];
    }
    if (state.plan) renderFiles(state.plan);
  }

  /* A URL carries at most a few tens of kilobytes, so a very long draft cannot travel in
     ?draft= whole.  Then the plan is asked for the empty draft and for a prefix of the draft,
     and the draft's tokens are scaled from the prefix (token estimates grow linearly with the
     text); the level follows the CONTRACT rule.  The counter is an estimate ("≈") anyway. */
  const MAX_DRAFT_QUERY = 24000;

  function planUrl(draftText) {
    const base = "/api/v1/conversations/" + state.conversationId + "/context";
    return draftText ? base + "?draft=" + encodeURIComponent(draftText) : base;
  }

  function levelOf(used, window_) {
    const share = used / (window_ || 1);
    return share < 0.5 ? "muted" : share <= 0.75 ? "light" : "red";
  }

  async function planFor(draftText) {
    const encoded = encodeURIComponent(draftText).length;
    if (encoded <= MAX_DRAFT_QUERY) return api("GET", planUrl(draftText));
    const prefix = draftText.slice(0, Math.floor(draftText.length * (MAX_DRAFT_QUERY / encoded)));
    const [empty, partial] = await Promise.all([api("GET", planUrl("")), api("GET", planUrl(prefix))]);
    const prefixTokens = Math.max(0, partial.tokens.used - empty.tokens.used);
    const draftTokens = Math.ceil(prefixTokens * (draftText.length / Math.max(1, prefix.length)));
    const t = Object.assign({}, partial.tokens);
    t.messages = partial.tokens.messages - prefixTokens + draftTokens;
    t.used = empty.tokens.used + draftTokens;
    t.free = Math.max(0, t.window - t.used - t.reserve);
    return Object.assign({}, partial, {
      tokens: t, level: levelOf(t.used, t.window), fits: t.used + t.reserve <= t.window, extrapolated: true,
    });
  }

  async function refreshNow() {
    if (!state.conversationId) { renderEmpty(); return null; }
    const seq = ++state.seq;
    try {
      const plan = await planFor(state.draft);
      if (seq !== state.seq) return null; // a newer draft won
      state.plan = plan;
      renderCounter(plan);
      renderWindow(plan);
      if (window.chatmem.feed) window.chatmem.feed.applyStatus(plan.status);
      document.dispatchEvent(new CustomEvent("chatmem:plan", { detail: plan }));
      return plan;
    } catch (err) {
      if (seq === state.seq && err.status !== 404) counterText.textContent = "–";
      return null;
    }
  }

  function renderEmpty() {
    state.plan = null;
    const w = state.profile && (state.profile.context_window || state.profile.window);
    counterText.textContent = w ? "0 / " + fmtTokens(w) : "–";
    counter.classList.remove("level-light", "level-red");
    counter.classList.add("level-muted");
    counterFill.style.width = "0";
  }

  const refreshSoon = debounce(refreshNow, 300);

  function open(section) {
    if (!state.conversationId) { toast("Write the first message: the memory window shows what will be sent."); return; }
    compressResult.hidden = true;
    if (!dialog.open) dialog.showModal();
    refreshNow();
    loadFiles();
    loadCompactionPrice();
    if (section === "compress") compressFocus.focus();
    if (section === "files") document.getElementById("mw-files-heading").scrollIntoView();
  }

  counter.addEventListener("click", () => open());
  compressFocus.addEventListener("input", debounce(loadCompactionPrice, 400));
  document.getElementById("mw-change").addEventListener("click", (event) => {
    event.preventDefault();
    dialog.close();
    const select = document.getElementById("mode-select");
    select.focus();
    select.classList.add("highlight");
    setTimeout(() => select.classList.remove("highlight"), 1500);
  });

  compressForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (state.compressing) return;
    state.compressing = true;
    compressResult.hidden = true;
    compressButton.disabled = true;
    compressButton.textContent = "Compressing…";
    const focus = compressFocus.value.trim();
    try {
      const result = await api("POST", "/api/v1/conversations/" + state.conversationId + "/compact", focus ? { focus } : {});
      if (result && result.run_id) await waitForRun(result.run_id);
      const count = result && typeof result.count === "number" ? result.count : 0;
      compressResult.textContent = "Done: " + (count ? count + " early messages were" : "early messages were") + " compressed into a summary, shown in the chat.";
      compressResult.className = "";
      compressFocus.value = "";
      document.dispatchEvent(new CustomEvent("chatmem:compacted", { detail: result }));
    } catch (err) {
      compressResult.textContent = REFUSALS[err.code] || err.message;
      compressResult.className = "form-error";
    } finally {
      compressResult.hidden = false;
      state.compressing = false;
      compressButton.disabled = false;
      await refreshNow();
      loadCompactionPrice();
    }
  });

  function waitForRun(runId) {
    return new Promise((resolve, reject) => {
      window.chatmem.stream.followRun(runId, {
        done: resolve,
        error: (data) => reject(new window.chatmem.ApiError(409, data.code, data.message)),
      });
    });
  }

  function summaryText() {
    if (!state.plan) return "";
    const sys = (state.plan.messages || []).find((m) => m.role === "system" && /summary/i.test(m.content.slice(0, 200)));
    return sys ? sys.content : "";
  }

  window.chatmem.memory = {
    open,
    refresh: refreshNow,
    refreshSoon,
    loadFiles,
    summaryText,
    plan: () => state.plan,
    setDraft(text) { state.draft = text; refreshSoon(); },
    setFiles(files) { state.files = files || []; if (state.plan) renderFiles(state.plan); },
    setConversation(id) {
      if (id && id === state.conversationId) return; // already showing this conversation
      state.conversationId = id; state.files = []; state.plan = null; refreshNow(); loadFiles();
    },
    setProfile(p) { state.profile = p; if (state.plan) renderWindow(state.plan); else renderEmpty(); },
  };
})();
