/* MCP Apps in the feed (APPS-1, APPS-2): a tool call whose tool has an app shows the app under
   the call.  The feed leaves a slot (slot()) and calls attach() once it has rendered; an app
   starts when its slot comes near the screen, from what chatmem stored (GET
   /api/v1/tool-calls/{id}/app: the HTML chatmem's server fetched, the arguments, the whole
   CallToolResult), so a reload shows it again without calling the tool.

   The app runs in two frames, neither with chatmem's origin: /apps/sandbox (its policy from
   the domains the resource declares, an opaque origin) relays to the app's own frame
   (apps_sandbox.js).  This page talks to it with the official bridge, AppBridge and
   PostMessageTransport of @modelcontextprotocol/ext-apps (static/vendor, loaded the first
   time an app shows, with its integrity); app_requests.js answers what the app asks.

   A misbehaving app costs the chat nothing: every message from its frame is counted before
   the bridge reads it (a burst of LIMITS.burst, then LIMITS.perSecond), a message larger than
   LIMITS.maxChars, too many that are not JSON-RPC, an uncaught error before it started, or
   no `ui/notifications/initialized` within LIMITS.startMs stop the app: its frame goes,
   and its place says why, with the text result the model saw and "Start the app again".
   At most LIMITS.live apps run at once; one scrolled away gives its place to a new one. */
(function () {
  "use strict";
  const { api, el, t } = window.chatmem;
  const layout = document.getElementById("layout");
  if (!layout) return;
  const LIMITS = { burst: 200, perSecond: 40, maxChars: 1000000, garbage: 20, startMs: 15000, live: 8, minHeight: 48 };
  const CANCELLED = new Set(["unknown", "not_run", "refused", "stopped", "cancelled"]);
  const FEATURES = { camera: "camera", microphone: "microphone", geolocation: "geolocation", clipboard_write: "clipboard-write" };
  const media = (query) => window.matchMedia(query);
  const dark = media("(prefers-color-scheme: dark)");
  const narrow = media("(max-width: 760px)");
  const views = new Map(); // tool_call_id → view
  let bridgeScript = null;

  /* The Live Workspace (workspace.js), when this server keeps one. */
  function workspace() {
    const ws = window.chatmem.workspace;
    return ws && ws.supported() ? ws : null;
  }

  function maxHeight() { return Math.round(Math.max(240, Math.min(900, window.innerHeight * 0.8))); }

  /* The bridge, once per page, checked against the integrity the page names. */
  function loadBridge() {
    if (window.McpAppBridge) return Promise.resolve(window.McpAppBridge);
    if (!bridgeScript) {
      bridgeScript = new Promise((resolve, reject) => {
        const script = el("script", { src: layout.dataset.appBridge, integrity: layout.dataset.appBridgeIntegrity });
        script.addEventListener("load", () => resolve(window.McpAppBridge));
        script.addEventListener("error", () => { bridgeScript = null; reject(new Error(t("The app bridge could not be loaded."))); });
        document.head.append(script);
      });
    }
    return bridgeScript;
  }

  function sandboxUrl(csp) {
    const query = new URLSearchParams();
    const kinds = { connect: "connect_domains", resource: "resource_domains", frame: "frame_domains", base: "base_uri_domains" };
    for (const [param, key] of Object.entries(kinds)) {
      for (const domain of (csp && csp[key]) || []) query.append(param, domain);
    }
    return "/apps/sandbox" + (query.toString() ? "?" + query : "");
  }

  /* Permissions the resource declared and the administrator allowed, both ways the
     protocol and the frame's `allow` attribute name them. */
  function permissionsOf(info) {
    const granted = Object.keys(FEATURES).filter((k) => info.permissions && info.permissions[k] === true);
    const protocol = {};
    for (const k of granted) protocol[k === "clipboard_write" ? "clipboardWrite" : k] = {};
    return { protocol, allow: granted.map((k) => FEATURES[k] + " *").join("; ") };
  }

  function cspOf(info) {
    const c = info.csp || {};
    return { connectDomains: c.connect_domains || [], resourceDomains: c.resource_domains || [], frameDomains: c.frame_domains || [], baseUriDomains: c.base_uri_domains || [] };
  }

  /* The call's result as the app expects it: the stored CallToolResult, else the text. */
  function resultOf(info) {
    if (info.result && typeof info.result === "object") return info.result;
    return { content: [{ type: "text", text: info.text || "" }], isError: info.status === "failed" };
  }

  /* A counter in front of the bridge: runs before PostMessageTransport's listener (it is
     added first) and stops what must not reach it. */
  function guard(view, frame) {
    let tokens = LIMITS.burst;
    let last = performance.now();
    let garbage = 0;
    const listener = (event) => {
      if (!frame.contentWindow || event.source !== frame.contentWindow) return;
      const now = performance.now();
      tokens = Math.min(LIMITS.burst, tokens + ((now - last) / 1000) * LIMITS.perSecond);
      last = now;
      const stop = (reason) => { event.stopImmediatePropagation(); if (reason) view.fail(reason); };
      if ((tokens -= 1) < 0) return stop(t("it sent too many messages"));
      const data = event.data;
      if (!data || typeof data !== "object" || data.jsonrpc !== "2.0") {
        return stop((garbage += 1) > LIMITS.garbage ? t("it sent messages that are not JSON-RPC") : "");
      }
      let size = Infinity;
      try { size = JSON.stringify(data).length; } catch (_) { /* not serialisable: too large */ }
      if (size > LIMITS.maxChars) return stop(t("it sent a message larger than 1 MB"));
      if (typeof data.method === "string" && data.method.startsWith("chatmem/")) {
        stop("");
        if (data.method === "chatmem/app-error") view.appError(String((data.params && data.params.message) || ""));
      }
    };
    window.addEventListener("message", listener);
    return {
      garbage() { if ((garbage += 1) > LIMITS.garbage) view.fail(t("it sent messages that are not JSON-RPC")); },
      stop() { window.removeEventListener("message", listener); },
    };
  }

  function createView(id) {
    const root = el("div", { class: "app-view", "data-tool-call-id": id, role: "group" });
    const bar = el("div", { class: "app-bar row" });
    const box = el("div", { class: "app-frame-box" });
    const asks = el("div", { class: "app-asks" });
    const note = el("p", { class: "app-note muted small", role: "status" });
    root.append(bar, box, asks, note);
    const view = {
      id, root, box, info: null, mode: "inline", bridge: null, frame: null, started: false, failed: false,
      shield: null, timer: 0, height: 150, resize: null, fallbackMode: "inline", messagesSent: 0,
    };

    view.start = async function start() {
      view.failed = false;
      box.replaceChildren(el("p", { class: "muted small app-loading", text: t("Loading the app…") }));
      note.textContent = "";
      try {
        view.info = await api("GET", "/api/v1/tool-calls/" + encodeURIComponent(id) + "/app");
      } catch (err) {
        return view.stored(null, err.message || t("The app could not be loaded."));
      }
      const info = view.info;
      root.setAttribute("aria-label", t("App: {tool}", { tool: info.tool || "" }));
      root.classList.toggle("app-border", info.prefers_border !== false);
      drawBar();
      if (!info.available || typeof info.html !== "string") return view.stored(info, info.note || t("The app is not available."));
      try { await mount(await loadBridge()); } catch (err) { view.fail(err.message || String(err)); }
    };

    async function mount(bridgeLib) {
      const info = view.info;
      const perms = permissionsOf(info);
      const frame = el("iframe", { class: "app-frame", title: t("App: {tool}", { tool: info.tool || "" }), src: sandboxUrl(info.csp), allow: perms.allow || null });
      frame.style.height = view.height + "px";
      box.replaceChildren(frame);
      view.frame = frame;
      view.shield = guard(view, frame);
      const bridge = new bridgeLib.AppBridge(null, { name: "chatmem", version: layout.dataset.version || "" }, {
        openLinks: {}, serverTools: {}, serverResources: {}, logging: {},
        message: { text: {} }, updateModelContext: { text: {}, structuredContent: {} },
        sandbox: { permissions: perms.protocol, csp: cspOf(info) },
      }, { hostContext: hostContext() });
      view.bridge = bridge;
      drawBar();
      bridge.onerror = () => { if (view.shield) view.shield.garbage(); };
      bridge.addEventListener("sandboxready", () => {
        bridge.sendSandboxResourceReady({ html: info.html, csp: cspOf(info), permissions: perms.protocol });
      });
      bridge.addEventListener("initialized", () => {
        view.started = true;
        clearTimeout(view.timer);
        bridge.sendToolInput({ arguments: info.input || {} });
        deliver();
      });
      bridge.addEventListener("sizechange", (size) => {
        if (view.mode !== "inline" || !size || typeof size.height !== "number" || !isFinite(size.height)) return;
        view.height = Math.max(LIMITS.minHeight, Math.min(maxHeight(), Math.ceil(size.height)));
        frame.style.height = view.height + "px";
      });
      bridge.addEventListener("loggingmessage", (log) => logToConsole(info, log));
      bridge.addEventListener("requestteardown", () => view.close(t("The app closed itself.")));
      window.chatmem.appRequests.answer(view, bridge);
      view.timer = setTimeout(() => { if (!view.started) view.fail(t("it did not start within {seconds} seconds", { seconds: LIMITS.startMs / 1000 })); }, LIMITS.startMs);
      view.resize = new ResizeObserver(window.chatmem.debounce(() => view.context(), 150));
      view.resize.observe(box);
      // An outer frame loaded again (moved without moveBefore) starts the app over.
      let loads = 0;
      frame.addEventListener("load", () => { loads += 1; if (loads > 1 && !view.failed) view.restart(); });
      await bridge.connect(new bridgeLib.PostMessageTransport(frame.contentWindow, frame.contentWindow));
    }

    /* The call's outcome, once the app has started: its result, or that it was stopped. */
    function deliver() {
      const info = view.info;
      if (!view.started || !view.bridge || view.delivered) return;
      if (CANCELLED.has(info.status)) {
        view.delivered = true;
        view.bridge.sendToolCancelled({ reason: info.status === "refused" ? "refused" : "stopped" });
      } else if (info.result || info.status === "completed" || info.status === "failed") {
        view.delivered = true;
        view.bridge.sendToolResult(resultOf(info));
      }
    }

    /* A live call got its result (or its run ended): read the stored outcome once more. */
    view.settle = async function settle() {
      if (!view.info || view.delivered) return;
      if (view.failed && box.querySelector(".tool-box")) return;
      try {
        const fresh = await api("GET", "/api/v1/tool-calls/" + encodeURIComponent(id) + "/app");
        Object.assign(view.info, { status: fresh.status, result: fresh.result, text: fresh.text });
        if (!view.failed) { deliver(); return; }
        // Stopped before the result came: the failure shows what the tool answered, now.
        const shown = storedText();
        const failure = box.querySelector(".app-failure");
        if (shown && failure && !box.querySelector(".tool-box")) failure.after(shown);
      } catch (_) { /* shown as it is; a reload reads it again */ }
    };

    function drawBar() {
      bar.replaceChildren(el("span", { class: "app-name small muted", text: t("App: {tool}", { tool: view.info.tool || "" }) }), el("span", { class: "spacer" }));
      const ws = workspace();
      if (view.mode === "inline" && ws) bar.append(el("button", { type: "button", class: "link-button", text: t("Open in workspace"), onclick: () => ws.open(id) }));
      if (view.mode !== "fullscreen" && view.bridge) bar.append(el("button", { type: "button", class: "link-button", text: t("Full screen"), onclick: () => view.setMode("fullscreen") }));
      if (view.mode === "fullscreen") bar.append(el("button", { type: "button", class: "link-button", text: t("Exit full screen"), onclick: () => view.setMode(view.fallbackMode) }));
    }

    /* inline | fullscreen | pip (the Live Workspace, workspace.js): the mode actually set.
       Leaving full screen goes back to where the app was (the feed or the workspace). */
    view.setMode = function setMode(mode) {
      const ws = workspace();
      if (mode === "fullscreen") {
        if (view.mode !== "fullscreen") { view.fallbackMode = view.mode; view.show("fullscreen"); }
        return "fullscreen";
      }
      if (mode === "pip") {
        if (!ws) return view.mode;
        ws.open(id);
        return "pip";
      }
      const from = view.mode === "fullscreen" ? view.fallbackMode : view.mode;
      if (from === "pip" && ws) ws.close();
      else view.show("inline");
      return "inline";
    };

    /* Shows the view in `mode`; its place in the page is the caller's (place()). */
    view.show = function show(mode) {
      view.mode = mode;
      root.classList.toggle("app-fullscreen", mode === "fullscreen");
      root.classList.toggle("app-in-workspace", mode === "pip");
      if (view.frame) view.frame.style.height = mode === "inline" ? view.height + "px" : "";
      if (view.info) drawBar();
      view.context();
    };

    view.context = function context() {
      if (view.bridge) view.bridge.setHostContext(hostContext());
    };

    function hostContext() {
      const width = Math.round(box.clientWidth || root.clientWidth || 600);
      const fixed = view.mode !== "inline";
      return {
        theme: window.chatmem.currentTheme ? window.chatmem.currentTheme() : dark.matches ? "dark" : "light",
        locale: document.documentElement.lang || "en",
        timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        displayMode: view.mode,
        availableDisplayModes: workspace() ? ["inline", "fullscreen", "pip"] : ["inline", "fullscreen"],
        containerDimensions: fixed ? { width, height: Math.round(box.clientHeight || window.innerHeight) } : { width, maxHeight: maxHeight() },
        platform: narrow.matches ? "mobile" : "web",
        userAgent: "chatmem/" + (layout.dataset.version || ""),
        deviceCapabilities: { touch: media("(pointer: coarse)").matches, hover: media("(hover: hover)").matches },
        toolInfo: view.info ? { tool: { name: view.info.tool || "", inputSchema: { type: "object" } } } : undefined,
      };
    }

    /* In-place question under the app (a tool to approve, a link to open): true for yes. */
    view.ask = function ask(question, detail, yes, no) {
      return new Promise((resolve) => {
        const answer = (value) => { prompt.remove(); resolve(value); };
        const ok = el("button", { type: "button", class: "primary", text: yes, onclick: () => answer(true) });
        const prompt = el("div", { class: "approval app-ask", role: "group", "aria-label": question }, [
          el("p", { text: question }),
          detail ? el("pre", { text: detail }) : null,
          el("div", { class: "approval-actions row" }, [ok, el("button", { type: "button", text: no, onclick: () => answer(false) })]),
        ]);
        asks.append(prompt);
        ok.focus({ preventScroll: true });
      });
    };

    view.note = function setNote(text) { note.textContent = text; };

    view.appError = function appError(message) {
      if (!view.started) view.fail(t("it failed while starting: {error}", { error: message }));
      else view.note(t("The app reported an error: {error}", { error: message }));
    };

    function stop() {
      clearTimeout(view.timer);
      if (view.resize) view.resize.disconnect();
      if (view.shield) view.shield.stop();
      const bridge = view.bridge;
      view.bridge = null; view.frame = null; view.shield = null; view.resize = null;
      view.started = false; view.delivered = false;
      for (const pending of asks.querySelectorAll(".app-ask")) pending.remove();
      if (bridge) {
        bridge.teardownResource({}, { timeout: 500 }).catch(() => {}).finally(() => bridge.close().catch(() => {}));
      }
    }

    /* The app stops, in its place: why, what the tool answered, a way to start it again. */
    view.fail = function fail(reason) {
      if (view.failed) return;
      view.failed = true;
      stop();
      box.replaceChildren(
        el("p", { class: "app-failure", role: "alert", text: t("The app stopped: {reason}.", { reason }) }),
        storedText(),
        el("button", { type: "button", text: t("Start the app again"), onclick: () => view.start() }),
      );
    };

    /* No app to run (its server is down, the HTML is too large …): the stored result. */
    view.stored = function stored(info, why) {
      stop();
      box.replaceChildren(el("p", { class: "app-unavailable muted small", text: why }), storedText());
    };

    view.close = function close(why) {
      stop();
      box.replaceChildren(el("p", { class: "muted small", text: why }), el("button", { type: "button", text: t("Start the app again"), onclick: () => view.start() }));
    };

    view.restart = function restart() { stop(); view.start(); };

    view.destroy = function destroy() { stop(); root.remove(); views.delete(id); };

    function storedText() {
      const text = view.info && view.info.text;
      return text ? el("details", { class: "tool-box" }, [el("summary", { text: t("Tool result") }), el("pre", { text })]) : null;
    }

    return view;
  }

  function logToConsole(info, log) {
    const level = (log && log.level) || "info";
    const write = ["warning", "error", "critical", "alert", "emergency"].includes(level) ? console.warn : console.info;
    write("[app " + (info.tool || "") + "]", log && log.data);
  }

  /* ---------- places in the page ---------- */

  /* Moves `view` into `container` keeping the app running where the browser can
     (Element.moveBefore); elsewhere the frame loads again and the app starts over. */
  function place(view, container, mode) {
    if (view.root.parentNode !== container) {
      if (container.moveBefore && container.isConnected && view.root.isConnected) container.moveBefore(view.root, null);
      else container.append(view.root);
    }
    if (mode && view.mode !== mode) view.show(mode);
  }

  function ensure(id) {
    let view = views.get(id);
    if (!view) {
      evictFor();
      view = createView(id);
      views.set(id, view);
      view.start();
    }
    return view;
  }

  /* Too many apps running: the oldest one whose slot is off screen gives way. */
  function evictFor() {
    if (views.size < LIMITS.live) return;
    for (const view of views.values()) {
      const slot = view.root.parentElement;
      if (view.mode === "inline" && slot && !visible.has(slot)) { view.destroy(); return; }
    }
  }

  const visible = new Set();
  const observer = typeof IntersectionObserver === "function" ? new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) { visible.add(entry.target); fill(entry.target); }
      else visible.delete(entry.target);
    }
  }, { root: document.getElementById("feed"), rootMargin: "600px 0px" }) : null;

  function fill(slot) {
    if (!slot.isConnected) return;
    const id = slot.dataset.toolCallId;
    const existing = views.get(id);
    if (existing && existing.mode === "pip") { slotPlaceholder(slot); return; }
    slot.replaceChildren(...Array.from(slot.childNodes).filter((n) => n === (existing && existing.root)));
    place(ensure(id), slot, existing && existing.mode === "fullscreen" ? "fullscreen" : "inline");
  }

  function slotPlaceholder(slot) {
    if (slot.querySelector(".app-elsewhere")) return;
    slot.replaceChildren(el("p", { class: "app-elsewhere muted small" }, [
      t("This app is open in the Live Workspace."), " ",
      el("button", { type: "button", class: "link-button", text: t("Show it here"), onclick: () => window.chatmem.workspace.close() }),
    ]));
  }

  /* Under a tool call: a slot for its app, or null (no app, or its server shows none). */
  function slot(call) {
    const id = call && call.tool_call_id;
    if (!id || !call.app || !call.app.resource_uri) return null;
    return el("div", { class: "app-slot", "data-tool-call-id": id });
  }

  /* After the feed rendered `roots` (a node or a list): running apps move into their new slots, the others
     start as they come near the screen; apps whose call is no longer shown stop. */
  function attach(roots) {
    const slots = [].concat(roots).flatMap((root) => (root.querySelectorAll ? Array.from(root.querySelectorAll(".app-slot")) : []));
    for (const s of slots) {
      const view = views.get(s.dataset.toolCallId);
      if (view && (view.root.isConnected || view.mode === "pip")) fill(s);
      else if (observer) observer.observe(s);
      else fill(s);
    }
  }

  function prune() {
    for (const view of Array.from(views.values())) if (!view.root.isConnected) view.destroy();
    for (const s of Array.from(visible)) if (!s.isConnected) { visible.delete(s); if (observer) observer.unobserve(s); }
  }

  /* A slot of the feed showing this call, if the feed shows it. */
  function slotOf(id) { return document.querySelector('.app-slot[data-tool-call-id="' + CSS.escape(id) + '"]'); }

  /* A live `tool_result` (or the run's end): apps still waiting read their outcome. */
  function settle(id) {
    for (const view of views.values()) if (!id || view.id === id) view.settle();
  }

  const changed = () => { for (const view of views.values()) view.context(); };
  dark.addEventListener("change", changed);
  document.addEventListener("chatmem:theme", changed); // the user chose a theme (theme.js)
  narrow.addEventListener("change", changed);

  window.chatmem.apps = { slot, attach, prune, settle, ensure, place, slotOf, slotPlaceholder, fill, views };
})();
