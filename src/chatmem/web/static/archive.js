/* Archived conversations (ARCH-1): search by title, read without changing, restore, delete. */
(function () {
  "use strict";
  const { api, items, el, toast, debounce, t } = window.chatmem;
  const main = document.getElementById("main");
  const list = document.getElementById("archive-list");
  const empty = document.getElementById("archive-empty");
  const search = document.getElementById("archive-search");
  const view = document.getElementById("archive-view");
  const messages = document.getElementById("archive-messages");
  let current = main.dataset.archiveId || "";

  async function load() {
    const q = search.value.trim();
    try {
      const rows = items(await api("GET", "/api/v1/archive" + (q ? "?q=" + encodeURIComponent(q) : "")), "conversations");
      list.replaceChildren();
      for (const a of rows) {
        const link = el("a", { href: "/archive/" + a.id, "data-id": a.id }, [el("span", { class: "title", text: a.title || t("Untitled") })]);
        if (a.id === current) link.setAttribute("aria-current", "page");
        link.addEventListener("click", (event) => { event.preventDefault(); open(a.id); });
        list.append(el("li", {}, [link]));
      }
      empty.hidden = rows.length > 0;
      empty.textContent = q ? t("No archived chats match.") : t("Nothing archived.");
    } catch (err) { toast(err.message); }
  }

  async function open(id) {
    try {
      const body = await api("GET", "/api/v1/archive/" + encodeURIComponent(id));
      const conv = body.conversation || body;
      current = id;
      history.replaceState(null, "", "/archive/" + id);
      document.getElementById("archive-title").textContent = conv.title || t("Untitled");
      messages.replaceChildren();
      for (const m of items(body.messages ? body : conv, "messages")) {
        const who = { user: t("You"), assistant: t("Assistant"), tool: t("Tool result"), system: t("Instructions") }[m.role] || m.role;
        const copy = window.chatmem.actions.iconButton("copy", t("Copy message"), "copy-message");
        copy.addEventListener("click", () => window.chatmem.actions.copy(copy, m.content || ""));
        messages.append(el("li", { class: "message role-" + m.role }, [
          el("div", { class: "message-meta" }, [el("span", { class: "role", text: who })]),
          m.role === "assistant" // answers in Markdown, as in the chat (PROJ-3)
            ? el("div", { class: "content" }, [el("div", { class: "md" }, [window.chatmem.markdown.render(m.content || "")])])
            : el("div", { class: "content", text: m.content || "" }),
          // Read-only: Copy is its one action, as written (an answer's Markdown).
          el("div", { class: "message-actions", role: "group", "aria-label": t("Message actions") }, [copy]),
        ]));
      }
      view.hidden = false;
      for (const a of list.querySelectorAll("a[data-id]")) {
        if (a.dataset.id === id) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
      }
    } catch (err) {
      toast(err.status === 404 ? t("This archived conversation does not exist.") : err.message);
    }
  }

  document.getElementById("archive-restore").addEventListener("click", async () => {
    try {
      const restored = await api("POST", "/api/v1/archive/" + current + "/restore");
      const id = restored && (restored.id || (restored.conversation && restored.conversation.id));
      location.assign(id ? "/c/" + id : "/");
    } catch (err) { toast(err.message); }
  });
  document.getElementById("archive-delete").addEventListener("click", async () => {
    if (!confirm(t("Delete this conversation permanently? This cannot be undone."))) return;
    try {
      await api("DELETE", "/api/v1/archive/" + current);
      view.hidden = true; current = "";
      history.replaceState(null, "", "/archive");
      toast(t("Deleted."));
      load();
    } catch (err) { toast(err.message); }
  });
  search.addEventListener("input", debounce(load, 250));
  load();
  if (current) open(current);
})();
