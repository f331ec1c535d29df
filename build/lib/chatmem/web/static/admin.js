/* The admin console (USE-5): extension requests to grant (for the current period or
   permanently) or decline; users to add, disable, give a new password or their own limits,
   with their usage now; the shared models' order for Auto; the tool servers' health; and the
   audit log of everything administrators did.  Only the /api/v1/admin routes are used, so a
   script can do all of it too; every change reloads what it touches, and the audit log. */
(function () {
  "use strict";
  const { api, items, el, toast, t, fmtPrice } = window.chatmem;
  const $ = (id) => document.getElementById(id);
  const money = (x) => fmtPrice(x || 0, "USD");
  const when = (iso) => (iso ? new Date(iso).toLocaleString(document.documentElement.lang || []) : "");

  async function act(fn, done) {
    try { await fn(); if (done) toast(done); }
    catch (err) { toast(err.message); }
    await Promise.all([loadRequests(), loadUsers(), loadProfiles(), loadActions()]);
  }

  function usd(input) {
    const value = input.value.trim();
    return value === "" ? null : Number(value);
  }

  /* ---------- extension requests ---------- */
  const LIMIT = () => ({ session: t("Session"), week: t("Week") });

  function requestRow(r) {
    let answer;
    if (r.status === "pending") {
      const amount = el("input", { type: "number", min: "0.01", step: "0.01", value: "5", class: "amount", "aria-label": t("Amount in USD for {user}", { user: r.user_name }) });
      const scope = el("select", { "aria-label": t("How long for {user}", { user: r.user_name }) }, [
        el("option", { value: "period", text: t("This period") }),
        el("option", { value: "permanent", text: t("Permanently") }),
      ]);
      const grant = el("button", { type: "button", class: "primary", text: t("Grant") });
      grant.addEventListener("click", () => act(
        () => api("POST", "/api/v1/admin/extension-requests/" + r.id + "/grant", { amount_usd: Number(amount.value), scope: scope.value }),
        t("Granted"),
      ));
      const decline = el("button", { type: "button", text: t("Decline") });
      decline.addEventListener("click", () => act(() => api("POST", "/api/v1/admin/extension-requests/" + r.id + "/decline"), t("Declined")));
      answer = el("div", { class: "row" }, [el("span", { text: "$" }), amount, scope, grant, decline]);
    } else if (r.status === "granted") {
      answer = el("span", { text: r.scope === "permanent"
        ? t("Granted {amount}, permanently", { amount: money(r.amount_usd) })
        : t("Granted {amount} for the period", { amount: money(r.amount_usd) }) });
    } else {
      answer = el("span", { class: "muted", text: t("Declined") });
    }
    return el("tr", { "data-id": r.id, class: "request-" + r.status }, [
      el("td", { text: r.user_name }),
      el("td", { text: when(r.created_at) }),
      el("td", { text: LIMIT()[r.reason] || "—" }),
      el("td", {}, [answer]),
    ]);
  }

  async function loadRequests() {
    try {
      const list = items(await api("GET", "/api/v1/admin/extension-requests"), "items");
      $("admin-requests").querySelector("tbody").replaceChildren(...list.map(requestRow));
      $("admin-requests-empty").hidden = list.length > 0;
    } catch (err) { toast(err.message); }
  }

  /* ---------- users ---------- */
  function windowCell(w) {
    const text = w.included != null
      ? t("{spent} of {included}", { spent: money(w.spent), included: money(w.included) })
      : t("{spent}, no limit", { spent: money(w.spent) });
    return el("td", { class: w.included != null && w.spent >= w.included ? "exhausted" : null, text });
  }

  function userRow(u) {
    const session = el("input", { type: "number", min: "0", step: "0.01", value: u.session_limit_usd ?? "", placeholder: t("default"), "aria-label": t("Session limit of {user}", { user: u.name }) });
    const week = el("input", { type: "number", min: "0", step: "0.01", value: u.week_limit_usd ?? "", placeholder: t("default"), "aria-label": t("Weekly limit of {user}", { user: u.name }) });
    const saveLimits = el("button", { type: "button", text: t("Save limits") });
    saveLimits.addEventListener("click", () => act(
      () => api("PATCH", "/api/v1/admin/users/" + u.id, { session_limit_usd: usd(session), week_limit_usd: usd(week) }),
      t("Limits saved"),
    ));
    const toggle = el("button", { type: "button", class: u.disabled ? null : "danger", text: u.disabled ? t("Enable") : t("Disable") });
    toggle.addEventListener("click", () => act(
      () => api("PATCH", "/api/v1/admin/users/" + u.id, { disabled: !u.disabled }),
      u.disabled ? t("Enabled") : t("Disabled"),
    ));
    const password = el("input", { type: "password", autocomplete: "new-password", placeholder: t("New password"), "aria-label": t("New password for {user}", { user: u.name }) });
    const reset = el("button", { type: "button", text: t("Reset password") });
    reset.addEventListener("click", () => {
      if (!password.value) { password.focus(); return; }
      act(() => api("PATCH", "/api/v1/admin/users/" + u.id, { password: password.value }), t("Password reset"));
    });
    const name = el("td", {}, [
      el("strong", { text: u.name }),
      u.is_admin ? el("span", { class: "badge", text: t("admin") }) : null,
      u.disabled ? el("span", { class: "badge", text: t("disabled") }) : null,
    ]);
    return el("tr", { "data-id": u.id, "data-name": u.name, class: u.disabled ? "disabled" : null }, [
      name,
      windowCell(u.usage.session),
      windowCell(u.usage.week),
      el("td", {}, [el("div", { class: "row" }, [session, week, saveLimits])]),
      el("td", {}, [el("div", { class: "row" }, [toggle, password, reset])]),
    ]);
  }

  async function loadUsers() {
    try {
      const list = items(await api("GET", "/api/v1/admin/users"), "items");
      $("admin-users").querySelector("tbody").replaceChildren(...list.map(userRow));
    } catch (err) { toast(err.message); }
  }

  $("admin-add-user").addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { name: $("new-user-name").value.trim(), password: $("new-user-password").value, is_admin: $("new-user-admin").checked };
    act(async () => {
      await api("POST", "/api/v1/admin/users", body);
      $("admin-add-user").reset();
    }, t("User added"));
  });

  /* ---------- shared models and Auto ---------- */
  function profileRow(p) {
    const rank = el("input", { type: "number", min: "1", max: "1000", step: "1", value: p.auto_rank ?? "", placeholder: t("never"), "aria-label": t("Auto rank of {model}", { model: p.name }) });
    const save = el("button", { type: "button", text: t("Save") });
    save.addEventListener("click", () => act(
      () => api("PATCH", "/api/v1/admin/profiles/" + p.id, { auto_rank: rank.value === "" ? null : Number(rank.value) }),
      t("Saved"),
    ));
    const price = p.free ? t("free") : money(p.input_price_per_mtok) + " / " + money(p.output_price_per_mtok);
    return el("tr", { "data-id": p.id }, [
      el("td", { text: p.name + (p.model && p.model !== p.name ? " · " + p.model : "") }),
      el("td", { text: price }),
      el("td", {}, [el("div", { class: "row" }, [rank, save])]),
    ]);
  }

  async function loadProfiles() {
    try {
      const list = items(await api("GET", "/api/v1/admin/profiles"), "items");
      $("admin-profiles").querySelector("tbody").replaceChildren(...list.map(profileRow));
      $("admin-profiles-empty").hidden = list.length > 0;
    } catch (err) { toast(err.message); }
  }

  /* ---------- tool servers ---------- */
  async function loadServers() {
    try {
      const list = items(await api("GET", "/api/v1/mcp-servers"), "items");
      $("admin-servers").replaceChildren(...list.map((s) => {
        const h = s.health || {};
        return el("li", { class: "mcp-server state-" + (h.state || "disabled") }, [
          el("div", { class: "mcp-head" }, [
            el("span", { class: "profile-name", text: s.name }),
            el("span", { class: "badge mcp-state", text: s.enabled ? (h.state || t("Not connected")) : t("Disabled") }),
            el("span", { class: "muted small", text: s.url }),
          ]),
          h.last_error ? el("p", { class: "small mcp-error", text: t("Last error ({time}): {error}", { time: when(h.last_error_at), error: h.last_error }) }) : null,
        ]);
      }));
      $("admin-servers-empty").hidden = list.length > 0;
    } catch (err) { toast(err.message); }
  }

  /* ---------- the audit log ---------- */
  const ACTIONS = () => ({
    grant_extension: t("granted an extension"),
    decline_extension: t("declined an extension"),
    add_user: t("added a user"),
    update_user: t("changed a user"),
    rank_profile: t("set Auto's order"),
    add_shared_profile: t("added a shared model"),
    update_shared_profile: t("changed a shared model"),
    delete_shared_profile: t("deleted a shared model"),
    add_mcp_server: t("added a tool server"),
    update_mcp_server: t("changed a tool server"),
    delete_mcp_server: t("deleted a tool server"),
  });

  function detailText(a) {
    return Object.entries(a.details || {}).map(([k, v]) => k + ": " + (v === null ? "—" : v)).join(", ");
  }

  async function loadActions() {
    try {
      const list = items(await api("GET", "/api/v1/admin/actions"), "items");
      $("admin-actions").querySelector("tbody").replaceChildren(...list.map((a) => el("tr", {}, [
        el("td", { text: when(a.created_at) }),
        el("td", { text: a.admin_name }),
        el("td", { text: (ACTIONS()[a.action] || a.action) + " — " + detailText(a) }),
      ])));
      $("admin-actions-empty").hidden = list.length > 0;
    } catch (err) { toast(err.message); }
  }

  loadRequests(); loadUsers(); loadProfiles(); loadServers(); loadActions();
})();
