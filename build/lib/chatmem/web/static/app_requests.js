/* What an MCP App may ask, answered through chatmem's server (APPS-3).  The browser never
   talks to an MCP server: each request goes to an endpoint of the tool call the app belongs
   to, which holds the app to its own server and the model's rules.

   - tools/call → POST /api/v1/tool-calls/{id}/app/tools-call: the allow-list and the audit
     apply there; a tool that asks first (409 approval_required) is asked here, under the
     app, and sent again approved; a refused one answers the app an error result;
   - resources/read → …/app/resources-read;
   - ui/message → a turn of this conversation with the text (app_tool_call_id), shown as
     coming from the app; not while a turn runs; from an app's third message on, the user
     is asked each time (an app cannot keep a conversation going by itself);
   - ui/update-model-context → PUT …/app-context (the latest update wins; sent at most once
     per CONTEXT_MS, the counter refreshed after);
   - ui/open-link → asked under the app, then a new tab with noopener: the chat page is never
     navigated; http(s) and mailto only;
   - ui/request-display-mode → inline, fullscreen or pip (the Live Workspace);
   - notifications/message → the browser console (apps.js).
   Each app has at most MAX_PENDING requests in flight and one question open at a time;
   more are refused with an error the app receives. */
(function () {
  "use strict";
  const { api, t } = window.chatmem;
  const MAX_PENDING = 8;
  const CONTEXT_MS = 400;
  const FREE_MESSAGES = 2;

  function callPath(view, suffix) {
    return "/api/v1/tool-calls/" + encodeURIComponent(view.id) + "/app/" + suffix;
  }

  function conversationPath(view, suffix) {
    return "/api/v1/conversations/" + encodeURIComponent(view.info.conversation_id) + suffix;
  }

  /* Wraps a handler: bounded in flight, errors from chatmem's server as the app's errors. */
  function bounded(view, handler) {
    return async (params) => {
      if ((view.pending || 0) >= MAX_PENDING) throw new Error(t("Too many requests from this app at once."));
      view.pending = (view.pending || 0) + 1;
      try { return await handler(params || {}); }
      finally { view.pending -= 1; }
    };
  }

  async function question(view, ...args) {
    if (view.asking) throw new Error(t("The app is already waiting for an answer."));
    view.asking = true;
    try { return await view.ask(...args); } finally { view.asking = false; }
  }

  function argumentsText(value) {
    try { return JSON.stringify(value || {}, null, 2); } catch (_) { return ""; }
  }

  async function callTool(view, params) {
    const body = { name: String(params.name || ""), arguments: params.arguments || {}, approved: false };
    try {
      return await api("POST", callPath(view, "tools-call"), body);
    } catch (err) {
      if (err.status !== 409 || err.code !== "approval_required") throw err;
      const yes = await question(view,
        t("The app asks to run the tool {tool} on {server}.", { tool: body.name, server: view.info.server_name || "" }),
        argumentsText(body.arguments), t("Approve"), t("Refuse"));
      if (!yes) return { content: [{ type: "text", text: t("Not run: the user refused this tool call.") }], isError: true };
      return await api("POST", callPath(view, "tools-call"), Object.assign(body, { approved: true }));
    }
  }

  function textOf(content) {
    return (Array.isArray(content) ? content : [])
      .filter((block) => block && block.type === "text" && typeof block.text === "string")
      .map((block) => block.text).join("\n\n").trim();
  }

  /* ui/message: the user's next message, as a normal turn. */
  async function message(view, params) {
    const chat = window.chatmem.chat;
    const text = textOf(params.content);
    if (!text || !chat || chat.state.run) return { isError: true };
    view.messagesSent = (view.messagesSent || 0) + 1;
    if (view.messagesSent > FREE_MESSAGES) {
      const yes = await question(view, t("The app wants to send this message for you:"), text, t("Send"), t("Don't send"));
      if (!yes || chat.state.run) return { isError: true };
    }
    try {
      await chat.sendFromApp(text, { tool_call_id: view.id, tool: view.info.tool });
      return {};
    } catch (err) {
      view.note(err.message);
      return { isError: true };
    }
  }

  /* ui/update-model-context: only the latest update is sent; each request is answered once
     the update that replaced it (or itself) is stored. */
  function modelContext(view) {
    let latest = null;
    let waiting = [];
    let timer = 0;
    const flush = async () => {
      timer = 0;
      const body = latest;
      const answer = waiting;
      latest = null; waiting = [];
      try {
        await api("PUT", conversationPath(view, "/app-context"), body);
        answer.forEach((w) => w.resolve({}));
        document.dispatchEvent(new CustomEvent("chatmem:changed"));
      } catch (err) { answer.forEach((w) => w.reject(err)); }
    };
    return (params) => new Promise((resolve, reject) => {
      latest = { tool_call_id: view.id, content: Array.isArray(params.content) ? params.content : [], structuredContent: params.structuredContent ?? null };
      waiting.push({ resolve, reject });
      if (!timer) timer = setTimeout(flush, CONTEXT_MS);
    });
  }

  /* ui/open-link: asked first; a new tab that cannot reach back (noopener). */
  async function openLink(view, params) {
    let url;
    try { url = new URL(String(params.url || "")); } catch (_) { throw new Error(t("The app asked to open something that is not a link.")); }
    if (!["http:", "https:", "mailto:"].includes(url.protocol)) throw new Error(t("The app asked to open something that is not a link."));
    const yes = await question(view, t("The app wants to open a link:"), url.href, t("Open link"), t("Cancel"));
    if (!yes) return { isError: true };
    window.open(url.href, "_blank", "noopener,noreferrer");
    return {};
  }

  /* The handlers of one app's bridge. */
  function answer(view, bridge) {
    bridge.oncalltool = bounded(view, (params) => callTool(view, params));
    bridge.onreadresource = bounded(view, (params) => api("POST", callPath(view, "resources-read"), { uri: String(params.uri || "") }));
    bridge.onmessage = bounded(view, (params) => message(view, params));
    bridge.onupdatemodelcontext = bounded(view, modelContext(view));
    bridge.onopenlink = bounded(view, (params) => openLink(view, params));
    bridge.onrequestdisplaymode = async (params) => ({ mode: view.setMode(params && params.mode) });
  }

  window.chatmem.appRequests = { answer };
})();
