/* The chat: loading a conversation, the composer (Enter sends, Shift+Enter adds a line), the
   model selector and the memory mode control, sending a turn and following it live, Stop,
   reopening a conversation whose turn is still running (TURN-1), and opening a conversation
   continued from this one's summary (CTX-23). */
(function () {
  "use strict";
  const { api, items, el, toast, t } = window.chatmem;
  const { feed, memory, sidebar, stream } = window.chatmem;
  const layout = document.getElementById("layout");
  const draft = document.getElementById("draft");
  const composer = document.getElementById("composer");
  const sendButton = document.getElementById("send");
  const stopButton = document.getElementById("stop");
  const modelSelect = document.getElementById("model-select");
  let ready = Promise.resolve();
  const modeSelect = document.getElementById("mode-select");
  const modeNote = document.getElementById("mode-note");
  const memorySwitch = document.getElementById("memory-switch");
  const contextHelp = document.getElementById("context-help");
  const title = document.getElementById("chat-title");
  const tools = document.getElementById("chat-tools");
  const pinButton = document.getElementById("pin-chat");
  const folderSelect = document.getElementById("folder-select");
  const errorBox = document.getElementById("chat-error");
  const errorText = document.getElementById("chat-error-text");
  const errorActions = document.getElementById("chat-error-actions");
  const attachInput = document.getElementById("attach-file");
  const attachments = document.getElementById("attachments");

  const state = { conversation: null, profiles: [], run: null, follower: null, pendingFiles: [], newMode: "full", kept: "full" };

  /* ---------- profiles and the model selector ---------- */
  function profileById(id) { return state.profiles.find((p) => p.id === id) || null; }
  function currentProfile() { return profileById(modelSelect.value); }

  async function loadProfiles() {
    try { state.profiles = items(await api("GET", "/api/v1/profiles"), "profiles"); }
    catch (err) { toast(err.message); state.profiles = []; }
    modelSelect.replaceChildren();
    if (!state.profiles.length) {
      modelSelect.append(el("option", { value: "", text: t("No model yet") }));
      modelSelect.disabled = true;
      if (layout.dataset.conversationId) showError(t("Add a model profile to start chatting."), [[t("Add a model"), () => location.assign("/profiles")]]);
      else showFirstRun(true); // the first page after sign-in says what to do
      return;
    }
    showFirstRun(false);
    modelSelect.disabled = false;
    for (const p of state.profiles) {
      modelSelect.append(el("option", { value: p.id, text: p.name + (p.model && p.model !== p.name ? " · " + p.model : "") }));
    }
    // USE-4: "Auto" (the best model allowed now) once it has a model to pick: a shared one an
    // administrator ranked, or one of the user's own (the profiles not shared are theirs).
    if (state.profiles.some((p) => !p.shared || p.auto_rank != null)) {
      modelSelect.append(el("option", { value: "auto", text: t("Auto (best model available)") }));
    }
    document.dispatchEvent(new CustomEvent("chatmem:profiles", { detail: state.profiles }));
  }

  /* An empty chat: with no model profile yet, the first run's two ways in (add a profile,
     import a ChatGPT or Claude export: the sidebar's import, which takes both); else an
     invitation to write. */
  function showFirstRun(first) {
    document.getElementById("first-run").hidden = !first;
    document.getElementById("empty-chat").hidden = first;
  }
  document.getElementById("first-run-import").addEventListener("click", () => document.getElementById("import-file").click());

  /* The block "Conversation context" (seed 001): its switch turns the memory off (mode
     "off") or on with the mode chosen beside it (Economy, Everything, Recent messages), so
     the API's modes are unchanged.  The last mode chosen is kept while the switch is off.
     CTX-7: a stateless model always gets No memory; both controls are unavailable and the
     «?» by the heading says why. */
  function chosenMode() { return memorySwitch.checked ? modeSelect.value : "off"; }

  function showMode(mode) {
    if (mode && mode !== "off") state.kept = mode;
    memorySwitch.checked = mode !== "off";
    modeSelect.value = state.kept;
    modeSelect.disabled = memorySwitch.disabled || !memorySwitch.checked;
  }

  function applyProfile() {
    const p = currentProfile();
    const stateless = !!(p && p.stateless);
    memorySwitch.disabled = stateless;
    contextHelp.hidden = !stateless;
    if (!stateless) { modeNote.hidden = true; contextHelp.setAttribute("aria-expanded", "false"); }
    showMode(stateless ? "off" : state.conversation ? state.conversation.mode : state.newMode);
    // A chat not created yet is planned with the chosen model and mode (CTX-17).
    memory.setProfile(p, state.conversation ? undefined : chosenMode());
  }

  contextHelp.addEventListener("click", () => {
    modeNote.hidden = !modeNote.hidden;
    contextHelp.setAttribute("aria-expanded", String(!modeNote.hidden));
  });

  modelSelect.addEventListener("change", async () => {
    applyProfile();
    if (!state.conversation) return;
    try {
      state.conversation = await api("PATCH", convPath(), { profile_id: modelSelect.value }) || state.conversation;
      state.conversation.profile_id = modelSelect.value;
      applyProfile();
      memory.refresh();
    } catch (err) { toast(err.message); }
  });

  async function changeMode() {
    const mode = chosenMode();
    showMode(mode);
    if (!state.conversation) {
      state.newMode = mode;
      memory.setProfile(currentProfile(), mode);
      return;
    }
    try {
      const updated = await api("PATCH", convPath(), { mode });
      state.conversation = Object.assign(state.conversation, updated || {}, { mode });
      memory.refresh();
    } catch (err) { toast(err.message); applyProfile(); }
  }
  modeSelect.addEventListener("change", changeMode);
  memorySwitch.addEventListener("change", changeMode);

  /* ---------- the conversation ---------- */
  function convPath(suffix) { return "/api/v1/conversations/" + state.conversation.id + (suffix || ""); }

  function showConversation(c) {
    state.conversation = c;
    title.textContent = c.title || t("Untitled");
    document.title = (c.title || t("Untitled")) + " · chatmem";
    tools.hidden = false;
    pinButton.setAttribute("aria-pressed", String(!!c.pinned));
    pinButton.querySelector(".menu-label").textContent = c.pinned ? t("Unpin") : t("Pin");
    folderSelect.value = c.folder_id || c.folder || "";
    document.getElementById("export-chat").href = "/api/v1/export?conversation_id=" + encodeURIComponent(c.id);
    if (c.profile_id && (profileById(c.profile_id) || c.profile_id === "auto")) modelSelect.value = c.profile_id;
    if (window.chatmem.usage) window.chatmem.usage.apply(); // a locked model shows its fallback
    feed.setConversation(c.id, c.source_conversation_id);
    memory.setConversation(c.id); // the counter and memory window follow from here on
    applyProfile();
    sidebar.markCurrent(c.id);
    document.dispatchEvent(new CustomEvent("chatmem:conversation", { detail: c }));
  }

  async function loadMessages() {
    const body = await api("GET", convPath("/messages"));
    const messages = items(body, "messages");
    const summary = body && !Array.isArray(body) ? (body.summary || (Array.isArray(body.summaries) ? body.summaries[body.summaries.length - 1] : null)) : null;
    feed.setMessages(messages, summary);
    memory.setSummary(summary);
    if (body && body.files) memory.setFiles(body.files);
    if (body && body.files && window.chatmem.images) window.chatmem.images.show(body.files); // PROJ-2
    return body;
  }

  function activeRunId(c, body) {
    const pick = (o) => o && (o.active_run_id || (o.active_run && (o.active_run.id || o.active_run.run_id)) || (o.run && o.run.status === "running" && (o.run.id || o.run.run_id)));
    return pick(c) || pick(body) || null;
  }

  async function openConversation(id) {
    hideError();
    let c;
    try { c = await api("GET", "/api/v1/conversations/" + encodeURIComponent(id)); }
    catch (err) {
      title.textContent = err.status === 404 ? t("Conversation not found") : t("Could not open the conversation");
      tools.hidden = true;
      return;
    }
    showConversation(c);
    restoreDraft();
    let body = null;
    try { body = await loadMessages(); } catch (err) { toast(err.message); }
    memory.setConversation(c.id);
    const runId = activeRunId(c, body) || await findRunningRun(c.id);
    if (runId) follow(runId);
  }

  async function findRunningRun(conversationId) {
    // Servers that do not put the active run on the conversation list runs per conversation.
    try {
      const body = await api("GET", "/api/v1/conversations/" + conversationId + "/runs?active=true");
      const run = items(body, "runs").find((r) => r.status === "running");
      return run ? (run.id || run.run_id) : null;
    } catch (_) { return null; }
  }

  async function ensureConversation(firstText) {
    if (state.conversation) return state.conversation;
    const body = { title: firstText.split("\n")[0].slice(0, 80), mode: chosenMode() };
    if (modelSelect.value) body.profile_id = modelSelect.value;
    const project = window.chatmem.projects && window.chatmem.projects.forNewChat();
    if (project) body.project_id = project; // PROJ-1: a new chat in a project
    const c = await api("POST", "/api/v1/conversations", body);
    history.replaceState(null, "", "/c/" + c.id);
    layout.dataset.conversationId = c.id;
    showConversation(c);
    memory.setConversation(c.id);
    sidebar.reload();
    return c;
  }

  /* ---------- sending and following a turn ---------- */
  /* Stop takes Send's place while a turn runs (and the focus, if Send had it). */
  function setRunning(running) {
    const had = document.activeElement;
    sendButton.hidden = running;
    stopButton.hidden = !running;
    draft.setAttribute("aria-busy", String(running));
    if (running && had === sendButton) stopButton.focus();
    else if (!running && had === stopButton) draft.focus();
  }

  function newKey() {
    return (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));
  }

  async function send() {
    await ready;
    const text = draft.value;
    if (!text.trim() || state.run) return;
    hideError();
    if (!modelSelect.value) { showError(t("Add a model profile to start chatting."), [[t("Add a model"), () => location.assign("/profiles")]]); return; }
    sendButton.disabled = true;
    try {
      if (!state.conversation) {
        await ensureConversation(text);
        saveDraft(); // kept under the new chat from now on
        forgetDraft("new");
      }
      const fileIds = state.pendingFiles.map((f) => f.id);
      const started = await api("POST", convPath("/turns"), { content: text, file_ids: fileIds }, { headers: { "Idempotency-Key": newKey() } });
      forgetDraft(draftKey()); // accepted (202): only now is the draft let go
      forgetDraft("new");
      draft.value = "";
      state.pendingFiles = [];
      renderAttachments();
      memory.setDraft("");
      feed.appendLocal("user", text);
      follow(started.run_id || started.id);
    } catch (err) {
      handleTurnError(err);
    } finally {
      sendButton.disabled = false;
    }
  }

  /* APPS-3: an app's ui/message — the user's next message, as a normal turn that says it
     came from the app (`app_tool_call_id`).  Refused while a turn runs. */
  async function sendFromApp(text, fromApp) {
    await ready;
    if (!state.conversation || state.run) throw new Error(t("A turn is already running in this chat."));
    hideError();
    try {
      const started = await api("POST", convPath("/turns"), { content: text, app_tool_call_id: fromApp.tool_call_id }, { headers: { "Idempotency-Key": newKey() } });
      feed.appendLocal("user", text, { from_app: fromApp });
      follow(started.run_id || started.id);
    } catch (err) {
      handleTurnError(err);
      throw err;
    }
  }

  function follow(runId) {
    state.run = runId;
    setRunning(true);
    // The answer's bubble shows the typing dots ("Answering…") until its first token, also
    // for a turn found running when the conversation is opened again.
    const live = feed.startStream();
    state.follower = stream.followRun(runId, {
      delta(data) { live.appendText(stream.deltaText(data)); },
      // A reasoning model's thinking, shown as it comes, folded away once the answer ends.
      reasoning(data) { live.appendReasoning(stream.deltaText(data)); },
      tool_call(data) { live.addToolCall(data.tool_call || data); },
      // PROV-6: an "ask first" call waits for Approve or Refuse (then the decision shows).
      approval(data) { live.addApproval(data, runId); },
      tool_result(data) {
        live.addToolResult(data);
        if (window.chatmem.apps && data.tool_call_id) window.chatmem.apps.settle(data.tool_call_id); // APPS-1
      },
      // CTX-10, CTX-21: progress while the memory folds, then the marker; the stored summary
      // replaces it when the run ends (finishRun reloads the messages).
      compaction(data) { feed.showCompaction(data); },
      done(data) { live.finish(); finishRun(data); },
      error(data) { live.finish(); finishRun(data); showRunError(data); },
    });
  }

  async function finishRun(data) {
    state.run = null; state.follower = null;
    setRunning(false);
    if (!state.conversation) return;
    try {
      const c = await api("GET", convPath());
      showConversation(c);
      await loadMessages();
    } catch (_) { /* keep what is on screen */ }
    if (window.chatmem.apps) window.chatmem.apps.settle(); // a stopped call's app hears it
    await memory.refresh();
    sidebar.reload();
    if (data && data.status === "stopped") toast(t("Stopped. What was completed is kept."));
  }

  stopButton.addEventListener("click", async () => {
    if (!state.run) return;
    stopButton.disabled = true;
    try { await api("POST", "/api/v1/runs/" + state.run + "/stop"); }
    catch (err) { toast(err.message); }
    finally { stopButton.disabled = false; }
  });

  /* ---------- errors with their ways out (CTX-19) ---------- */
  function hideError() { errorBox.hidden = true; errorActions.replaceChildren(); }

  function showError(message, actions) {
    errorText.textContent = message;
    errorActions.replaceChildren();
    for (const [label, fn] of actions || []) errorActions.append(el("button", { type: "button", text: label, onclick: fn }));
    errorBox.hidden = false;
  }

  function doesNotFit() {
    const p = currentProfile();
    if (p && p.stateless) {
      // CTX-7: nothing to compress for a model that does not remember.
      showError(t("The message does not fit in the model's memory. Remove files, shorten the message, or start a new chat."), [
        [t("Remove files"), () => memory.open("files")],
        [t("Start a new chat"), () => location.assign("/")],
      ]);
      return;
    }
    showError(t("The message does not fit in the model's memory. Compress the memory, remove files, or start a new chat."), [
      [t("Compress now"), () => memory.open("compress")],
      [t("Remove files"), () => memory.open("files")],
      [t("Start a new chat"), () => location.assign("/")],
    ]);
  }

  function providerTooLong() {
    showError(t("The request was too large for the model's context window. Switch to Economy memory, exclude question–answer pairs you do not need, or choose a model with a larger window."), [
      [t("Switch to Economy"), () => { memorySwitch.checked = true; modeSelect.value = "economy"; changeMode(); hideError(); }],
      [t("Exclude pairs"), () => { hideError(); toast(t("Use “Exclude from memory” on the questions you no longer need.")); }],
      [t("Choose another model"), () => { hideError(); modelSelect.focus(); }],
    ]);
  }

  function handleTurnError(err) {
    if (err.code === "does_not_fit") doesNotFit();
    else if (err.code === "context_length_exceeded") providerTooLong();
    else if (err.code === "turn_running") showError(t("A turn is already running in this chat."), []);
    else showError(err.message, []);
  }

  function showRunError(data) {
    const code = data && (data.code || (data.error && data.error.code));
    const message = (data && (data.message || (data.error && data.error.message))) || t("The model answered with an error.");
    if (code === "does_not_fit") doesNotFit();
    else if (code === "context_length_exceeded") providerTooLong();
    // PROJ-3: any other failure is shown in place under its question, with Retry
    // (recovery.js, from the stored run once the messages are read again).
    else if (!window.chatmem.recovery) showError(message, []);
  }

  /* PROJ-3: the draft is never lost — kept (per conversation, "new" before it exists) in
     localStorage from each keystroke until its turn is accepted, so a refused turn, a
     failed request or a reload gives it back. */
  function draftKey() {
    const id = state.conversation ? state.conversation.id : layout.dataset.conversationId;
    return "chatmem:draft:" + (id || "new");
  }
  function saveDraft() {
    try {
      if (draft.value) localStorage.setItem(draftKey(), draft.value);
      else localStorage.removeItem(draftKey());
    } catch (_) { /* storage refused (private mode, quota): the text stays on screen */ }
  }
  function forgetDraft(key) {
    try { localStorage.removeItem(key.startsWith("chatmem:") ? key : "chatmem:draft:" + key); } catch (_) { /* as above */ }
  }
  function restoreDraft() {
    try {
      const kept = localStorage.getItem(draftKey());
      if (kept && !draft.value) { draft.value = kept; memory.setDraft(kept); }
    } catch (_) { /* as above */ }
  }

  /* ---------- composer ---------- */
  draft.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  draft.addEventListener("input", () => { memory.setDraft(draft.value); saveDraft(); });
  composer.addEventListener("submit", (event) => { event.preventDefault(); send(); });

  function renderAttachments() {
    attachments.replaceChildren();
    for (const f of state.pendingFiles) {
      attachments.append(el("span", { class: "chip" }, [f.name + " · " + t("{tokens} tokens", { tokens: window.chatmem.fmtTokens(f.tokens ?? f.tokens_estimate ?? 0) })]));
    }
    attachments.hidden = state.pendingFiles.length === 0;
  }

  attachInput.addEventListener("change", async () => {
    const files = Array.from(attachInput.files || []);
    attachInput.value = "";
    if (!files.length) return;
    try {
      await ensureConversation(files[0].name);
      for (const file of files) {
        const form = new FormData();
        form.append("file", file, file.name);
        const stored = await api("POST", convPath("/files"), form);
        state.pendingFiles.push(Object.assign({ name: file.name }, stored || {}));
      }
      renderAttachments();
      await memory.loadFiles();
      memory.refresh();
    } catch (err) { handleTurnError(err); }
  });

  /* ---------- header actions ---------- */
  /* A destructive action asks first, in a modal dialog (Cancel has the focus): true when the
     user confirmed.  Escape, Cancel or closing it answers no. */
  function confirmed(dialog) {
    return new Promise((resolve) => {
      dialog.returnValue = "";
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
      dialog.showModal();
    });
  }
  document.getElementById("new-chat").addEventListener("click", () => location.assign("/"));
  document.getElementById("rename-chat").addEventListener("click", async () => {
    const name = prompt(t("Title"), state.conversation.title || "");
    if (name === null) return;
    try { showConversation(Object.assign(state.conversation, await api("PATCH", convPath(), { title: name.trim() }) || {}, { title: name.trim() })); sidebar.reload(); }
    catch (err) { toast(err.message); }
  });
  pinButton.addEventListener("click", async () => {
    const pinned = !state.conversation.pinned;
    try { showConversation(Object.assign(state.conversation, await api("PATCH", convPath(), { pinned }) || {}, { pinned })); sidebar.reload(); }
    catch (err) { toast(err.message); }
  });
  folderSelect.addEventListener("change", async () => {
    const folder_id = folderSelect.value || null;
    try { await api("PATCH", convPath(), { folder_id }); state.conversation.folder_id = folder_id; sidebar.reload(); }
    catch (err) { toast(err.message); }
  });
  function fillFolders(folders) {
    const keep = folderSelect.value;
    folderSelect.replaceChildren(el("option", { value: "", text: t("No folder") }));
    for (const f of folders) folderSelect.append(el("option", { value: f.id, text: f.name }));
    folderSelect.value = (state.conversation && (state.conversation.folder_id || "")) || keep;
  }
  document.addEventListener("chatmem:folders", (event) => fillFolders(event.detail));
  // The sidebar may have loaded the folders before this script ran.
  fillFolders(sidebar.folders());
  document.getElementById("archive-chat").addEventListener("click", async () => {
    await ready;  // let the page's own requests for this chat finish before it goes
    try { await api("POST", convPath("/archive")); location.assign("/"); }
    catch (err) { toast(err.message); }
  });
  document.getElementById("delete-chat").addEventListener("click", async () => {
    if (!(await confirmed(document.getElementById("confirm-delete")))) return;
    await ready;
    try { await api("DELETE", convPath()); location.assign("/"); }
    catch (err) { toast(err.message); }
  });

  document.addEventListener("chatmem:changed", () => memory.refresh());
  document.addEventListener("chatmem:model-shown", applyProfile); // usage.js showed the fallback
  document.addEventListener("chatmem:compacted", async () => { try { await loadMessages(); } catch (_) { /* shown on next open */ } });
  document.addEventListener("chatmem:summary", (event) => memory.setSummary(event.detail));

  /* Another conversation opened in place (e.g. "Continue in a new chat", CTX-23): the
     address, the feed, the counter and the sidebar follow, as when it is opened from the
     list. */
  async function openInPlace(id) {
    if (state.follower) state.follower.close();
    state.run = null; state.follower = null;
    setRunning(false);
    state.pendingFiles = [];
    renderAttachments();
    history.pushState(null, "", "/c/" + encodeURIComponent(id));
    layout.dataset.conversationId = id;
    feed.clear();
    await openConversation(id);
    sidebar.reload();
    draft.focus();
  }
  document.addEventListener("chatmem:open-conversation", (event) => { openInPlace(event.detail.id); });
  // Back and forward between conversations opened in place load the page of that address.
  window.addEventListener("popstate", () => {
    const open = state.conversation ? "/c/" + state.conversation.id : "/";
    if (location.pathname !== open) location.reload();
  });

  /* ---------- start ---------- */
  // send() waits for this: a message typed before the models and the conversation have
  // loaded (a slow network) is sent once they have, not refused for want of a model.
  ready = (async function start() {
    await loadProfiles();
    const id = layout.dataset.conversationId;
    if (id) await openConversation(id);
    else { memory.setConversation(""); applyProfile(); restoreDraft(); draft.focus(); }
  })().catch((err) => { toast(err.message); });

  window.chatmem.chat = { state, send, sendFromApp, follow, reload: loadMessages };
})();
