/* PROJ-1: projects in the sidebar — create, rename, instructions, files, the project's chats,
   a new chat in a project (/?project=ID), and moving the open chat into one (chat actions). */
(function () {
  "use strict";
  const { api, items, el, toast, t, tn } = window.chatmem;
  const list = document.getElementById("project-list");
  const dialog = document.getElementById("project-dialog");
  const form = document.getElementById("project-form");
  const nameInput = document.getElementById("project-name");
  const instructions = document.getElementById("project-instructions");
  const fileList = document.getElementById("project-files");
  const noFiles = document.getElementById("project-no-files");
  const fileInput = document.getElementById("project-file");
  const chats = document.getElementById("project-chats");
  const select = document.getElementById("project-select");
  const fromUrl = new URLSearchParams(location.search).get("project") || "";
  const state = { projects: [], open: null, conversation: null };

  function render() {
    list.replaceChildren();
    for (const p of state.projects) {
      const button = el("button", { type: "button", class: "folder-filter project-open", "data-project": p.id, text: p.name });
      button.addEventListener("click", () => openProject(p.id));
      list.append(el("li", { class: "folder-item" }, [button]));
    }
    const keep = (state.conversation && state.conversation.project_id) || (state.conversation ? "" : fromUrl);
    select.replaceChildren(el("option", { value: "", text: t("No project") }));
    for (const p of state.projects) select.append(el("option", { value: p.id, text: p.name }));
    select.value = keep;
  }

  async function load() {
    try { state.projects = items(await api("GET", "/api/v1/projects"), "projects"); render(); }
    catch (err) { toast(err.message); return; }
    // A new chat opened from a project says which one it will be created in.
    const chosen = !state.conversation && state.projects.find((p) => p.id === fromUrl);
    if (chosen) document.getElementById("chat-title").textContent = t("New chat in {project}", { project: chosen.name });
  }

  function renderFiles(project) {
    fileList.replaceChildren();
    for (const f of project.files || []) {
      const remove = el("button", { type: "button", class: "link-button", text: t("Remove"), "aria-label": t("Remove {file}", { file: f.name }) });
      remove.addEventListener("click", async () => {
        try { await api("DELETE", "/api/v1/projects/" + project.id + "/files/" + f.id); await openProject(project.id); }
        catch (err) { toast(err.message); }
      });
      fileList.append(el("li", { "data-id": f.id }, [
        el("span", { class: "file-name", text: f.name }),
        el("span", { class: "muted small", text: tn("{n} token", "{n} tokens", f.tokens) }),
        remove,
      ]));
    }
    noFiles.hidden = (project.files || []).length > 0;
  }

  async function openProject(id) {
    try {
      const project = await api("GET", "/api/v1/projects/" + id);
      state.open = project;
      nameInput.value = project.name;
      instructions.value = project.instructions;
      document.getElementById("project-new-chat").href = "/?project=" + encodeURIComponent(id);
      renderFiles(project);
      const body = await api("GET", "/api/v1/projects/" + id + "/conversations");
      chats.replaceChildren(...items(body, "conversations").map((c) =>
        el("li", {}, [el("a", { href: "/c/" + c.id, text: c.title || t("Untitled") })])));
      if (!dialog.open) dialog.showModal();
    } catch (err) { toast(err.message); }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!state.open) return;
    try {
      await api("PATCH", "/api/v1/projects/" + state.open.id, { name: nameInput.value, instructions: instructions.value });
      await load();
      toast(t("Project saved."));
    } catch (err) { toast(err.message); }
  });

  fileInput.addEventListener("change", async () => {
    const files = Array.from(fileInput.files || []);
    fileInput.value = "";
    if (!state.open || !files.length) return;
    try {
      for (const file of files) {
        const data = new FormData();
        data.append("file", file, file.name);
        await api("POST", "/api/v1/projects/" + state.open.id + "/files", data);
      }
      await openProject(state.open.id);
    } catch (err) { toast(err.message); }
  });

  document.getElementById("project-delete").addEventListener("click", async () => {
    if (!state.open || !confirm(t("Delete the project “{name}”? Its chats stay.", { name: state.open.name }))) return;
    try { await api("DELETE", "/api/v1/projects/" + state.open.id); dialog.close(); await load(); }
    catch (err) { toast(err.message); }
  });

  document.getElementById("new-project").addEventListener("click", async () => {
    const name = prompt(t("Project name"));
    if (!name || !name.trim()) return;
    try {
      const project = await api("POST", "/api/v1/projects", { name: name.trim() });
      await load();
      await openProject(project.id);
    } catch (err) { toast(err.message); }
  });

  /* Moving the open chat into a project, or out of one. */
  select.addEventListener("change", async () => {
    if (!state.conversation) return; // a new chat: created in the chosen project (chat.js)
    const project_id = select.value || null;
    try {
      await api("PATCH", "/api/v1/conversations/" + state.conversation.id, { project_id });
      state.conversation.project_id = project_id;
      const memory = window.chatmem.memory;
      if (memory) { memory.refresh(); memory.loadFiles(); } // its instructions and files count now
    } catch (err) { toast(err.message); select.value = state.conversation.project_id || ""; }
  });

  document.addEventListener("chatmem:conversation", (event) => {
    state.conversation = event.detail;
    select.value = state.conversation.project_id || "";
  });

  window.chatmem.projects = {
    /* The project a new chat is created in: the chat actions' choice, or /?project=ID. */
    forNewChat() { return select.value || fromUrl || null; },
    reload: load,
  };
  load();
})();
