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

  function fraction(part) {
    if (!part) return 0;
    const included = Number(part.included || 0);
    return included > 0 ? Number(part.spent || 0) / included : 0;
  }

  /* The fallback model's name, from the profiles the selector lists. */
  function fallbackName(id) {
    const option = id ? Array.from(modelSelect.options).find((o) => o.value === id) : null;
    return option ? option.textContent.replace(/^🔒 /, "").split(" · ")[0] : "the base model";
  }

  function apply() {
    if (!usage) return;
    const session = usage.session;
    const week = usage.week;
    const limited = !!(session && session.included) || !!(week && week.included);
    ring.hidden = !limited;
    const share = Math.min(1, typeof usage.ring === "number" ? usage.ring : Math.max(fraction(session), fraction(week)));
    fill.setAttribute("stroke-dasharray", Math.round(share * 100) + " 100");
    const exhausted = !!usage.exhausted;
    ring.classList.toggle("exhausted", exhausted);
    ring.setAttribute("aria-label", "Usage " + Math.round(share * 100) + "%");
    ring.title = "Usage " + Math.round(share * 100) + "% of the included amount";
    const fid = usage.fallback_profile_id || null;
    const name = fallbackName(fid);
    for (const option of modelSelect.options) {
      const locked = exhausted && !!option.value && option.value !== fid;
      option.disabled = locked;
      option.textContent = option.textContent.replace(/^🔒 /, "");
      if (locked) option.textContent = "🔒 " + option.textContent;
    }
    modelNote.hidden = !exhausted;
    modelNote.textContent = exhausted ? "Credits exhausted: you can only use " + name : "";
    if (exhausted && fid && modelSelect.value !== fid && Array.from(modelSelect.options).some((o) => o.value === fid)) {
      modelSelect.value = fid;
      modelSelect.dispatchEvent(new Event("change"));
    }
    // Where extension requests are disabled there is no warning, only the locks (USE-3).
    warning.hidden = !(exhausted && usage.extension_requests !== false);
    warningText.textContent = usage.exhausted_by === "session"
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
      toast(body && body.already_notified ? "Administrators were already notified" : "The administrators were notified");
    } catch (err) {
      toast(err.status === 409 || err.status === 429 ? "Administrators were already notified" : err.message);
    } finally { requestButton.disabled = false; }
  });
  ring.addEventListener("click", () => { if (window.chatmem.memory) window.chatmem.memory.open(); });
  document.addEventListener("chatmem:profiles", apply);
  window.chatmem.usage = { reload: load };
  load();
})();
