/* Usage and limits (USE-2, USE-3): the ring next to the model selector fills to the higher of
   the session and weekly use and turns red when the included usage is used up; then the
   selector names the fallback model and locks the others, and a warning above the input names
   the cause with "Request extension" (unless extension requests are disabled). */
(function () {
  "use strict";
  const { api, toast } = window.chatmem;
  const ring = document.getElementById("usage-ring");
  const fill = ring.querySelector(".ring-fill");
  const warning = document.getElementById("credit-warning");
  const warningText = document.getElementById("credit-warning-text");
  const requestButton = document.getElementById("request-extension");
  const modelSelect = document.getElementById("model-select");
  const modelNote = document.getElementById("model-note");
  let usage = null;

  function fraction(window_) {
    if (!window_) return 0;
    if (typeof window_.fraction === "number") return window_.fraction;
    const included = Number(window_.included ?? window_.limit ?? 0);
    return included > 0 ? Number(window_.used || 0) / included : 0;
  }

  function fallbackName(u) {
    const f = u.fallback || u.fallback_profile || u.fallback_model;
    return typeof f === "string" ? f : f && (f.name || f.model) || "";
  }

  function fallbackId(u) {
    const f = u.fallback_profile_id ?? (u.fallback_profile && u.fallback_profile.id) ?? (u.fallback && u.fallback.id);
    return f || null;
  }

  function apply() {
    if (!usage) return;
    const session = usage.session || usage.session_window;
    const week = usage.week || usage.weekly;
    const limited = !!(session && (session.included ?? session.limit)) || !!(week && (week.included ?? week.limit));
    ring.hidden = !limited;
    const share = Math.min(1, Math.max(fraction(session), fraction(week)));
    fill.setAttribute("stroke-dasharray", Math.round(share * 100) + " 100");
    const exhausted = !!usage.exhausted || share >= 1;
    ring.classList.toggle("exhausted", exhausted);
    ring.setAttribute("aria-label", "Usage " + Math.round(share * 100) + "%");
    const name = fallbackName(usage);
    const fid = fallbackId(usage);
    for (const option of modelSelect.options) {
      const locked = exhausted && option.value && (fid ? option.value !== fid : !option.text.startsWith(name));
      option.disabled = !!locked;
      option.textContent = option.textContent.replace(/^🔒 /, "");
      if (locked) option.textContent = "🔒 " + option.textContent;
    }
    modelNote.hidden = !exhausted;
    modelNote.textContent = exhausted ? "Credits exhausted: you can only use " + name : "";
    if (exhausted && fid && modelSelect.value !== fid) {
      modelSelect.value = fid;
      modelSelect.dispatchEvent(new Event("change"));
    }
    const cause = usage.cause || (fraction(session) >= 1 ? "session" : "week");
    const extensions = usage.extension_requests !== false && usage.extension_requests_enabled !== false;
    warning.hidden = !(exhausted && extensions);
    warningText.textContent = cause === "session"
      ? "You have used the included usage for this session window."
      : "You have used this week's included usage.";
  }

  async function load() {
    try { usage = await api("GET", "/api/v1/usage"); }
    catch (_) { usage = null; ring.hidden = true; return; } // no limits on this server
    apply();
  }

  requestButton.addEventListener("click", async () => {
    requestButton.disabled = true;
    try {
      const body = await api("POST", "/api/v1/usage/extension-requests");
      const again = body && (body.already_notified || body.status === "already_notified");
      toast(again ? "Administrators were already notified" : "Request sent to the administrators");
    } catch (err) {
      toast(err.status === 409 || err.status === 429 ? "Administrators were already notified" : err.message);
    } finally { requestButton.disabled = false; }
  });
  ring.addEventListener("click", () => { if (window.chatmem.memory) window.chatmem.memory.open(); });
  document.addEventListener("chatmem:profiles", apply);
  window.chatmem.usage = { reload: load };
  load();
})();
