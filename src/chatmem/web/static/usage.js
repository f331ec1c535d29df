/* Usage and limits (USE-2, USE-3): the ring next to the model selector fills to the higher of
   the session and weekly use and turns red when the included usage is used up; then the
   selector names the fallback model and locks the others, and a warning above the input names
   the cause with "Request extension" (unless extension requests are disabled).  The note
   "Credits exhausted: you can only use …" links to the usage page (seed 004).  The selector
   shows the model that actually answers — the fallback, even in a chat whose own model is
   locked (the server answers with the fallback, USE-4) — and each locked model says why and
   when it unlocks.
   The ring is the "Context and usage" button (seed 004): always shown; without limits it
   fills to the conversation's context use (the memory plan's total against the window).
   It opens a small dialog with both, as text: the context window's use and the compaction
   threshold, the session and week usage with their reset times, and links to the memory
   window and the usage page.  Escape, a click outside or a link closes it; Escape and the
   ring give focus back to the ring. */
(function () {
  "use strict";
  const { api, toast, fmtTokens, fmtPercent } = window.chatmem;
  const t = window.chatmem.t || ((msgid, vars) => msgid.replace(/\{(\w+)\}/g, (w, k) => (vars && k in vars ? vars[k] : w)));
  const ring = document.getElementById("usage-ring");
  const fill = ring.querySelector(".ring-fill");
  const popover = document.getElementById("usage-popover");
  const upContext = document.getElementById("up-context");
  const upThreshold = document.getElementById("up-threshold");
  const upSession = document.getElementById("up-session");
  const upWeek = document.getElementById("up-week");
  const upUnlimited = document.getElementById("up-unlimited");
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
  function resetsAt(part) {
    if (part === undefined) part = usage.exhausted_by === "week" ? usage.week : usage.session;
    const when = part && part.resets_at ? new Date(part.resets_at) : null;
    if (!when || isNaN(when)) return "";
    return when.toLocaleString(window.chatmem.locale || [], { weekday: "short", hour: "2-digit", minute: "2-digit" });
  }

  const limitedBy = (part) => !!(part && part.included);
  const limited = () => !!usage && (limitedBy(usage.session) || limitedBy(usage.week));

  /* The conversation's context use, 0…1, from the memory plan (none yet: 0). */
  function contextShare() {
    const plan = window.chatmem.memory ? window.chatmem.memory.plan() : null;
    const tokens = plan && plan.tokens;
    return tokens && tokens.window ? Math.min(1, tokens.used / tokens.window) : 0;
  }

  /* Without limits the ring is the memory window's picture in small: the plan's segments in
     their colours (memory_bar.js segments(): they sum to the window, never past it), drawn as arcs
     of one circle each (pathLength 100, offset by the segments before it).  Only what is sent
     is drawn: the ring is the context's use, as .ring-fill's share and the popover say, so
     free and the answer reserve are its empty track (a grey arc at its end would read as a
     spinner).  .ring-fill keeps the share in its dasharray, not drawn under the arcs. */
  const SVG = "http://www.w3.org/2000/svg";
  const svg = ring.querySelector("svg");
  const segs = document.createElementNS(SVG, "g");
  segs.setAttribute("class", "ring-segs");
  svg.append(segs);

  function drawSegments(show) {
    const memory = window.chatmem.memory;
    const plan = show && memory ? memory.plan() : null;
    const picture = plan && plan.tokens ? window.chatmem.memoryBar.segments(plan.tokens) : null;
    svg.classList.toggle("ring-segmented", !!picture);
    segs.replaceChildren();
    if (!picture || !picture.window) return;
    let start = 0;
    for (const part of picture.parts) {
      const length = (part.tokens / picture.window) * 100;
      if (part.key !== "free" && part.key !== "reserve" && length > 0) {
        const arc = document.createElementNS(SVG, "circle");
        for (const [k, v] of Object.entries({ class: "ring-seg seg-" + part.key, cx: 18, cy: 18, r: 15, pathLength: 100, "data-key": part.key, "data-tokens": part.tokens, "stroke-dasharray": length + " " + (100 - length), "stroke-dashoffset": String(-start) })) arc.setAttribute(k, String(v));
        segs.append(arc);
      }
      start += length;
    }
  }

  /* With limits the ring fills to the higher of session and week, in one colour; without, to
     the context, in the plan's segments. */
  function fillRing() {
    const share = limited()
      ? Math.min(1, typeof usage.ring === "number" ? usage.ring : Math.max(fraction(usage.session), fraction(usage.week)))
      : contextShare();
    fill.setAttribute("stroke-dasharray", Math.round(share * 100) + " 100");
    drawSegments(!limited());
    ring.classList.toggle("exhausted", !!usage && !!usage.exhausted);
  }

  /* A window's line, "Session: 45% used, resets Mon 14:00", worded by `say(percent, time)`. */
  function usageLine(node, part, say) {
    node.hidden = !limitedBy(part);
    if (!node.hidden) node.textContent = say(fmtPercent(Math.round(Math.min(1, fraction(part)) * 100)), resetsAt(part));
  }

  /* The popover's values as text (seed 004). */
  function renderPopover() {
    const plan = window.chatmem.memory ? window.chatmem.memory.plan() : null;
    const tokens = plan && plan.tokens;
    upContext.textContent = tokens
      ? t("{used} of {window} tokens ({percent})", { used: fmtTokens(tokens.used), window: fmtTokens(tokens.window), percent: fmtPercent(Math.round(contextShare() * 100)) })
      : "–";
    const threshold = plan && plan.compaction && plan.compaction.threshold;
    upThreshold.hidden = !threshold;
    upThreshold.textContent = threshold ? t("Auto-compress from {tokens}", { tokens: fmtTokens(threshold) }) : "";
    usageLine(upSession, usage && usage.session, (percent, time) => (time
      ? t("Session: {percent} used, resets {time}", { percent, time })
      : t("Session: {percent} used", { percent })));
    usageLine(upWeek, usage && usage.week, (percent, time) => (time
      ? t("This week: {percent} used, resets {time}", { percent, time })
      : t("This week: {percent} used", { percent })));
    upUnlimited.hidden = limited();
  }

  function apply() {
    fillRing();
    if (!popover.hidden) renderPopover();
    if (!usage) return;
    const exhausted = !!usage.exhausted;
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
    catch (_) { usage = null; } // no usage on this server: the ring shows the context
    apply();
  }

  /* "Request extension" (USE-3), from the warning here or the memory window's ways out. */
  async function requestExtension(button) {
    button.disabled = true;
    try {
      const body = await api("POST", "/api/v1/usage/extension-requests");
      toast(body && body.already_notified ? t("Administrators were already notified") : t("The administrators were notified"));
    } catch (err) {
      toast(err.status === 409 || err.status === 429 ? t("Administrators were already notified") : err.message);
    } finally { button.disabled = false; }
  }
  requestButton.addEventListener("click", () => requestExtension(requestButton));
  function setOpen(open, refocus) {
    popover.hidden = !open;
    ring.setAttribute("aria-expanded", String(open));
    if (open) { renderPopover(); popover.focus(); load(); }
    else if (refocus) ring.focus();
  }
  ring.addEventListener("click", () => setOpen(popover.hidden, false));
  popover.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); setOpen(false, true); }
  });
  ring.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !popover.hidden) { event.preventDefault(); setOpen(false, true); }
  });
  document.addEventListener("click", (event) => {
    if (!popover.hidden && !popover.contains(event.target) && !ring.contains(event.target)) setOpen(false, false);
  });
  document.getElementById("up-memory").addEventListener("click", () => {
    setOpen(false, false);
    if (window.chatmem.memory) window.chatmem.memory.open();
  });
  // The context share follows the memory plan (typing, a new turn, another conversation).
  document.addEventListener("chatmem:plan", () => { fillRing(); if (!popover.hidden) renderPopover(); });
  document.addEventListener("chatmem:profiles", apply);
  window.chatmem.usage = { reload: load, apply, requestExtension };
  load();
})();
