/* Tool servers (MCP), for administrators on the Models page (PROV-3, PROV-6): each server's
   health — state, the last error and when, the last success, the tools it lists — and its
   tool policy: which tools are offered (all when every box is ticked: allowed_tools null)
   and which ones the user approves first; which tools have an MCP App, whether the chat shows
   them, the server's Live Workspace tool and the permissions its apps may get (issue 28). */
(function () {
  "use strict";
  const { api, items, el, toast, t, tn, locale } = window.chatmem;
  const list = document.getElementById("mcp-list");
  const empty = document.getElementById("mcp-empty");
  if (!list) return;

  const STATES = { ready: t("Ready"), connecting: t("Connecting…"), failed: t("Failed"), disabled: t("Disabled"), not_connected: t("Not connected") };

  function when(iso) {
    if (!iso) return t("never");
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString(locale);
  }

  function healthLine(h) {
    const parts = [];
    if (h.state === "ready") parts.push(tn("{n} tool", "{n} tools", h.tool_count ?? 0));
    parts.push(t("last success: {time}", { time: when(h.last_success_at) }));
    return parts.join(" · ");
  }

  const PERMISSIONS = { camera: t("Camera"), microphone: t("Microphone"), geolocation: t("Location"), clipboard_write: t("Clipboard (write)") };

  /* APPS-1: what a tool's app is, in the table: none, an app, or an app-only tool (called by
     its app, never offered to the model). */
  function appCell(tool) {
    const app = tool && tool.app;
    if (!app) return el("td", { class: "muted small", text: "—" });
    const appOnly = Array.isArray(app.visibility) && app.visibility.length === 1 && app.visibility[0] === "app";
    return el("td", { title: app.resource_uri }, [el("span", { class: "badge app-badge", text: appOnly ? t("App only") : t("App") })]);
  }

  /* The policy editor: one row per tool the server lists — its app, "Offered", "Ask
     first" — then the server's apps: shown in the chat or not, the Live Workspace tool, and
     the browser permissions its apps may be given when they ask (APPS-2, APPS-4). */
  function policyEditor(s) {
    const listed = new Map((s.tools || []).map((tool) => [tool.name, tool]));
    const names = [...new Set([...listed.keys(), ...(s.health.tools || []), ...(s.allowed_tools || []), ...(s.ask_first_tools || [])])].sort();
    if (!names.length) return el("p", { class: "muted small", text: t("The server lists no tools yet.") });
    const allowed = s.allowed_tools === null || s.allowed_tools === undefined ? null : new Set(s.allowed_tools);
    const ask = new Set(s.ask_first_tools || []);
    const rows = names.map((name) => {
      const offered = el("input", { type: "checkbox", "aria-label": t("Offer {tool}", { tool: name }) });
      offered.checked = allowed === null || allowed.has(name);
      const asks = el("input", { type: "checkbox", "aria-label": t("Ask first before {tool}", { tool: name }) });
      asks.checked = ask.has(name);
      return { name, offered, asks, row: el("tr", {}, [el("td", { text: name }), appCell(listed.get(name)), el("td", {}, [offered]), el("td", {}, [asks])]) };
    });
    const withApp = names.filter((name) => listed.get(name) && listed.get(name).app);
    const apps = appsEditor(s, withApp);
    const save = el("button", { type: "button", class: "primary", text: t("Save tools") });
    const status = el("span", { class: "small muted", role: "status" });
    save.addEventListener("click", async () => {
      const offered = rows.filter((r) => r.offered.checked).map((r) => r.name);
      const body = Object.assign({
        allowed_tools: offered.length === rows.length ? null : offered,
        ask_first_tools: rows.filter((r) => r.asks.checked).map((r) => r.name),
      }, apps ? apps.values() : {});
      save.disabled = true;
      try { await api("PATCH", "/api/v1/mcp-servers/" + s.id, body); status.textContent = t("Saved"); }
      catch (err) { status.textContent = ""; toast(err.message); }
      finally { save.disabled = false; }
    });
    return el("div", { class: "mcp-policy" }, [
      el("table", { class: "mcp-tools" }, [
        el("thead", {}, [el("tr", {}, [el("th", { text: t("Tool") }), el("th", { text: t("App") }), el("th", { text: t("Offered") }), el("th", { text: t("Ask first") })])]),
        el("tbody", {}, rows.map((r) => r.row)),
      ]),
      apps ? apps.node : null,
      el("div", { class: "row" }, [save, status]),
    ]);
  }

  /* The server's apps, when it has tools with one: null otherwise. */
  function appsEditor(s, withApp) {
    if (!withApp.length) return null;
    const show = el("input", { type: "checkbox", id: "show-apps-" + s.id });
    show.checked = s.show_apps !== false;
    const select = el("select", { id: "workspace-tool-" + s.id }, [el("option", { value: "", text: t("None") }), ...withApp.map((name) => el("option", { value: name, text: name }))]);
    select.value = withApp.includes(s.workspace_tool) ? s.workspace_tool : "";
    const granted = new Set(s.app_permissions || []);
    const boxes = Object.entries(PERMISSIONS).map(([key, label]) => {
      const box = el("input", { type: "checkbox", value: key });
      box.checked = granted.has(key);
      return { key, box, node: el("label", { class: "check" }, [box, label]) };
    });
    const node = el("div", { class: "mcp-apps" }, [
      el("label", { class: "check" }, [show, t("Show apps in the chat")]),
      el("label", { class: "row", for: select.id }, [t("Live Workspace tool"), select]),
      el("fieldset", { class: "row" }, [el("legend", { text: t("Browser permissions its apps may be given") }), ...boxes.map((b) => b.node)]),
    ]);
    return {
      node,
      values: () => ({
        show_apps: show.checked,
        workspace_tool: select.value || null,
        app_permissions: boxes.filter((b) => b.box.checked).map((b) => b.key),
      }),
    };
  }

  function render(servers) {
    list.replaceChildren();
    for (const s of servers) {
      const h = s.health || {};
      const details = el("details", { class: "mcp-tools-box" }, [el("summary", { text: t("Tools") }), policyEditor(s)]);
      list.append(el("li", { "data-id": s.id, class: "mcp-server state-" + h.state }, [
        el("div", { class: "mcp-head" }, [
          el("span", { class: "profile-name", text: s.name }),
          el("span", { class: "badge mcp-state", text: STATES[h.state] || h.state }),
          el("span", { class: "muted small", text: s.url }),
        ]),
        el("p", { class: "small mcp-health", text: healthLine(h) }),
        h.last_error ? el("p", { class: "small mcp-error", text: t("Last error ({time}): {error}", { time: when(h.last_error_at), error: h.last_error }) }) : null,
        details,
      ]));
    }
    empty.hidden = servers.length > 0;
  }

  async function load() {
    try { render(items(await api("GET", "/api/v1/mcp-servers"), "items")); }
    catch (err) { toast(err.message); }
  }

  document.getElementById("mcp-refresh").addEventListener("click", load);
  load();
})();
