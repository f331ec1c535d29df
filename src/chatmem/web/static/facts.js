/* Pinned facts, "Remember always" (CTX-24): what the user asks the model to keep in every
   request of this chat, sent right after the summary and never compressed.
   Three ways in, one API (GET/POST …/facts, PATCH/DELETE …/facts/{id}):
   - the memory window's "Pinned facts" section lists them (edit, delete) and takes a new one;
   - text selected in a message offers a "Remember always" button beside the selection (in
     the message's own row, so Tab reaches it; Alt+Shift+R presses it from the keyboard);
   - the summary view offers "Remember always" for each fact the summary kept verbatim, when
     GET …/summary lists them (`facts_kept: [{text, message_id}]`; nothing otherwise).
   Every change refreshes the plan (the window's "Pinned facts" row and the counter). */
(function () {
  "use strict";
  const { api, el, toast, t } = window.chatmem;
  const dialog = document.getElementById("memory-window");
  const section = document.getElementById("mw-facts");
  const list = document.getElementById("mw-fact-list");
  const none = document.getElementById("mw-no-facts");
  const form = document.getElementById("fact-form");
  const input = document.getElementById("fact-input");
  const error = document.getElementById("fact-error");
  const messages = document.getElementById("messages");
  if (!dialog || !section || !messages) return;

  const state = { facts: [], loadedFor: "", selection: null };
  const conversationId = () => (window.chatmem.memory ? window.chatmem.memory.conversationId() : "") || "";
  const base = () => "/api/v1/conversations/" + conversationId() + "/facts";

  function changed() {
    document.dispatchEvent(new CustomEvent("chatmem:changed")); // the plan follows
    document.dispatchEvent(new CustomEvent("chatmem:facts", { detail: state.facts }));
  }

  function showError(err) {
    error.textContent = err ? err.message || String(err) : "";
    error.hidden = !err;
  }

  async function load() {
    const id = conversationId();
    section.hidden = !id;
    if (!id) { state.facts = []; state.loadedFor = ""; return; }
    try {
      const body = await api("GET", base());
      if (id !== conversationId()) return;
      state.facts = (body && body.items) || [];
      state.loadedFor = id;
      render();
    } catch (err) { showError(err); }
  }

  function render() {
    list.replaceChildren(...state.facts.map(item));
    none.hidden = state.facts.length > 0;
  }

  function item(fact) {
    const text = el("span", { class: "file-name fact-text", text: fact.text });
    const li = el("li", { "data-id": fact.id }, [text]);
    const edit = el("button", { type: "button", class: "link-button", text: t("Edit"), "aria-label": t("Edit the fact {fact}", { fact: fact.text }) });
    const remove = el("button", { type: "button", class: "link-button", text: t("Delete"), "aria-label": t("Delete the fact {fact}", { fact: fact.text }) });
    edit.addEventListener("click", () => editor(li, fact));
    remove.addEventListener("click", () => unpin(fact));
    li.append(edit, remove);
    return li;
  }

  function editor(li, fact) {
    const box = el("input", { class: "fact-edit", value: fact.text, "aria-label": t("Fact text") });
    const save = el("button", { type: "submit", class: "primary", text: t("Save") });
    const cancel = el("button", { type: "button", text: t("Cancel") });
    const editForm = el("form", { class: "row fact-edit-form" }, [box, save, cancel]);
    cancel.addEventListener("click", render);
    box.addEventListener("keydown", (event) => { if (event.key === "Escape") { event.preventDefault(); render(); } });
    editForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      save.disabled = true;
      try {
        const saved = await api("PATCH", base() + "/" + fact.id, { text: box.value });
        state.facts = state.facts.map((f) => (f.id === fact.id ? saved : f));
        showError(null);
        render();
        changed();
      } catch (err) { showError(err); box.focus(); } finally { save.disabled = false; }
    });
    li.replaceChildren(editForm);
    box.focus();
  }

  async function unpin(fact) {
    try {
      await api("DELETE", base() + "/" + fact.id);
      state.facts = state.facts.filter((f) => f.id !== fact.id);
      showError(null);
      render();
      changed();
    } catch (err) { showError(err); }
  }

  /* Pins `text` (from `messageId` when known); answers the fact, or null after saying why. */
  async function pin(text, messageId) {
    if (!conversationId()) return null;
    const body = { text };
    if (messageId) body.message_id = messageId;
    try {
      const fact = await api("POST", base(), body);
      state.facts = state.facts.concat([fact]);
      render();
      changed();
      toast(t("Pinned: the model gets it in every request of this chat."));
      return fact;
    } catch (err) {
      toast(err.message);
      return null;
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    showError(null);
    try {
      const fact = await api("POST", base(), { text: input.value });
      state.facts = state.facts.concat([fact]);
      input.value = "";
      render();
      changed();
    } catch (err) { showError(err); input.focus(); }
  });

  // The window opens: its list is read afresh (another tab may have changed it).
  new MutationObserver(() => { if (dialog.open) load(); }).observe(dialog, { attributes: true, attributeFilter: ["open"] });
  document.addEventListener("chatmem:plan", () => {
    if (conversationId() !== state.loadedFor) { if (dialog.open) load(); else section.hidden = !conversationId(); }
  });

  /* --- "Remember always" beside a selection in a message ------------------------------ */
  const button = el("button", { type: "button", class: "remember-selection", text: t("Remember always"), title: t("Remember always (Alt+Shift+R)"), hidden: true });

  function selectedInMessage() {
    const sel = window.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
    const range = sel.getRangeAt(0);
    const node0 = range.startContainer;
    const start = node0.nodeType === Node.ELEMENT_NODE ? node0 : node0.parentElement;
    const content = start && start.closest(".message .content");
    if (!content || !content.contains(range.endContainer)) return null; // one message only
    const text = sel.toString().trim();
    if (!text) return null;
    const node = content.closest(".message");
    return { text, messageId: node.dataset.id || "", node, rect: range.getBoundingClientRect() };
  }

  function placeButton() {
    const found = selectedInMessage();
    if (!found || !conversationId()) {
      if (document.activeElement !== button) { button.hidden = true; state.selection = null; }
      return;
    }
    state.selection = found;
    const meta = found.node.querySelector(".message-meta") || found.node;
    if (button.parentElement !== meta) meta.append(button); // in the message's row: Tab reaches it
    const box = found.node.getBoundingClientRect();
    button.style.top = Math.max(0, found.rect.bottom - box.top + 4) + "px";
    button.style.left = Math.max(0, Math.min(found.rect.left - box.left, box.width - 140)) + "px";
    button.hidden = false;
  }

  let timer = 0;
  document.addEventListener("selectionchange", () => { clearTimeout(timer); timer = setTimeout(placeButton, 120); });
  button.addEventListener("mousedown", (event) => event.preventDefault()); // keep the selection
  button.addEventListener("click", async () => {
    const chosen = state.selection || selectedInMessage();
    if (!chosen) return;
    button.disabled = true;
    const fact = await pin(chosen.text, chosen.messageId);
    button.disabled = false;
    if (fact) {
      button.hidden = true;
      state.selection = null;
      const sel = window.getSelection();
      if (sel) sel.removeAllRanges();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.altKey && event.shiftKey && ((event.key || "").toLowerCase() === "r" || event.keyCode === 82) && !button.hidden) {
      event.preventDefault();
      button.click();
    }
  });

  /* --- the summary view: "Remember always" per fact the guard kept (summary_facts.js) --- */
  window.chatmem.pinFact = (fact) => pin(fact.text, fact.message_id);

  window.chatmem.facts = { load, pin, list: () => state.facts.slice() };
})();
