/* Usage and limits (USE-2, USE-3): the ring next to the model selector fills to the higher of
   the session and weekly use and turns red when the included usage is used up; then the
   selector names the fallback model and locks the others, and a warning above the input names
   the cause with "Request extension" (unless extension requests are disabled).  The note
   "Credits exhausted: you can only use …" links to the usage page (seed 004).  The selector
   shows the model that actually answers — the fallback, even in a chat whose own model is
   locked (the server answers with the fallback, USE-4) — and each locked model says why and
   when it unlocks. */
(function () {
  "use strict";
  const { api, toast } = window.chatmem;
  const t = window.chatmem.t || ((msgid, vars) => msgid.replace(/\{(\w+)\}/g, (w, k) => (vars && k in vars ? vars[k] : w)));
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
    return option ? option.textContent.replace(/^🔒 /, "").split(" · ")[0] : t("the base model");
  }

  /* When the exhausted window starts over, in the reader's words ("Mon 14:00"). */
  function resetsAt() {
    const part = usage.exhausted_by === "week" ? usage.week : usage.session;
    const when = part && part.resets_at ? new Date(part.resets_at) : null;
    if (!when || isNaN(when)) return "";
    return when.toLocaleString(window.chatmem.locale || [], { weekday: "short", hour: "2-digit", minute: "2-digit" });
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
    ring.setAttribute("aria-label", t("Usage {percent}%", { percent: Math.round(share * 100) }));
    ring.title = t("Usage {percent}% of the included amount", { percent: Math.round(share * 100) });
    const fid = usage.fallback_profile_id || null;
    const name = fallbackName(fid);
    const when = exhausted ? resetsAt() : "";
    const why = when ? t("Credits exhausted — resets {time}", { time: when }) : t("Credits exhausted");
    for (const option of modelSelect.options) {
      // Every model but the fallback is locked, "Auto" too (seed 004; the server answers a
      // locked choice with the fallback, USE-4).
      const locked = exhausted && !!option.value && option.value !== fid;
      option.disabled = locked;
      option.textContent = option.textContent.replace(/^🔒 /, "");
      if (locked) {
        option.title = why; // the option's description for assistive technology too
        option.textContent = "🔒 " + option.textContent;
      } else {
        option.removeAttribute("title");
      }
    }
    modelNote.hidden = !exhausted;
    modelNote.textContent = exhausted ? t("Credits exhausted: you can only use {model}", { model: name }) : "";
    // Shown, not chosen: the chat keeps its own model for when the credits are back, so
    // the chat script only re-reads the selector (no "change", which would save the choice).
    if (exhausted && fid && modelSelect.value !== fid && Array.from(modelSelect.options).some((o) => o.value === fid)) {
      modelSelect.value = fid;
      document.dispatchEvent(new CustomEvent("chatmem:model-shown"));
    }
    // Where extension requests are disabled there is no warning, only the locks (USE-3).
    warning.hidden = !(exhausted && usage.extension_requests !== false);
    warningText.textContent = usage.exhausted_by === "session"
      ? t("You have used the included usage for this session window.")
      : t("You have used this week's included usage.");
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
      toast(body && body.already_notified ? t("Administrators were already notified") : t("The administrators were notified"));
    } catch (err) {
      toast(err.status === 409 || err.status === 429 ? t("Administrators were already notified") : err.message);
    } finally { requestButton.disabled = false; }
  });
  // USE-4: the ring opens the usage page (reset times, spending per conversation and model).
  ring.addEventListener("click", () => location.assign("/usage"));
  document.addEventListener("chatmem:profiles", apply);
  window.chatmem.usage = { reload: load, apply };
  load();
})();
