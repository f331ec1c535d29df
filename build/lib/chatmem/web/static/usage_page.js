/* The usage page (USE-4): the session and weekly bars, each with when it resets ("resets in
   2 h 14 min, at 15:42" in the browser's time), the fallback in force and why, spending per
   model and per conversation over the last 7 days, and the user's extension requests with
   the administrators' answers.  Everything comes from GET /api/v1/usage. */
(function () {
  "use strict";
  const { api, el, toast, t, fmtPrice } = window.chatmem;
  const $ = (id) => document.getElementById(id);

  function money(x) { return fmtPrice(x || 0, "USD"); }

  /* "in 2 h 14 min" from now until an ISO time (at least one minute). */
  function inWords(iso) {
    const minutes = Math.max(1, Math.ceil((Date.parse(iso) - Date.now()) / 60000));
    const h = Math.floor(minutes / 60), m = minutes % 60;
    if (h >= 48) return t("{d} d {h} h", { d: Math.floor(h / 24), h: h % 24 });
    if (h > 0) return t("{h} h {m} min", { h, m });
    return t("{m} min", { m });
  }

  /* The local time of an ISO time, with the day when it is not today. */
  function localTime(iso) {
    const when = new Date(iso);
    const time = when.toLocaleTimeString(document.documentElement.lang || [], { hour: "2-digit", minute: "2-digit" });
    if (when.toDateString() === new Date().toDateString()) return time;
    return when.toLocaleDateString(document.documentElement.lang || [], { weekday: "short", day: "numeric", month: "short" }) + " " + time;
  }

  function bar(id, window_, label) {
    const box = $(id);
    const included = window_.included;
    const share = included ? Math.min(1, window_.spent / included) : 0;
    box.querySelector(".bar-amount").textContent = included != null
      ? t("{spent} of {included}", { spent: money(window_.spent), included: money(included) })
      : t("{spent} spent, no limit", { spent: money(window_.spent) });
    const fill = box.querySelector(".bar-fill");
    fill.style.width = Math.round(share * 100) + "%";
    box.classList.toggle("exhausted", !!included && window_.spent >= included);
    const track = box.querySelector(".bar-track");
    track.setAttribute("role", "meter");
    track.setAttribute("aria-label", label);
    track.setAttribute("aria-valuemin", "0");
    track.setAttribute("aria-valuemax", "100");
    track.setAttribute("aria-valuenow", String(Math.round(share * 100)));
    const reset = box.querySelector(".bar-reset");
    reset.textContent = window_.resets_at
      ? t("Resets in {delay}, at {time}", { delay: inWords(window_.resets_at), time: localTime(window_.resets_at) })
      : t("Nothing spent in this window.");
  }

  function rows(tbody, list, cells) {
    if (!list.length) {
      tbody.replaceChildren(el("tr", {}, [el("td", { colspan: "3", class: "muted", text: t("Nothing spent in the last 7 days.") })]));
      return;
    }
    tbody.replaceChildren(...list.map((item) => {
      const values = cells(item);
      return el("tr", {}, values.map((c, i) => el("td", { class: i === values.length - 1 ? "num" : null }, [c])));
    }));
  }

  const REASON = () => ({
    session: t("you have used the included usage for this session window"),
    week: t("you have used this week's included usage"),
  });
  const STATUS = () => ({ pending: t("Waiting for an answer"), granted: t("Granted"), declined: t("Declined") });

  function requestLine(r) {
    const asked = t("Asked {when}", { when: localTime(r.created_at) });
    let outcome = STATUS()[r.status] || r.status;
    if (r.status === "granted") {
      outcome = r.scope === "permanent"
        ? t("Granted: {amount} more, permanently", { amount: money(r.amount_usd) })
        : t("Granted: {amount} more for the current period", { amount: money(r.amount_usd) });
    }
    return el("li", { class: "request-" + r.status }, [el("span", { class: "muted small", text: asked + " · " }), el("strong", { text: outcome })]);
  }

  function show(u) {
    const limited = u.session.included != null || u.week.included != null;
    $("usage-unlimited").hidden = limited;
    bar("bar-session", u.session, t("Session"));
    bar("bar-week", u.week, t("Week"));
    $("bar-session").querySelector("h2").textContent = t("Session ({hours} h window)", { hours: u.session.hours });
    const box = $("usage-fallback");
    box.hidden = !u.exhausted;
    if (u.exhausted) {
      const why = REASON()[u.exhausted_by] || "";
      $("usage-fallback-text").textContent = u.fallback
        ? t("Credits exhausted: {why}. Your messages are answered by {name} until it resets.", { why, name: u.fallback.name || t("the base model") })
        : t("Credits exhausted: {why}. Paid models are locked until it resets.", { why });
    }
    $("usage-request").hidden = !(u.exhausted && u.extension_requests !== false);
    rows($("usage-models").querySelector("tbody"), u.week.models || [], (m) => [
      m.name || m.model || t("Deleted model"),
      window.chatmem.fmtInt(m.prompt_tokens || 0) + " / " + window.chatmem.fmtInt(m.completion_tokens || 0),
      money(m.cost),
    ]);
    rows($("usage-conversations").querySelector("tbody"), u.week.conversations || [], (c) => [
      c.conversation_id && c.title !== null
        ? el("a", { href: "/c/" + encodeURIComponent(c.conversation_id), text: c.title || t("Untitled") })
        : t("Deleted conversation"),
      money(c.cost),
    ]);
    $("usage-total").textContent = t("Spent in total: {amount}", { amount: money(u.total) });
    const list = $("usage-requests");
    list.replaceChildren(...(u.requests || []).map(requestLine));
    $("usage-requests-empty").hidden = (u.requests || []).length > 0;
  }

  async function load() {
    try { show(await api("GET", "/api/v1/usage")); }
    catch (err) { toast(err.message); }
  }

  $("usage-request").addEventListener("click", async () => {
    try {
      const body = await api("POST", "/api/v1/usage/extension-requests");
      toast(body && body.already_notified ? t("Administrators were already notified") : t("The administrators were notified"));
      await load();
    } catch (err) { toast(err.message); }
  });
  load();
  // The "resets in" wording follows the clock.
  setInterval(load, 60000);
})();
