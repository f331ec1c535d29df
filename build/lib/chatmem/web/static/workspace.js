/* The Live Workspace (APPS-4): a panel beside the chat that keeps one app open while the
   conversation goes on.  Which call's app it shows is the conversation's (`workspace` in its
   JSON; PUT/DELETE …/workspace), so it is there again after a turn, a reload or on another
   device.  An app goes there from its "Open in workspace" or by asking for the display mode
   `pip`; "Show it here" or the panel's Close bring it back under its call.  The app keeps
   running as it moves (apps.js place()).

   An administrator may name one tool of a server as its workspace: GET /api/v1/apps/
   workspaces lists the ones this user may open, and the conversation menu offers "Open Live
   Workspace" for each; it calls that tool (POST …/workspace/open, no model turn) and shows its
   app here.  On a phone the panel is a full-screen sheet (app.css). */
(function () {
  "use strict";
  const { api, el, items, t, toast } = window.chatmem;
  const apps = window.chatmem.apps;
  const panel = document.getElementById("workspace");
  const layout = document.getElementById("layout");
  if (!panel || !apps) return;
  const body = document.getElementById("workspace-body");
  const offersBox = document.getElementById("workspace-offers");
  let conversationId = "";
  let current = null;
  let offers = null;
  let supported = false; // the server keeps a workspace with its conversations

  const path = (suffix) => "/api/v1/conversations/" + encodeURIComponent(conversationId) + suffix;

  /* The app of call `id` back under its call, or stopped when the feed does not show it. */
  function leave(id) {
    const view = id && apps.views.get(id);
    if (!view) return;
    const slot = apps.slotOf(id);
    if (slot) { slot.replaceChildren(); apps.place(view, slot, "inline"); }
    else view.destroy();
  }

  /* Shows call `id`'s app in the panel (null: closes it); no request of its own. */
  function show(id) {
    if (current === id) return;
    const previous = current;
    current = id || null;
    if (!current) {
      panel.hidden = true;
      layout.classList.remove("with-workspace");
      leave(previous);
      return;
    }
    panel.hidden = false;
    layout.classList.add("with-workspace");
    apps.place(apps.ensure(current), body, "pip");
    const slot = apps.slotOf(current);
    if (slot) apps.slotPlaceholder(slot);
    leave(previous);
  }

  async function open(id) {
    if (!conversationId || !supported) return;
    if (current === id) { apps.place(apps.ensure(id), body, "pip"); return; }
    try {
      await api("PUT", path("/workspace"), { tool_call_id: id });
      show(id);
    } catch (err) { toast(err.message); }
  }

  async function close() {
    if (!current) return;
    show(null);
    try { await api("DELETE", path("/workspace")); } catch (err) { toast(err.message); }
  }

  /* "Open Live Workspace": the administrator's workspace tool of a server, called now. */
  async function openServer(offer, button) {
    button.disabled = true;
    try {
      let opened;
      try {
        opened = await api("POST", path("/workspace/open"), { server_id: offer.server_id });
      } catch (err) {
        // A workspace tool that asks first: asked here, then sent again approved.
        if (err.code !== "approval_required" || !confirm(t("Run the tool {tool} on {server}?", { tool: offer.tool, server: offer.server_name }))) throw err;
        opened = await api("POST", path("/workspace/open"), { server_id: offer.server_id, approved: true });
      }
      if (window.chatmem.chat) await window.chatmem.chat.reload();
      show(opened.tool_call_id);
    } catch (err) { toast(err.message); }
    finally { button.disabled = false; }
  }

  async function loadOffers() {
    if (!offersBox) return;
    if (offers === null) {
      try { offers = items(await api("GET", "/api/v1/apps/workspaces")); } catch (_) { offers = []; }
    }
    offersBox.replaceChildren(...offers.map((offer) => {
      const label = offers.length > 1 ? t("Open Live Workspace: {server}", { server: offer.server_name }) : t("Open Live Workspace");
      const button = el("button", { type: "button", class: "link-button", text: label });
      button.addEventListener("click", () => openServer(offer, button));
      return button;
    }));
  }

  document.getElementById("workspace-close").addEventListener("click", close);
  document.addEventListener("chatmem:conversation", (event) => {
    const c = event.detail || {};
    // A server without the Live Workspace sends no `workspace` with its conversations.
    supported = Object.prototype.hasOwnProperty.call(c, "workspace");
    if (c.id !== conversationId) { conversationId = c.id || ""; show(null); }
    show(c.workspace && c.workspace.tool_call_id ? c.workspace.tool_call_id : null);
    if (supported) loadOffers();
  });

  window.chatmem.workspace = { open, close, current: () => current, supported: () => supported };
})();
