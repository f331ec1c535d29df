/* The conversation list: folders, pinned first (the API's order), search over titles and
   content (?q=), and infinite scroll — pages are fetched only as the sentinel comes into
   view, so thousands of conversations cost one page at a time. */
(function () {
  "use strict";
  const { api, items, el, toast, debounce, t, tn } = window.chatmem;
  const PAGE = 50;
  const list = document.getElementById("conversation-list");
  const empty = document.getElementById("list-empty");
  const sentinel = document.getElementById("list-sentinel");
  const more = document.getElementById("list-more");
  const search = document.getElementById("search");
  const folderList = document.getElementById("folder-list");
  const evicted = document.getElementById("evicted-notice");
  const sidebar = document.getElementById("sidebar");
  const layout = document.getElementById("layout");

  const state = { q: "", folder: "", cursor: null, offset: 0, done: false, loading: false, generation: 0, current: layout.dataset.conversationId || "", folders: [] };

  function conversationItem(c) {
    const link = el("a", { href: "/c/" + c.id, "data-id": c.id }, [
      c.pinned ? el("span", { class: "pin-mark", title: t("Pinned") }, [el("span", { class: "visually-hidden", text: t("Pinned:") + " " })]) : null,
      el("span", { class: "title", text: c.title || t("Untitled") }),
    ]);
    if (c.id === state.current) link.setAttribute("aria-current", "page");
    const snippet = c.snippet || c.match;
    const li = el("li", { class: c.pinned ? "pinned" : "", "data-id": c.id }, [link]);
    if (snippet && state.q) li.append(el("span", { class: "snippet", text: snippet }));
    return li;
  }

  /* STORE-4: conversations removed by a storage quota are counted and shown, never silent. */
  async function showEvicted() {
    let me = null;
    try { me = await api("GET", "/api/v1/me"); } catch (_) { return; }
    const ev = me && me.evicted;
    const n = typeof ev === "number" ? ev : ev && ev.conversations;
    if (typeof n === "number" && n > 0) {
      evicted.textContent = tn("{n} conversation was removed to stay within the storage quota.", "{n} conversations were removed to stay within the storage quota.", n);
      evicted.hidden = false;
    }
  }

  async function loadPage() {
    if (state.loading || state.done) return;
    state.loading = true;
    const generation = state.generation;
    const params = new URLSearchParams({ limit: String(PAGE) });
    if (state.q) params.set("q", state.q);
    if (state.folder) params.set("folder_id", state.folder);
    if (state.cursor) params.set("cursor", state.cursor); else if (state.offset) params.set("offset", String(state.offset));
    try {
      const body = await api("GET", "/api/v1/conversations?" + params);
      if (generation !== state.generation) return; // a newer search replaced this one
      const rows = items(body, "conversations");
      for (const c of rows) list.append(conversationItem(c));
      state.offset += rows.length;
      const next = body && !Array.isArray(body) ? (body.next_cursor ?? body.next ?? body.cursor ?? null) : null;
      state.cursor = next;
      state.done = next ? false : (body && body.has_more === true ? false : rows.length < PAGE);
      if (!next && body && body.has_more === false) state.done = true;
      empty.hidden = list.children.length > 0;
      empty.textContent = state.q ? t("No chats match.") : t("No chats yet.");
      more.hidden = state.done;
    } catch (err) {
      toast(err.message);
      state.done = true;
    } finally {
      state.loading = false;
    }
    // Keep filling while the sentinel is still visible (a tall screen, a short page).
    if (!state.done && isVisible(sentinel)) loadPage();
  }

  function isVisible(node) {
    const r = node.getBoundingClientRect();
    const box = sidebar.getBoundingClientRect();
    return r.top < box.bottom + 200;
  }

  function reload() {
    state.generation += 1;
    state.cursor = null; state.offset = 0; state.done = false; state.loading = false;
    list.replaceChildren();
    return loadPage();
  }

  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadPage();
  }, { root: sidebar, rootMargin: "200px" }).observe(sentinel);
  more.addEventListener("click", loadPage);

  const initialQ = new URLSearchParams(location.search).get("q");
  if (initialQ) { search.value = initialQ; state.q = initialQ; }
  search.addEventListener("input", debounce(() => {
    state.q = search.value.trim();
    const url = new URL(location.href);
    if (state.q) url.searchParams.set("q", state.q); else url.searchParams.delete("q");
    history.replaceState(history.state, "", url);
    reload();
  }, 250));

  /* Folders */
  function renderFolders() {
    const keep = folderList.firstElementChild;
    folderList.replaceChildren(keep);
    for (const f of state.folders) {
      const button = el("button", { type: "button", class: "folder-filter", "data-folder": f.id, "aria-pressed": String(state.folder === f.id), text: f.name });
      const remove = el("button", { type: "button", class: "icon-button", "aria-label": t("Delete folder {name}", { name: f.name }), text: "×" });
      remove.addEventListener("click", async () => {
        if (!confirm(t("Delete the folder “{name}”? Its chats stay.", { name: f.name }))) return;
        try { await api("DELETE", "/api/v1/folders/" + f.id); await loadFolders(); if (state.folder === f.id) selectFolder(""); }
        catch (err) { toast(err.message); }
      });
      folderList.append(el("li", { class: "folder-item" }, [button, remove]));
    }
    keep.firstElementChild.setAttribute("aria-pressed", String(state.folder === ""));
    document.dispatchEvent(new CustomEvent("chatmem:folders", { detail: state.folders }));
  }

  function selectFolder(id) {
    state.folder = id;
    for (const b of folderList.querySelectorAll(".folder-filter")) b.setAttribute("aria-pressed", String(b.dataset.folder === id));
    reload();
  }

  folderList.addEventListener("click", (event) => {
    const b = event.target.closest(".folder-filter");
    if (b) selectFolder(b.dataset.folder);
  });

  async function loadFolders() {
    try {
      state.folders = items(await api("GET", "/api/v1/folders"), "folders");
      renderFolders();
    } catch (err) { toast(err.message); }
  }

  document.getElementById("new-folder").addEventListener("click", async () => {
    const name = prompt(t("Folder name"));
    if (!name || !name.trim()) return;
    try { await api("POST", "/api/v1/folders", { name: name.trim() }); await loadFolders(); }
    catch (err) { toast(err.message); }
  });

  /* Drawer on phones */
  document.getElementById("open-sidebar").addEventListener("click", () => { sidebar.classList.add("open"); search.focus(); });
  document.getElementById("close-sidebar").addEventListener("click", () => {
    sidebar.classList.remove("open");
    document.getElementById("open-sidebar").focus(); // the closed drawer cannot keep the focus
  });
  sidebar.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && sidebar.classList.contains("open")) document.getElementById("close-sidebar").click();
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") sidebar.classList.remove("open"); });

  function markCurrent(id) {
    state.current = id;
    for (const a of list.querySelectorAll("a[data-id]")) {
      if (a.dataset.id === id) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
  }

  window.chatmem.sidebar = { reload, markCurrent, loadFolders, folders: () => state.folders };
  loadFolders();
  reload();
  showEvicted();
})();
