/* The user's API tokens, on the Models page: each one's label and date with Revoke, and a
   form that makes a new one and shows its secret once (GET/POST/DELETE /api/v1/tokens). */
(function () {
  "use strict";
  const { api, items, el, toast, t, locale } = window.chatmem;
  const list = document.getElementById("token-list");
  if (!list) return;
  const empty = document.getElementById("tokens-empty");
  const form = document.getElementById("token-form");
  const label = document.getElementById("token-label");
  const fresh = document.getElementById("token-new");
  const secret = document.getElementById("token-secret");

  function when(iso) {
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString(locale);
  }

  function row(token) {
    const name = token.label || t("(no label)");
    const revoke = el("button", { type: "button", text: t("Revoke"), "aria-label": t("Revoke the token “{label}”", { label: name }) });
    revoke.addEventListener("click", async () => {
      if (!confirm(t("Revoke the token “{label}”? Programs using it stop working.", { label: name }))) return;
      revoke.disabled = true;
      try { await api("DELETE", "/api/v1/tokens/" + encodeURIComponent(token.id)); await load(); }
      catch (err) { revoke.disabled = false; toast(err.message); }
    });
    return el("li", { class: "token-item" }, [
      el("span", { class: "token-label", text: name }),
      el("span", { class: "muted small", text: t("made {time}", { time: when(token.created_at) }) }),
      el("span", { class: "muted small", text: token.last_used_at ? t("last used {time}", { time: when(token.last_used_at) }) : t("never used") }),
      revoke,
    ]);
  }

  async function load() {
    try {
      const tokens = items(await api("GET", "/api/v1/tokens"));
      list.replaceChildren(...tokens.map(row));
      empty.hidden = tokens.length > 0;
    } catch (err) { toast(err.message); }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const made = await api("POST", "/api/v1/tokens", { label: label.value.trim() });
      secret.textContent = made.token;
      fresh.hidden = false;
      label.value = "";
      await load();
    } catch (err) { toast(err.message); }
    finally { button.disabled = false; }
  });

  load();
})();
