/* Memory, visible: the counter under the input (CTX-17), the memory window "What goes into the
   next request" (CTX-18), files with their states (CTX-16), Compress now (CTX-11) and
   Continue in a new chat (CTX-23).
   Everything shown comes from one plan: GET /api/v1/conversations/{id}/context?draft=…, or
   for a chat not created yet GET /api/v1/profiles/{id}/context?draft=…&mode=… (a POST with
   the draft in its body when it is too long for a URL), refreshed (debounced) while the user
   types so the counter is live with the draft. */
(function () {
  "use strict";
  const { api, items, el, fmtTokens, fmtInt, fmtPercent, fmtPrice, toast, debounce, t, tn } = window.chatmem;
  /* The window names the modes as the help pages do, differently from the panel's block
     "Conversation context" (Economy / Everything / its switch off): the same three modes. */
  const MODE_NAMES = { off: t("No memory"), economy: t("Economy memory"), full: t("Full memory"), window: t("Recent messages") };
  const FILE_STATES = { in_memory: t("In memory"), out_of_memory: t("Out of memory"), pinned: t("Pinned"), excluded: t("Excluded"), auto: t("In memory") };
  const REFUSALS = {
    nothing_to_compress: t("Nothing to compress yet"),
    compaction_running: t("Compression is already running, try again in a minute"),
    turn_running: t("Compression is already running, try again in a minute"),
    insufficient_credits: t("Not enough credits to compress the memory"),
  };

  const bar = window.chatmem.memoryBar; // the plan as a picture (memory_bar.js)
  const dialog = document.getElementById("memory-window");
  const counter = document.getElementById("counter");
  const counterText = document.getElementById("counter-text");
  const counterFill = document.getElementById("counter-fill"); // the small bar's segments
  const counterBar = document.getElementById("counter-bar");
  const compressForm = document.getElementById("compress-form");
  const compressButton = document.getElementById("compress-button");
  const compressFocus = document.getElementById("compress-focus");
  const compressResult = document.getElementById("compress-result");
  const fileList = document.getElementById("mw-file-list");
  const noFiles = document.getElementById("mw-no-files");
  const filesSection = document.getElementById("mw-files");
  const compressSection = document.getElementById("mw-compress");
  const continueSection = document.getElementById("mw-continue");
  const continueButton = document.getElementById("continue-button");
  const continueResult = document.getElementById("continue-result");
  const compressWays = document.getElementById("compress-ways");

  const state = {
    conversationId: "", profile: null, mode: "full", plan: null, draft: "", files: [], seq: 0,
    compressing: false, summary: null,
    recall: undefined, // issue 17: the conversation's own recall switch once read (null: default)
  };

  const num = (x) => typeof x === "number" && isFinite(x);
  const stateless = () => !!(state.profile && state.profile.stateless);

  function percent(plan) {
    const w = plan.tokens.window || 1;
    return Math.min(100, Math.round((plan.tokens.used / w) * 100));
  }

  function renderBar(plan) {
    const picture = bar.segments(plan.tokens);
    const box = document.getElementById("mw-bar");
    bar.draw(document.getElementById("mw-segments"), picture);
    box.classList.toggle("seg-over", picture.over > 0);
    box.setAttribute("aria-label", bar.label(plan, picture, percent(plan)));
    const threshold = (plan.compaction && plan.compaction.threshold) || 0;
    const marker = document.getElementById("mw-bar-threshold");
    marker.hidden = !(threshold > 0 && picture.window > 0);
    marker.style.left = Math.min(100, bar.share(threshold, picture.window)) + "%";
    marker.title = threshold ? t("Auto-compress from {tokens}", { tokens: fmtTokens(threshold) }) : "";
  }

  function renderCounter(plan) {
    const tokens = plan.tokens;
    const text = fmtTokens(tokens.used) + " / " + fmtTokens(tokens.window);
    counterText.textContent = plan.price && plan.price.free ? t("Free · {counter}", { counter: text }) : text;
    counter.classList.remove("level-muted", "level-light", "level-red");
    counter.classList.add("level-" + (plan.level || "muted"));
    const picture = bar.segments(tokens);
    bar.draw(counterFill, picture);
    counterBar.classList.toggle("seg-over", picture.over > 0);
    counter.title = t("What goes into the next request");
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

  /* "free" is for free models only: a priced model with nothing to compress shows no price. */
  function renderCompressButton() {
    if (state.compressing) return;
    const p = state.compactionPrice;
    const free = !!(state.plan && state.plan.price && state.plan.price.free);
    if (!p || p.available === false) compressButton.textContent = t("Compress now");
    else if (free) compressButton.textContent = t("Compress now · free");
    else if (num(p.price) && p.price > 0) compressButton.textContent = t("Compress now · ≈ {price}", { price: fmtPrice(p.price, p.currency) });
    else compressButton.textContent = t("Compress now");
  }

  /* CTX-18, CTX-21: "+ memory compression ≈ $Y" when the next request folds history first,
     with "· N messages in R rounds" when the summariser needs several rounds.  Fields the
     plan does not carry are left out of the text. */
  function compactionText(plan) {
    const price = plan.price || {};
    const comp = plan.compaction || {};
    let text;
    if (price.free) text = t("+ memory compression: free");
    else if (num(price.compaction)) text = t("+ memory compression ≈ {price}", { price: fmtPrice(price.compaction, price.currency) });
    else text = t("+ memory compression");
    if (num(comp.rounds) && comp.rounds > 1 && num(comp.messages) && comp.messages > 0) {
      text += " · " + tn("{n} message", "{n} messages", comp.messages) + " " + tn("in {n} round", "in {n} rounds", comp.rounds);
    }
    return text;
  }

  /* The same words as the feed's note on an answer (feed.js). */
  function answeredText(answered) {
    const name = answered.name || "";
    if (answered.reason === "credits_exhausted") return t("Answered by {name}: credits exhausted", { name });
    if (answered.reason === "auto") return t("Answered by {name} (Auto)", { name });
    return answered.note || "";
  }

  function renderWindow(plan) {
    const tokens = plan.tokens;
    document.getElementById("mw-used").textContent = tn("Used ≈ {used} of {n} token", "Used ≈ {used} of {n} tokens", tokens.window, { used: tokens.used });
    document.getElementById("mw-percent").textContent = fmtPercent(percent(plan));
    renderBar(plan);
    for (const row of dialog.querySelectorAll("#mw-breakdown tr[data-key]")) {
      const value = tokens[row.dataset.key] || 0;
      row.querySelector("td").textContent = fmtInt(value);
      // APPS-3: the "Apps" row only while an app gives the model context.
      if (row.hasAttribute("data-optional")) row.hidden = !value;
    }
    // USE-3/USE-4: the plan is priced on the model that will answer; say which when it is
    // not the chat's own (the fallback under a lock, Auto's pick).
    const answered = plan.answered_by;
    const answeredLine = document.getElementById("mw-answered");
    answeredLine.hidden = !(answered && answered.reason);
    answeredLine.textContent = answered ? answeredText(answered) : "";
    const price = plan.price || {};
    const priceLine = document.getElementById("mw-price");
    priceLine.textContent = price.free ? t("Next request: free") : t("Next request ≈ {price} + answer", { price: fmtPrice(price.next_request, price.currency) });
    const compLine = document.getElementById("mw-compaction-price");
    const comp = plan.compaction || {};
    compLine.hidden = !comp.needed;
    compLine.textContent = comp.needed ? compactionText(plan) : "";
    const threshold = document.getElementById("mw-threshold");
    threshold.hidden = !comp.threshold;
    threshold.textContent = t("Auto-compress from {tokens}", { tokens: fmtTokens(comp.threshold || 0) });
    const noMemory = stateless();
    document.getElementById("mw-mode").textContent = MODE_NAMES[plan.mode] || plan.mode;
    document.getElementById("mw-change").hidden = noMemory;
    document.getElementById("mw-stateless").hidden = !noMemory;
    renderRecall(plan);
    // A plan that overflows but will compact first is sent after compaction (CTX-19): the
    // compression line above says so; "does not fit" is for what compaction cannot save.
    document.getElementById("mw-does-not-fit").hidden = plan.fits !== false || !!comp.needed;
    renderSections();
    renderCompressButton();
    renderFiles(plan);
  }

  /* Issue 17: recall, as it is for this conversation — its own choice, else its profile's,
     else on in Economy and Everything. */
  function renderRecall(plan) {
    const line = document.getElementById("mw-recall-line");
    line.hidden = !state.conversationId || state.recall === undefined || stateless();
    if (line.hidden) return;
    const own = state.recall;
    const profile = state.profile ? state.profile.recall : null;
    document.getElementById("mw-recall").checked =
      own !== null ? own : profile !== null && profile !== undefined ? profile : plan.mode === "economy" || plan.mode === "full";
  }

  async function loadRecall() {
    const id = state.conversationId;
    if (!id) return;
    try {
      const c = await api("GET", "/api/v1/conversations/" + id);
      if (id !== state.conversationId) return;
      state.recall = c.recall === undefined ? null : c.recall;
      if (state.plan) renderRecall(state.plan);
    } catch (_) { /* the switch stays hidden */ }
  }

  document.getElementById("mw-recall").addEventListener("change", async (event) => {
    const box = event.target;
    box.disabled = true;
    try {
      const c = await api("PATCH", "/api/v1/conversations/" + state.conversationId, { recall: box.checked });
      state.recall = c.recall;
      refreshNow(); // the Tools row follows
    } catch (err) {
      box.checked = !box.checked;
      toast(err.message);
    } finally {
      box.disabled = false;
    }
  });

  /* What the window offers beside the plan: files, Compress now and Continue in a new chat
     need a conversation; a model that does not remember (CTX-7) has nothing to compress;
     continuing needs a summary (CTX-23). */
  function renderSections() {
    const has = !!state.conversationId;
    filesSection.hidden = !has;
    compressSection.hidden = !has || stateless();
    continueSection.hidden = !has || !state.summary;
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
        el("span", { class: "muted small file-tokens", text: tn("{n} token", "{n} tokens", plan.images && plan.images[f.id] ? plan.images[f.id].tokens : fileTokens(f)) }), // PROJ-2: an image's own count
        el("span", { class: "badge file-state", text: FILE_STATES[status] || status }),
      ]);
      const actions = [];
      if (status === "pinned") actions.push([t("Unpin"), t("Unpin {file}", { file: f.name }), "auto"]);
      else if (status !== "excluded") actions.push([t("Pin"), t("Pin {file}", { file: f.name }), "pinned"]);
      if (status === "excluded") actions.push([t("Include"), t("Include {file}", { file: f.name }), "auto"]);
      else actions.push([t("Exclude"), t("Exclude {file}", { file: f.name }), "excluded"]);
      for (const [label, spoken, next] of actions) {
        li.append(el("button", { type: "button", class: "link-button", text: label, "aria-label": spoken, onclick: () => setFileState(f, next) }));
      }
      fileList.append(li);
    }
    noFiles.hidden = known.size > 0;
  }

  async function setFileState(f, next) {
    try {
      // PROJ-1: a project file's state is this conversation's own.
      const path = f.project_id ? "/api/v1/conversations/" + state.conversationId + "/project-files/" + f.id : "/api/v1/files/" + f.id;
      await api("PATCH", path, { state: next });
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

  /* A URL carries at most a few tens of kilobytes, so a long draft (a pasted document) is
     sent in the body of a POST to the same path, which answers the same plan. */
  const MAX_DRAFT_QUERY = 24000;

  function contextPath() {
    // No conversation yet (CTX-17): the plan of an empty chat with the chosen model and mode.
    return state.conversationId
      ? "/api/v1/conversations/" + state.conversationId + "/context"
      : "/api/v1/profiles/" + encodeURIComponent(state.profile.id) + "/context";
  }

  function planUrl(draftText) {
    const params = new URLSearchParams();
    if (!state.conversationId) params.set("mode", state.mode || "full");
    if (draftText) params.set("draft", draftText);
    const query = params.toString();
    return query ? contextPath() + "?" + query : contextPath();
  }

  /* Whether there is anything to plan: a conversation, or a chosen model for a new one. */
  function plannable() { return !!state.conversationId || !!(state.profile && state.profile.id); }

  function planFor(draftText) {
    const encoded = new URLSearchParams({ d: draftText }).toString().length - 2;
    if (encoded <= MAX_DRAFT_QUERY) return api("GET", planUrl(draftText));
    const body = state.conversationId ? { draft: draftText } : { draft: draftText, mode: state.mode || "full" };
    return api("POST", contextPath(), body);
  }

  async function refreshNow() {
    const seq = ++state.seq;
    if (!plannable()) { renderEmpty(); return null; }
    const conversationId = state.conversationId;
    try {
      const plan = await planFor(state.draft);
      if (seq !== state.seq) return null; // a newer draft, mode or model won
      state.plan = plan;
      renderCounter(plan);
      renderWindow(plan);
      // CTX-14: the feed marks what is not sent verbatim from this plan, right away (after a
      // change of mode too).
      if (conversationId && window.chatmem.feed) window.chatmem.feed.applyStatus(plan.status || {});
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
    counterFill.replaceChildren();
    counterBar.classList.remove("seg-over");
  }

  const refreshSoon = debounce(refreshNow, 300);

  function open(section) {
    if (!plannable()) { toast(t("Choose a model first: the memory window shows what will be sent to it.")); return; }
    compressResult.hidden = true;
    compressWays.hidden = true;
    continueResult.hidden = true;
    renderSections();
    if (!dialog.open) dialog.showModal();
    refreshNow();
    if (state.conversationId) {
      loadFiles();
      loadCompactionPrice();
    }
    if (section === "compress" && !compressSection.hidden) compressFocus.focus();
    if (section === "files" && !filesSection.hidden) document.getElementById("mw-files-heading").scrollIntoView();
  }

  counter.addEventListener("click", () => open());
  compressFocus.addEventListener("input", debounce(loadCompactionPrice, 400));
  // "Change" closes the window and lights up the panel's block "Conversation context".
  document.getElementById("mw-change").addEventListener("click", (event) => {
    event.preventDefault();
    dialog.close();
    const block = document.getElementById("context-block");
    const control = document.getElementById("memory-switch");
    control.focus();
    block.classList.add("highlight");
    setTimeout(() => block.classList.remove("highlight"), 1500);
  });
  // The panel's "Conversation memory" button: the third way into the window, with the
  // counter and the "Out of memory" label.
  document.getElementById("open-memory").addEventListener("click", () => open());

  compressForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (state.compressing) return;
    state.compressing = true;
    compressResult.hidden = true;
    compressWays.hidden = true;
    compressButton.disabled = true;
    compressButton.textContent = t("Compressing…");
    const focus = compressFocus.value.trim();
    try {
      const result = await api("POST", "/api/v1/conversations/" + state.conversationId + "/compact", focus ? { focus } : {});
      if (result && result.run_id) await waitForRun(result.run_id);
      const count = result && typeof result.count === "number" ? result.count : 0;
      compressResult.textContent = count
        ? tn("Done: {n} early message was compressed into a summary, shown in the chat.", "Done: {n} early messages were compressed into a summary, shown in the chat.", count)
        : t("Done: early messages were compressed into a summary, shown in the chat.");
      compressResult.className = "";
      compressFocus.value = "";
      document.dispatchEvent(new CustomEvent("chatmem:compacted", { detail: result }));
    } catch (err) {
      compressResult.textContent = REFUSALS[err.code] || err.message;
      compressResult.className = "form-error";
      if (err.code === "insufficient_credits") offerWaysOut();
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
        // CTX-21: a long backlog folds in several rounds; say how far it got.
        compaction(data) {
          const progress = window.chatmem.feed && window.chatmem.feed.compactionProgress(data);
          if (progress) compressButton.textContent = progress;
        },
        done: resolve,
        error: (data) => reject(new window.chatmem.ApiError(409, data.code, data.message)),
      });
    });
  }

  /* CTX-23: a new conversation that starts from this one's summary; the chat opens it.
     Refusals are written into ``resultEl`` (the window's or the hint's). */
  async function continueChat(button, resultEl) {
    if (!state.conversationId) return;
    button.disabled = true;
    resultEl.hidden = true;
    try {
      const created = await api("POST", "/api/v1/conversations/" + state.conversationId + "/continue");
      const id = created && (created.id || (created.conversation && created.conversation.id));
      if (!id) throw new Error(t("The new chat could not be opened."));
      if (dialog.open) dialog.close();
      document.dispatchEvent(new CustomEvent("chatmem:open-conversation", { detail: { id, conversation: created } }));
    } catch (err) {
      resultEl.textContent = err.code === "nothing_to_compress"
        ? t("This chat has no summary yet: compress it first, then continue from it.")
        : err.message;
      resultEl.hidden = false;
    } finally {
      button.disabled = false;
    }
  }
  continueButton.addEventListener("click", () => continueChat(continueButton, continueResult));

  /* Seed 001: when compression cannot be paid for, the ways out — "Request extension" where
     the server takes requests (GET /api/v1/usage says so, USE-3), and "Continue in a new chat"
     from the summary (CTX-23), or a plain new chat while there is none. */
  async function offerWaysOut() {
    compressWays.replaceChildren();
    let requests = false;
    try {
      const usage = await api("GET", "/api/v1/usage");
      requests = !!usage && usage.extension_requests !== false;
    } catch (_) { /* no limits on this server: nothing to request */ }
    if (requests) {
      const request = el("button", { type: "button", text: t("Request extension") });
      request.addEventListener("click", () => window.chatmem.usage.requestExtension(request));
      compressWays.append(request);
    }
    if (state.summary) {
      const more = el("button", { type: "button", text: t("Continue in a new chat") });
      more.addEventListener("click", () => continueChat(more, compressResult));
      compressWays.append(more);
    } else {
      const fresh = el("button", { type: "button", text: t("Start a new chat") });
      fresh.addEventListener("click", () => location.assign("/"));
      compressWays.append(fresh);
    }
    compressWays.hidden = false;
  }

  function summaryText() {
    if (state.summary && state.summary.text) return state.summary.text;
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
    continueChat,
    hasSummary: () => !!state.summary,
    conversationId: () => state.conversationId,
    plan: () => state.plan,
    setDraft(text) { state.draft = text; refreshSoon(); },
    setFiles(files) { state.files = files || []; if (state.plan) renderFiles(state.plan); },
    /* The stored summary (or null): "Continue in a new chat" needs one (CTX-23). */
    setSummary(summary) { state.summary = summary || null; renderSections(); },
    setConversation(id) {
      if (id && id === state.conversationId) return; // already showing this conversation
      state.conversationId = id; state.files = []; state.plan = null; state.summary = null;
      state.compactionPrice = null; state.recall = undefined;
      renderSections(); refreshNow(); loadFiles(); loadRecall();
    },
    /* The chosen model, and for a chat not created yet its memory mode (a conversation's
       own mode is the server's): a new chat plans with them. */
    setProfile(p, mode) {
      const changed = (p && p.id) !== (state.profile && state.profile.id) || (!!mode && mode !== state.mode);
      state.profile = p;
      if (mode) state.mode = mode;
      if (!state.conversationId && changed) { refreshNow(); return; }
      if (state.plan) renderWindow(state.plan); else renderEmpty();
    },
  };
})();
