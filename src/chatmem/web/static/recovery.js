/* Recovery in the feed (PROJ-3): a failed turn shows its error in place, under its
   question, with Retry; the last answer can be regenerated and the last question edited and
   sent again; a message with other versions shows "‹ 1/2 ›" to switch between them.  Only the
   version shown is in memory (the server never plans a hidden one).

   Everything here comes from stored data (GET …/messages: `version`, `versions`, `error`),
   so a reload shows the same.  The feed calls decorate() for each message it renders and
   finish() once a render is complete; the actions start a turn through the chat
   (window.chatmem.chat.follow) and reload the feed. */
(function () {
  "use strict";
  const { el, api, toast } = window.chatmem;
  const t = (msgid, vars) => (window.chatmem.t ? window.chatmem.t(msgid, vars) : msgid.replace(/\{(\w+)\}/g, (w, k) => (vars && k in vars ? String(vars[k]) : w)));

  function chat() { return window.chatmem.chat || null; }
  function conversationPath(suffix) {
    const c = chat() && chat().state.conversation;
    return c ? "/api/v1/conversations/" + encodeURIComponent(c.id) + suffix : null;
  }
  function busy() { const c = chat(); return !!(c && c.state.run); }
  function newKey() {
    return crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2);
  }

  /* A turn started again (regenerate, retry, edit): the feed shows the stored history
     without the version put away, then follows the new run. */
  async function startAgain(suffix, body) {
    const c = chat();
    if (!c || busy()) { toast(t("A turn is already running in this chat.")); return false; }
    const path = conversationPath(suffix);
    if (!path) return false;
    try {
      const started = await api("POST", path, body, { headers: { "Idempotency-Key": newKey() } });
      await c.reload();
      c.follow(started.run_id || started.id, false);
      return true;
    } catch (err) {
      toast(err.message);
      return false;
    }
  }

  function regenerate(m) { return startAgain("/messages/" + encodeURIComponent(m.id) + "/regenerate"); }

  async function switchTo(m, index) {
    if (busy()) { toast(t("A turn is already running in this chat.")); return; }
    const path = conversationPath("/messages/" + encodeURIComponent(m.id) + "/version");
    if (!path) return;
    try {
      await api("PUT", path, { index });
      await chat().reload();
      document.dispatchEvent(new CustomEvent("chatmem:changed")); // the counter and statuses
    } catch (err) { toast(err.message); }
  }

  /* "‹ 1/2 ›" in the message's header. */
  function versionSwitch(m) {
    const index = m.version || 1;
    const count = m.versions || 1;
    const question = m.version_kind === "question";  // whole sentences: they translate whole
    const prev = el("button", { type: "button", class: "link-button version-prev", text: "‹", "aria-label": question ? t("Previous version of this question") : t("Previous version of this answer") });
    const next = el("button", { type: "button", class: "link-button version-next", text: "›", "aria-label": question ? t("Next version of this question") : t("Next version of this answer") });
    prev.disabled = index <= 1;
    next.disabled = index >= count;
    prev.addEventListener("click", () => switchTo(m, index - 1));
    next.addEventListener("click", () => switchTo(m, index + 1));
    return el("span", { class: "version-switch", role: "group", "aria-label": t("Versions") }, [
      prev, el("span", { class: "version-count", text: index + "/" + count }), next,
    ]);
  }

  function decorate(node, m) {
    if (!m || !m.id) return;
    if ((m.versions || 1) > 1) {
      const meta = node.querySelector(".message-meta");
      const spacer = meta.querySelector(".spacer");
      meta.insertBefore(versionSwitch(m), spacer);
    }
  }

  /* The error of a question's failed turn, under the question and what it kept (a partial
     answer), with Retry for the last question. */
  function errorBox(m, last) {
    const error = m.error || {};
    // The alert is inside the item: a list holds list items only (a11y).
    const alert = el("div", { role: "alert" }, [
      el("p", { class: "turn-error-text", text: error.message || t("The model answered with an error.") }),
    ]);
    if (last) {
      const retry = el("button", { type: "button", class: "primary retry", text: t("Retry") });
      retry.addEventListener("click", async () => {
        retry.disabled = true;
        if (!(await regenerate(m))) retry.disabled = false;
      });
      alert.append(el("div", { class: "row" }, [retry]));
    }
    return el("li", { class: "turn-error error-box", "data-question": m.id }, [alert]);
  }

  /* The inline editor of the last question: Save and send makes it a new version. */
  function openEditor(node, m) {
    if (node.querySelector(".edit-question")) return;
    const content = node.querySelector(".content");
    const input = el("textarea", { class: "edit-input", rows: "3", "aria-label": t("Edit your message") });
    input.value = m.content || "";
    const save = el("button", { type: "submit", class: "primary", text: t("Save and send") });
    const cancel = el("button", { type: "button", text: t("Cancel") });
    const form = el("form", { class: "edit-question" }, [input, el("div", { class: "row" }, [save, cancel])]);
    const close = () => { form.remove(); content.hidden = false; };
    cancel.addEventListener("click", close);
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); close(); }
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); form.requestSubmit(); }
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!input.value.trim()) { input.focus(); return; }
      save.disabled = true;
      if (!(await startAgain("/messages/" + encodeURIComponent(m.id) + "/edit", { content: input.value }))) save.disabled = false;
    });
    content.hidden = true;
    content.after(form);
    input.focus();
  }


  /* After a render: Edit on the last question, Regenerate on the last answer, the errors of
     failed turns in place. */
  function finish(messages, nodes) {
    for (const old of document.querySelectorAll("#messages .turn-error")) old.remove();
    let lastQuestion = -1;
    for (let i = messages.length - 1; i >= 0; i -= 1) {
      if (messages[i].role === "user" && messages[i].id) { lastQuestion = i; break; }
    }
    messages.forEach((m, i) => {
      if (m.role !== "user" || !m.error || !nodes.get(m.id)) return;
      let end = i;
      while (end + 1 < messages.length && messages[end + 1].role !== "user") end += 1;
      let anchor = nodes.get(m.id);
      for (let j = end; j > i; j -= 1) {
        const after = nodes.get(messages[j].id);
        if (after && after.isConnected) { anchor = after; break; }
      }
      anchor.after(errorBox(m, i === lastQuestion));
    });
    if (lastQuestion < 0) return;
    const question = messages[lastQuestion];
    const questionNode = nodes.get(question.id);
    if (questionNode && !questionNode.querySelector(".edit-last")) {
      window.chatmem.actions.add(questionNode, "edit", t("Edit"), "edit-last", () => openEditor(questionNode, question));
    }
    const answer = messages[messages.length - 1];
    const answerNode = answer && answer.role === "assistant" ? nodes.get(answer.id) : null;
    if (answerNode && !answerNode.querySelector(".regenerate")) {
      const button = window.chatmem.actions.add(answerNode, "regenerate", t("Regenerate"), "regenerate", async () => {
        button.disabled = true;
        if (!(await regenerate(answer))) button.disabled = false;
      });
    }
  }

  window.chatmem.recovery = { decorate, finish };
})();
