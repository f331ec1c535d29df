/* The sandbox proxy of MCP Apps (APPS-2): the script of /apps/sandbox, the outer frame the chat
   page puts under a tool call.  This document runs in an opaque origin (its policy says
   `sandbox allow-scripts`), so it has no cookies, no storage and no way into the chat page;
   it renders the app's HTML in an inner frame (`srcdoc`, sandboxed again: a second opaque
   origin, under this page's policy) and relays JSON-RPC between the two, as MCP Apps'
   sandbox-proxy pattern has it:

     chat page (AppBridge) ⇄ this frame ⇄ the app

   It says `ui/notifications/sandbox-proxy-ready` to the chat page once it runs; the chat page
   answers `ui/notifications/sandbox-resource-ready` with the HTML (and the permissions the
   administrator allowed), which is rendered once; every other message is passed on as it
   is.  Only the chat page (its window, chatmem's origin) is listened to from above, only the
   inner frame from below; this frame makes no decision about what the app may do: the chat
   page bounds and answers everything.  Before the app's own script, a few lines report the
   app's uncaught errors (`chatmem/app-error`), so a broken app shows why it failed. */
(function () {
  "use strict";
  if (window.parent === window) return; // opened on its own: nothing to relay
  // This document's origin is opaque; its URL's origin is chatmem's, the chat page's.
  const HOST = location.origin;
  const READY = "ui/notifications/sandbox-proxy-ready";
  const RESOURCE = "ui/notifications/sandbox-resource-ready";
  // Permission Policy features by the names MCP Apps gives them.
  const FEATURES = { camera: "camera", microphone: "microphone", geolocation: "geolocation", clipboardWrite: "clipboard-write" };
  let inner = null;

  const REPORTER = "<script>(function(){var n=0;function r(m){if(n++<5)parent.postMessage(" +
    "{jsonrpc:'2.0',method:'chatmem/app-error',params:{message:String(m).slice(0,500)}},'*');}" +
    "addEventListener('error',function(e){r(e.message||'error');});" +
    "addEventListener('unhandledrejection',function(e){var x=e.reason;r(x&&x.message||x);});})();<\/script>";

  /* The reporter goes first in <head> (else after <html>, else first): before the app's own
     scripts, without pushing the document into quirks mode ahead of its doctype. */
  function withReporter(html) {
    const at = /<head\b[^>]*>/i.exec(html) || /<html\b[^>]*>/i.exec(html) || /<!doctype[^>]*>/i.exec(html);
    if (!at) return REPORTER + html;
    const end = at.index + at[0].length;
    return html.slice(0, end) + REPORTER + html.slice(end);
  }

  function allowOf(permissions) {
    return Object.keys(FEATURES).filter((k) => permissions && permissions[k]).map((k) => FEATURES[k] + " *").join("; ");
  }

  function render(params) {
    if (inner || typeof params.html !== "string") return;
    document.documentElement.style.height = document.body.style.height = "100%";
    document.body.style.margin = "0";
    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", "allow-scripts");
    const allow = allowOf(params.permissions);
    if (allow) inner.setAttribute("allow", allow);
    inner.setAttribute("title", document.title);
    Object.assign(inner.style, { display: "block", width: "100%", height: "100%", border: "0" });
    inner.srcdoc = withReporter(params.html);
    document.body.append(inner);
  }

  window.addEventListener("message", (event) => {
    if (event.source === window.parent) {
      if (event.origin !== HOST) return;
      const message = event.data;
      if (message && message.method === RESOURCE) render(message.params || {});
      else if (inner && inner.contentWindow) inner.contentWindow.postMessage(message, "*");
    } else if (inner && event.source === inner.contentWindow) {
      window.parent.postMessage(event.data, HOST);
    }
  });

  window.parent.postMessage({ jsonrpc: "2.0", method: READY, params: {} }, HOST);
})();
