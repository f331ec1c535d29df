/* The message feed.  Renders incrementally: only the newest RENDER_STEP messages go into the
   DOM at first, older ones are prepended as the reader scrolls up (or presses "Load earlier
   messages"), so a conversation of thousands of messages opens as fast as a short one.
   Memory status (CTX-14) comes from the plan: every message not sent verbatim is dimmed and
   carries an "Out of memory" label that opens the memory window.  The compaction marker
   (CTX-10) comes from the stored summary, or live from a run's `compaction` events; its
   "Show summary" reads the summary and lets the user edit it (CTX-23). */
(function () {
  "use strict";
  const { el, api, toast, t, tn } = window.chatmem;
  const RENDER_STEP = 200;
  const feed = document.getElementById("feed");
  const list = document.getElementById("messages");
  const emptyBox = document.getElementById("feed-empty");
  const older = document.getElementById("load-older");
  const messageTemplate = document.getElementById("message-template");
  const markerTemplate = document.getElementById("compaction-template");
  const progressTemplate = document.getElementById("compaction-progress-template");
  const scroller = window.chatmem.scroll; // following the end of the feed (scroll.js)

  const REASONS = {
    summarized: t("Summarised: the model gets the summary instead of this message"),
    excluded: t("Excluded by you: not sent to the model"),
    out_of_memory: t("Does not fit in the memory, or memory is off"),
  };

  const state = {
    conversationId: "", sourceId: "", all: [], firstRendered: 0, status: {}, summary: null,
    nodes: new Map(), toolNames: new Map(), liveNode: null, progress: null,
  };
  const num = (x) => typeof x === "number" && isFinite(x);

  function statusOf(m) {
    return state.status[m.id] || m.status || m.memory_status || (m.excluded ? "excluded" : "in_memory");
  }

  function roleLabel(role) {
    return { user: t("You"), assistant: t("Assistant"), system: t("Instructions"), tool: t("Tool result") }[role] || role;
  }

  /* Issue 17: the query of a call of the built-in recall tool (no MCP server), else null. */
  function recallQuery(name, call, args) {
    if (name !== "recall" || call.server) return null;
    try {
      const query = JSON.parse(args).query;
      return typeof query === "string" ? query : "";
    } catch (_) { return ""; }
  }

  function toolCallBox(call) {
    const fn = call.function || call;
    let args = fn.arguments ?? call.arguments ?? "";
    if (typeof args !== "string") args = JSON.stringify(args, null, 2);
    const name = fn.name || call.name || "tool";
    const query = recallQuery(name, call, args);
    const label = query === null
      ? t("Tool call: {name}", { name })
      : t("Looked up earlier messages: {query}", { query });
    return el("details", { class: "tool-box tool-call" + (query === null ? "" : " recall") }, [
      el("summary", { text: label }),
      el("pre", { text: args }),
    ]);
  }

  /* A tool call's box and, when its tool has an app, the app's slot under it (APPS-1). */
  function callBoxes(call) {
    const slot = window.chatmem.apps ? window.chatmem.apps.slot(call) : null;
    return slot ? [toolCallBox(call), slot] : [toolCallBox(call)];
  }

  function attachApps(root) {
    if (window.chatmem.apps) window.chatmem.apps.attach(root);
  }

  function pruneApps() {
    if (window.chatmem.apps) window.chatmem.apps.prune();
  }

  function toolResultBox(text, name) {
    return el("details", { class: "tool-box tool-result" }, [
      el("summary", { text: name ? t("Tool result: {name}", { name }) : t("Tool result") }),
      el("pre", { text: typeof text === "string" ? text : JSON.stringify(text, null, 2) }),
    ]);
  }

  /* PROV-6: an "ask first" tool call, shown until the user answers; a replayed or later
     `approval` event with a decision settles the box (another tab may have answered). */
  const DECIDED = { approved: t("Approved"), refused: t("Refused"), expired: t("Not answered in time") };
  function approvalBox(node, data, runId) {
    const id = data.tool_call_id;
    let box = list.querySelector('.approval[data-call="' + CSS.escape(id) + '"]');
    if (data.status !== "waiting") {
      if (box) box.querySelector(".approval-actions").replaceChildren(
        el("span", { class: "approval-state", text: DECIDED[data.status] || data.status }));
      return;
    }
    if (box) return;
    let args = data.arguments ?? "";
    if (typeof args !== "string") args = JSON.stringify(args, null, 2);
    const answer = async (verb, button) => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      try {
        await api("POST", "/api/v1/runs/" + encodeURIComponent(runId) + "/tool-calls/" + encodeURIComponent(id) + "/" + verb);
        box.querySelector(".approval-actions").replaceChildren(
          el("span", { class: "approval-state", text: verb === "approve" ? t("Approved") : t("Refused") }));
      } catch (err) {
        toast(err.message);
        for (const b of box.querySelectorAll("button")) b.disabled = false;
        button.focus();
      }
    };
    const approve = el("button", { type: "button", class: "primary", text: t("Approve") });
    const refuse = el("button", { type: "button", text: t("Refuse") });
    approve.addEventListener("click", () => answer("approve", approve));
    refuse.addEventListener("click", () => answer("refuse", refuse));
    box = el("div", { class: "approval", role: "group", "aria-label": t("Tool call waiting for your approval"), "data-call": id }, [
      el("p", { text: data.server ? t("Run the tool {tool} on {server}?", { tool: data.tool || data.name, server: data.server }) : t("Run the tool {tool}?", { tool: data.tool || data.name }) }),
      el("p", { class: "muted small", text: t("The turn waits for your answer.") }),
      el("pre", { text: args }),
      el("div", { class: "approval-actions row" }, [approve, refuse]),
    ]);
    node.querySelector(".content").append(box);
  }

  /* PROJ-3: an answer is shown as Markdown (markdown.js) in its `.md` box; "Raw text" shows
     the text as it came.  Questions stay plain text with their line breaks. */
  const sources = new WeakMap(); // .md box → its Markdown text

  function formattedBox(node) {
    let box = node.querySelector(".content > .md");
    if (box) return box;
    box = el("div", { class: "md" });
    node.querySelector(".content").prepend(box);
    const toggle = node.querySelector(".raw-toggle");
    toggle.addEventListener("click", () => {
      const raw = toggle.getAttribute("aria-pressed") !== "true";
      toggle.setAttribute("aria-pressed", String(raw));
      let rawBox = node.querySelector(".content > .raw-text");
      if (!rawBox) { rawBox = el("div", { class: "raw-text" }); box.after(rawBox); }
      rawBox.textContent = sources.get(box) || "";
      rawBox.hidden = !raw;
      box.hidden = raw;
    });
    return box;
  }

  function setText(node, box, text, live) {
    sources.set(box, text);
    node.querySelector(".raw-toggle").hidden = !text;
    window.chatmem.markdown.update(box, text, live);
    const rawBox = node.querySelector(".content > .raw-text");
    if (rawBox && !rawBox.hidden) rawBox.textContent = text;
  }

  /* A reasoning model's thinking, above its answer: a fold, open while it thinks. It is
     plain text (never markdown: it is not the answer) and it is never sent back. */
  function reasoningBox(node, text, live) {
    const box = el("details", { class: "reasoning" });
    box.append(el("summary", { text: live ? t("Thinking…") : t("Thoughts") }), el("div", { class: "reasoning-text", text }));
    box.open = !!live;
    node.querySelector(".content").prepend(box);
    return box;
  }

  /* The text of a live answer: deltas gather and are rendered in an animation frame, at most
     once per frame and never sooner than twice the last render took (the page stays free at
     least two thirds of the time, whatever the answer costs); `flush` renders it complete. */
  function liveText(node) {
    const box = formattedBox(node);
    let text = "";
    let timer = 0;
    let frame = 0;
    let wait = 0;
    const render = (live) => {
      const stick = nearEnd();
      const started = performance.now();
      setText(node, box, text, live);
      wait = Math.min(1000, 2 * (performance.now() - started));
      if (stick) scrollToEnd();
    };
    return {
      append(more) {
        text += more;
        if (timer || frame) return;
        timer = setTimeout(() => {
          timer = 0;
          frame = requestAnimationFrame(() => { frame = 0; render(true); });
        }, wait);
      },
      flush() {
        clearTimeout(timer);
        cancelAnimationFrame(frame);
        timer = frame = 0;
        render(false);
      },
    };
  }

  /* An answer the model did not finish (the finish reason its provider gave). */
  const CUT_NOTES = {
    length: t("The answer was cut off: the model reached its output limit."),
    content_filter: t("The provider's content filter stopped this answer."),
  };

  /* USE-4: which model answered when it is not the one chosen (a locked model, or Auto). */
  function answeredNote(answered) {
    if (!answered || !answered.reason) return "";
    const name = answered.name || t("another model");
    if (answered.reason === "credits_exhausted") return t("Answered by {name}: credits exhausted", { name });
    if (answered.reason === "auto") return t("Answered by {name} (Auto)", { name });
    return answered.note || "";
  }

  function renderMessage(m) {
    const node = messageTemplate.content.firstElementChild.cloneNode(true);
    node.dataset.id = m.id || "";
    node.classList.add("role-" + m.role);
    node.querySelector(".role").textContent = roleLabel(m.role);
    const content = node.querySelector(".content");
    if (m.role === "tool") {
      content.append(toolResultBox(m.content, m.name || state.toolNames.get(m.tool_call_id)));
    } else if (m.role === "assistant") {
      if (m.content) setText(node, formattedBox(node), m.content, false);
      if (m.reasoning) reasoningBox(node, m.reasoning, false);
      for (const call of m.tool_calls || []) content.append(...callBoxes(call));
    } else {
      if (m.content) content.append(document.createTextNode(m.content));
      for (const call of m.tool_calls || []) content.append(...callBoxes(call));
    }
    if (m.from_app) {
      // APPS-3: a message an app sent (ui/message) says so.
      node.querySelector(".role").after(el("span", { class: "badge from-app", text: t("Sent by the app {tool}", { tool: m.from_app.tool || "" }) }));
    }
    const note = answeredNote(m.answered_by);
    if (note) content.after(el("p", { class: "answered-by muted small", text: note }));
    const cut = CUT_NOTES[m.finish_reason];
    if (cut) content.after(el("p", { class: "answer-cut small", text: cut }));
    if (m.role === "user" && m.id) {
      const toggle = node.querySelector(".exclude-pair");
      toggle.hidden = false;
      toggle.addEventListener("click", () => toggleExclusion(m));
    }
    const copyButton = node.querySelector(".copy-message");
    copyButton.addEventListener("click", () => window.chatmem.actions.copy(copyButton, messageText(node)));
    node.querySelector(".oom-label").addEventListener("click", () => {
      if (window.chatmem.memory) window.chatmem.memory.open();
    });
    applyStatusTo(node, m);
    if (window.chatmem.recovery) window.chatmem.recovery.decorate(node, m); // ‹ 1/2 › (PROJ-3)
    if (m.id) state.nodes.set(m.id, node);
    return node;
  }

  function applyStatusTo(node, m) {
    const status = statusOf(m);
    const dimmed = status !== "in_memory" && !!m.id;
    node.classList.toggle("dimmed", dimmed);
    node.dataset.status = status;
    const label = node.querySelector(".oom-label");
    label.hidden = !dimmed || status === "excluded"; // one label per state
    label.title = REASONS[status] || "";
    node.querySelector(".excluded-label").hidden = status !== "excluded";
    const toggle = node.querySelector(".exclude-pair");
    if (status === "excluded") window.chatmem.actions.relabel(toggle, t("Include in memory"), "eye");
    else window.chatmem.actions.relabel(toggle, t("Exclude from memory"), "eye-off");
  }

  /* What Copy copies: an answer as the model wrote it (its Markdown), anything else as shown. */
  function messageText(node) {
    const box = node.querySelector(".content > .md");
    const text = box ? sources.get(box) || "" : "";
    return text || node.querySelector(".content").innerText.trim();
  }

  async function toggleExclusion(m) {
    const excluded = statusOf(m) === "excluded";
    const path = "/api/v1/conversations/" + state.conversationId + "/messages/" + m.id + "/exclusion";
    try {
      await api(excluded ? "DELETE" : "PUT", path);
      m.excluded = !excluded;
      // Optimistic: the plan refresh below brings the authoritative statuses of the pair.
      state.status[m.id] = excluded ? "in_memory" : "excluded";
      const node = state.nodes.get(m.id);
      if (node) applyStatusTo(node, m);
      document.dispatchEvent(new CustomEvent("chatmem:changed"));
    } catch (err) { toast(err.message); }
  }

  /* How many messages the stored summary covers in total: its `message_count`, else (older
     data) the position of the last message it covers, summaries covering a prefix (CTX-9). */
  function summarizedCount() {
    const summary = state.summary;
    if (!summary) return 0;
    if (num(summary.message_count) && summary.message_count > 0) return summary.message_count;
    const through = summaryThrough();
    const at = through ? state.all.findIndex((m) => m.id === through) : -1;
    return at + 1;
  }

  function summaryThrough() {
    const summary = state.summary;
    return summary ? (summary.through || summary.through_message_id || null) : null;
  }

  function markerText(n) {
    return tn("Memory compressed — {n} earlier message summarised", "Memory compressed — {n} earlier messages summarised", n);
  }

  /* The marker for the stored summary: "Memory compressed — N earlier messages summarised"
     after the last message it covers (N: every message the summary covers, over all its
     folds), or at the top of a chat continued from another one's summary (it covers none
     of this chat's messages).  A marker already shown for the same summary is kept (and
     moved if need be), so an open summary or an edit in progress survives plan refreshes. */
  function placeMarker() {
    const summary = state.summary;
    const through = summaryThrough();
    const continued = !!summary && !through && !summary.live;
    const n = summarizedCount();
    const old = list.querySelector(".compaction-marker");
    if (!summary || (!continued && !n)) { if (old) old.remove(); return; }
    const key = [summary.id || "", summary.version || "", through || "", n].join("|");
    let marker = old;
    if (!old || old.dataset.key !== key) {
      if (old) old.remove();
      marker = buildMarker(continued ? t("This chat continues from the summary of an earlier chat") : markerText(n), continued);
      marker.dataset.key = key;
    }
    const anchor = through ? state.nodes.get(through) : null;
    const progress = state.progress;
    if (continued) {
      if (list.firstElementChild !== marker) list.prepend(marker);
    } else if (anchor && anchor.isConnected) {
      if (anchor.nextElementSibling !== marker) anchor.after(marker);
    } else if (summary.live) {
      // Folded during a live turn: where its progress was shown, before the answer.
      const before = progress && progress.isConnected ? progress : state.liveNode && state.liveNode.isConnected ? state.liveNode : null;
      if (before) before.before(marker); else list.append(marker);
    } else if (list.firstElementChild !== marker) {
      list.prepend(marker); // the covered messages are above what is rendered
    }
  }

  function buildMarker(text, continued) {
    const marker = markerTemplate.content.firstElementChild.cloneNode(true);
    marker.querySelector(".compaction-text").textContent = text;
    const source = marker.querySelector(".source-link");
    if (continued && state.sourceId) {
      source.href = "/c/" + encodeURIComponent(state.sourceId);
      source.hidden = false;
    }
    const button = marker.querySelector(".show-summary");
    const box = marker.querySelector(".summary-box");
    const textBox = marker.querySelector(".summary-text");
    const status = marker.querySelector(".summary-status");
    const edit = marker.querySelector(".edit-summary");
    const form = marker.querySelector(".summary-edit");
    const input = marker.querySelector(".summary-input");
    const error = marker.querySelector(".summary-error");
    const save = marker.querySelector(".summary-save");
    const cancel = marker.querySelector(".summary-cancel");
    const factsBox = marker.querySelector(".summary-facts");
    let fullText = "";

    /* CTX-24: the model's words in the text box, the kept section apart (summary_facts.js);
       the editor edits the whole text. */
    function showSummary(text, summary) {
      fullText = text;
      textBox.textContent = window.chatmem.summaryFacts.modelText(text);
      window.chatmem.summaryFacts.render(factsBox, summary || null);
    }

    button.addEventListener("click", async () => {
      const opening = box.hidden;
      if (opening) {
        const found = await loadSummary();
        showSummary(found.text, found.summary);
        edit.hidden = !found.editable;
        status.textContent = "";
        closeEditor();
      }
      box.hidden = !opening;
      button.setAttribute("aria-expanded", String(opening));
      button.textContent = opening ? t("Hide summary") : t("Show summary");
    });

    function closeEditor() {
      form.hidden = true;
      error.hidden = true;
      textBox.hidden = false;
      window.chatmem.summaryFacts.render(factsBox, state.summary);
    }

    edit.addEventListener("click", () => {
      input.value = fullText;
      error.hidden = true;
      status.textContent = "";
      form.hidden = false;
      textBox.hidden = true;
      factsBox.hidden = true;
      edit.hidden = true;
      input.focus();
    });

    cancel.addEventListener("click", () => {
      closeEditor();
      edit.hidden = false;
      edit.focus();
    });

    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); cancel.click(); }
    });

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      save.disabled = true;
      error.hidden = true;
      try {
        const saved = await api("PUT", "/api/v1/conversations/" + state.conversationId + "/summary", { text: input.value });
        const text = saved && typeof saved.text === "string" ? saved.text : input.value;
        // The edit is a new version over the same messages: the marker stays where it is.
        state.summary = Object.assign({}, state.summary, saved || {}, { text, live: false });
        marker.dataset.key = [state.summary.id || "", state.summary.version || "", summaryThrough() || "", summarizedCount()].join("|");
        showSummary(text, state.summary);
        closeEditor();
        edit.hidden = false;
        status.textContent = saved && num(saved.version) ? t("Saved as version {version}.", { version: saved.version }) : t("Saved.");
        edit.focus();
        document.dispatchEvent(new CustomEvent("chatmem:summary", { detail: state.summary }));
        document.dispatchEvent(new CustomEvent("chatmem:changed")); // the counter follows the new text
      } catch (err) {
        error.textContent = err.message || t("The summary could not be saved.");
        error.hidden = false;
        input.focus();
      } finally {
        save.disabled = false;
      }
    });
    return marker;
  }

  /* The current summary's text, and whether it can be edited: the stored summary as loaded,
     else GET …/summary (a marker shown from a live event has no text yet). */
  async function loadSummary() {
    // A summary from a live event has its text but not the fact guard's record (CTX-24).
    const whole = state.summary && typeof state.summary.text === "string" && state.summary.text &&
      (Array.isArray(state.summary.facts_kept) || !state.conversationId);
    if (whole) {
      return { text: state.summary.text, editable: !!state.conversationId, summary: state.summary };
    }
    if (state.conversationId) {
      try {
        const stored = await api("GET", "/api/v1/conversations/" + state.conversationId + "/summary");
        if (stored && typeof stored.text === "string") {
          state.summary = Object.assign({}, state.summary || {}, stored);
          return { text: stored.text, editable: true, summary: state.summary };
        }
      } catch (_) { /* not there (yet): fall back to what the plan sends */ }
    }
    const fromPlan = window.chatmem.memory && window.chatmem.memory.summaryText ? window.chatmem.memory.summaryText() : "";
    return { text: fromPlan || t("The summary is not available."), editable: false };
  }

  /* CTX-21: "Compressing memory… round i of ≈n" while a long backlog folds. */
  function compactionProgress(data) {
    if (!data || data.final !== false) return "";
    if (num(data.round) && num(data.rounds) && data.rounds > 1) {
      return t("Compressing memory… round {round} of ≈{rounds}", { round: data.round, rounds: data.rounds });
    }
    return t("Compressing memory…");
  }

  /* A run's `compaction` event (CTX-10): progress while `final` is false, then the marker
     with the total the summary now covers.  An event without `final` is a single fold. */
  function showCompaction(data) {
    data = data || {};
    if (data.final === false) {
      if (!state.progress || !state.progress.isConnected) {
        state.progress = progressTemplate.content.firstElementChild.cloneNode(true);
        if (state.liveNode && state.liveNode.isConnected) state.liveNode.before(state.progress);
        else list.append(state.progress);
      }
      state.progress.querySelector(".compaction-text").textContent = compactionProgress(data);
      return;
    }
    const total = num(data.total) ? data.total : num(data.count) ? data.count : 0;
    state.summary = {
      id: data.summary_id || "",
      version: data.summary_version || data.version || "",
      through: data.through || null,
      message_count: total,
      text: typeof data.summary === "string" ? data.summary : null,
      live: true,
    };
    placeMarker();
    if (!total) {
      const marker = list.querySelector(".compaction-marker");
      if (marker && data.message) marker.querySelector(".compaction-text").textContent = data.message;
    }
    if (state.progress) { state.progress.remove(); state.progress = null; }
  }

  function renderRange(from, to, where) {
    const frag = document.createDocumentFragment();
    for (let i = from; i < to; i += 1) frag.append(renderMessage(state.all[i]));
    if (where === "prepend") list.prepend(frag); else list.append(frag);
  }

  function renderOlder() {
    if (state.firstRendered === 0) return;
    const from = Math.max(0, state.firstRendered - RENDER_STEP);
    const before = feed.scrollHeight;
    renderRange(from, state.firstRendered, "prepend");
    attachApps(list);
    state.firstRendered = from;
    feed.scrollTop += feed.scrollHeight - before; // keep the reader where they were
    older.hidden = state.firstRendered === 0;
    placeMarker();
    recovered();
  }

  /* PROJ-3: errors of failed turns in place with Retry, Edit and Regenerate (recovery.js). */
  function recovered() {
    if (window.chatmem.recovery) window.chatmem.recovery.finish(state.all, state.nodes);
  }

  function setMessages(messages, summary) {
    state.all = messages;
    // A stored tool result names its call only by id: find the tool's name on the call.
    state.toolNames = new Map();
    for (const m of messages) {
      for (const call of m.tool_calls || []) state.toolNames.set(call.id, (call.function || call).name);
    }
    state.summary = summary || null;
    state.nodes.clear();
    state.liveNode = null; state.progress = null;
    // The new messages go after the old ones, running apps move into their new places, and
    // only then do the old ones go: an app keeps running across a reload of the feed.
    const stale = Array.from(list.childNodes);
    state.firstRendered = Math.max(0, messages.length - RENDER_STEP);
    renderRange(state.firstRendered, messages.length, "append");
    attachApps(Array.from(list.childNodes).slice(stale.length));
    for (const node of stale) node.remove();
    pruneApps();
    older.hidden = state.firstRendered === 0;
    emptyBox.hidden = messages.length > 0;
    placeMarker();
    recovered();
    scroller.settle(); // the reader who scrolled up to read stays where they are
  }

  function applyStatus(map) {
    state.status = Object.assign({}, map || {});
    for (const m of state.all) {
      const node = state.nodes.get(m.id);
      if (node) applyStatusTo(node, m);
    }
  }

  function setSummary(summary) { state.summary = summary || null; placeMarker(); }

  function scrollToEnd() { scroller.toEnd(); }

  function nearEnd() { return scroller.following(); }

  /* A message typed here (or sent by an app: `extra.from_app`), shown before the server has
     stored it. */
  function appendLocal(role, text, extra) {
    emptyBox.hidden = true;
    const m = Object.assign({ id: "", role, content: text }, extra || {});
    const node = renderMessage(m);
    list.append(node);
    if (role === "user") scrollToEnd();
    else scroller.settle();
    return node;
  }

  /* Three dots in the answer's bubble, under its (still empty) text, until its first token;
     "Answering…" for a screen reader.  As tall as a line of text, so the first words take
     its place without a jump. */
  function typingIndicator(node) {
    const dots = el("span", { class: "typing-dots", "aria-hidden": "true" }, [el("i"), el("i"), el("i")]);
    const box = el("span", { class: "typing", role: "status" }, [dots, el("span", { class: "visually-hidden", text: t("Answering…") })]);
    node.append(box); // beside the answer's text, not in it
    return box;
  }

  /* The live answer of a run: text deltas, tool calls and results as they arrive. */
  function startStream() {
    emptyBox.hidden = true;
    let node = appendLocal("assistant", "");
    state.liveNode = node;
    node.classList.add("streaming");
    let typing = typingIndicator(node);
    const typed = () => { if (typing) { typing.remove(); typing = null; } };
    let text = liveText(node);
    let thinking = null;
    const follow = () => { typed(); if (nearEnd()) scrollToEnd(); };
    const doneThinking = () => {
      if (!thinking) return;
      thinking.open = false;
      thinking.querySelector("summary").textContent = t("Thoughts");
      thinking = null;
    };
    return {
      node: () => node,
      appendText(more) { typed(); doneThinking(); text.append(more); },
      appendReasoning(more) {
        if (!thinking) thinking = node.querySelector(".content > .reasoning") || reasoningBox(node, "", true);
        thinking.querySelector(".reasoning-text").append(more);
        follow();
      },
      addToolCall(call) {
        node.querySelector(".content").append(...callBoxes(call));
        attachApps(node);
        follow();
      },
      addApproval(data, runId) { approvalBox(node, data, runId); follow(); },
      addToolResult(result) {
        text.flush();
        const box = appendLocal("tool", "");
        box.querySelector(".content").replaceChildren(toolResultBox(result.content ?? result.result ?? result.output ?? "", result.name));
        // The model continues after a tool result in a new assistant bubble.
        node.classList.remove("streaming");
        doneThinking();
        node = appendLocal("assistant", "");
        state.liveNode = node;
        node.classList.add("streaming");
        typed();
        typing = typingIndicator(node);
        text = liveText(node);
        if (nearEnd()) scrollToEnd();
      },
      addNote(text, cls) {
        const p = el("p", { class: cls || "muted small", text });
        node.querySelector(".content").append(p);
        follow();
      },
      finish() {
        typed();
        doneThinking();
        text.flush();
        node.classList.remove("streaming");
        if (state.progress) { state.progress.remove(); state.progress = null; }
      },
    };
  }

  function clear() {
    state.all = []; state.status = {}; state.summary = null; state.nodes.clear();
    state.liveNode = null; state.progress = null;
    list.replaceChildren(); older.hidden = true; emptyBox.hidden = false;
    pruneApps();
    scroller.toEnd();
  }

  older.addEventListener("click", renderOlder);
  // Scrolling near the top brings the previous batch.  A scroll listener (not an observer)
  // because only a reader's scroll should load more, never the initial layout.
  let pending = false;
  feed.addEventListener("scroll", () => {
    if (pending || state.firstRendered === 0 || feed.scrollTop > 300) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; renderOlder(); });
  }, { passive: true });

  window.chatmem.feed = {
    setMessages, applyStatus, setSummary, appendLocal, startStream, clear, scrollToEnd,
    showCompaction, compactionProgress,
    setConversation(id, sourceId) { state.conversationId = id; state.sourceId = sourceId || ""; },
    messages: () => state.all,
    renderedCount: () => list.querySelectorAll(".message").length,
  };
})();
