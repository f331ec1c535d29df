/* The message feed.  Renders incrementally: only the newest RENDER_STEP messages go into the
   DOM at first, older ones are prepended as the reader scrolls up (or presses "Load earlier
   messages"), so a conversation of thousands of messages opens as fast as a short one.
   Memory status (CTX-14) comes from the plan: every message not sent verbatim is dimmed and
   carries an "Out of memory" label that opens the memory window. */
(function () {
  "use strict";
  const { el, api, toast } = window.chatmem;
  const RENDER_STEP = 200;
  const feed = document.getElementById("feed");
  const list = document.getElementById("messages");
  const emptyBox = document.getElementById("feed-empty");
  const older = document.getElementById("load-older");
  const messageTemplate = document.getElementById("message-template");
  const markerTemplate = document.getElementById("compaction-template");

  const REASONS = {
    summarized: "Summarised: the model gets the summary instead of this message",
    excluded: "Excluded by you: not sent to the model",
    out_of_memory: "Does not fit in the memory, or memory is off",
  };

  const state = { conversationId: "", all: [], firstRendered: 0, status: {}, summary: null, nodes: new Map(), toolNames: new Map() };

  function statusOf(m) {
    return state.status[m.id] || m.status || m.memory_status || (m.excluded ? "excluded" : "in_memory");
  }

  function roleLabel(role) {
    return { user: "You", assistant: "Assistant", system: "Instructions", tool: "Tool result" }[role] || role;
  }

  function toolCallBox(call) {
    const fn = call.function || call;
    let args = fn.arguments ?? call.arguments ?? "";
    if (typeof args !== "string") args = JSON.stringify(args, null, 2);
    return el("details", { class: "tool-box tool-call" }, [
      el("summary", { text: "Tool call: " + (fn.name || call.name || "tool") }),
      el("pre", { text: args }),
    ]);
  }

  function toolResultBox(text, name) {
    return el("details", { class: "tool-box tool-result" }, [
      el("summary", { text: "Tool result" + (name ? ": " + name : "") }),
      el("pre", { text: typeof text === "string" ? text : JSON.stringify(text, null, 2) }),
    ]);
  }

  function renderMessage(m) {
    const node = messageTemplate.content.firstElementChild.cloneNode(true);
    node.dataset.id = m.id || "";
    node.classList.add("role-" + m.role);
    node.querySelector(".role").textContent = roleLabel(m.role);
    const content = node.querySelector(".content");
    if (m.role === "tool") {
      content.append(toolResultBox(m.content, m.name || state.toolNames.get(m.tool_call_id)));
    } else {
      if (m.content) content.append(document.createTextNode(m.content));
      for (const call of m.tool_calls || []) content.append(toolCallBox(call));
    }
    if (m.role === "user" && m.id) {
      const toggle = node.querySelector(".exclude-pair");
      toggle.hidden = false;
      toggle.addEventListener("click", () => toggleExclusion(m));
    }
    node.querySelector(".oom-label").addEventListener("click", () => {
      if (window.chatmem.memory) window.chatmem.memory.open();
    });
    applyStatusTo(node, m);
    if (m.id) state.nodes.set(m.id, node);
    return node;
  }

  function applyStatusTo(node, m) {
    const status = statusOf(m);
    const dimmed = status !== "in_memory" && !!m.id;
    node.classList.toggle("dimmed", dimmed);
    node.dataset.status = status;
    const label = node.querySelector(".oom-label");
    label.hidden = !dimmed;
    label.title = REASONS[status] || "";
    node.querySelector(".excluded-label").hidden = status !== "excluded";
    const toggle = node.querySelector(".exclude-pair");
    toggle.textContent = status === "excluded" ? "Include in memory" : "Exclude from memory";
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

  function summarizedCount() {
    if (state.summary && typeof state.summary.message_count === "number" && state.summary.message_count > 0) {
      return state.summary.message_count;
    }
    return state.all.filter((m) => statusOf(m) === "summarized").length;
  }

  function lastSummarizedId() {
    if (state.summary && (state.summary.through || state.summary.through_message_id)) {
      return state.summary.through || state.summary.through_message_id;
    }
    let last = null;
    for (const m of state.all) if (statusOf(m) === "summarized") last = m.id;
    return last;
  }

  /* CTX-10: "Memory compressed — N earlier messages summarised" after the last summarised message. */
  function placeMarker() {
    const old = list.querySelector(".compaction-marker");
    if (old) old.remove();
    const n = summarizedCount();
    const through = lastSummarizedId();
    if (!n || !through) return;
    const marker = markerTemplate.content.firstElementChild.cloneNode(true);
    marker.querySelector(".compaction-text").textContent =
      "Memory compressed — " + n + " earlier " + (n === 1 ? "message" : "messages") + " summarised";
    const button = marker.querySelector(".show-summary");
    const text = marker.querySelector(".summary-text");
    button.addEventListener("click", async () => {
      const open = text.hidden;
      if (open && !text.textContent) text.textContent = await summaryText();
      text.hidden = !open;
      button.setAttribute("aria-expanded", String(open));
      button.textContent = open ? "Hide summary" : "Show summary";
    });
    const anchor = state.nodes.get(through);
    if (anchor && anchor.isConnected) anchor.after(marker);
    else if (state.firstRendered > 0 && state.all.findIndex((m) => m.id === through) >= state.firstRendered) list.append(marker);
    else list.prepend(marker);
  }

  async function summaryText() {
    if (state.summary && state.summary.text) return state.summary.text;
    if (window.chatmem.memory && window.chatmem.memory.summaryText) {
      const t = window.chatmem.memory.summaryText();
      if (t) return t;
    }
    return "The summary is not available.";
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
    state.firstRendered = from;
    feed.scrollTop += feed.scrollHeight - before; // keep the reader where they were
    older.hidden = state.firstRendered === 0;
    placeMarker();
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
    list.replaceChildren();
    state.firstRendered = Math.max(0, messages.length - RENDER_STEP);
    renderRange(state.firstRendered, messages.length, "append");
    older.hidden = state.firstRendered === 0;
    emptyBox.hidden = messages.length > 0;
    placeMarker();
    scrollToEnd();
  }

  function applyStatus(map) {
    state.status = Object.assign({}, map || {});
    for (const m of state.all) {
      const node = state.nodes.get(m.id);
      if (node) applyStatusTo(node, m);
    }
    placeMarker();
  }

  function setSummary(summary) { state.summary = summary || null; placeMarker(); }

  function scrollToEnd() { feed.scrollTop = feed.scrollHeight; }

  function nearEnd() { return feed.scrollHeight - feed.scrollTop - feed.clientHeight < 120; }

  /* A message typed here, shown before the server has stored it. */
  function appendLocal(role, text) {
    emptyBox.hidden = true;
    const m = { id: "", role, content: text };
    const node = renderMessage(m);
    list.append(node);
    scrollToEnd();
    return node;
  }

  /* The live answer of a run: text deltas, tool calls and results as they arrive. */
  function startStream() {
    emptyBox.hidden = true;
    let node = appendLocal("assistant", "");
    node.classList.add("streaming");
    let textNode = document.createTextNode("");
    node.querySelector(".content").append(textNode);
    const follow = () => { if (nearEnd()) scrollToEnd(); };
    return {
      node: () => node,
      appendText(text) {
        const stick = nearEnd();
        textNode.data += text;
        if (stick) scrollToEnd();
      },
      addToolCall(call) {
        node.querySelector(".content").append(toolCallBox(call));
        follow();
      },
      addToolResult(result) {
        const box = appendLocal("tool", "");
        box.querySelector(".content").replaceChildren(toolResultBox(result.content ?? result.result ?? result.output ?? "", result.name));
        // The model continues after a tool result in a new assistant bubble.
        node.classList.remove("streaming");
        node = appendLocal("assistant", "");
        node.classList.add("streaming");
        textNode = document.createTextNode("");
        node.querySelector(".content").append(textNode);
        follow();
      },
      addNote(text, cls) {
        const p = el("p", { class: cls || "muted small", text });
        node.querySelector(".content").append(p);
        follow();
      },
      finish() { node.classList.remove("streaming"); },
    };
  }

  function clear() {
    state.all = []; state.status = {}; state.summary = null; state.nodes.clear();
    list.replaceChildren(); older.hidden = true; emptyBox.hidden = false;
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
    setConversation(id) { state.conversationId = id; },
    messages: () => state.all,
    renderedCount: () => list.querySelectorAll(".message").length,
  };
})();
