/* The colour theme picker in the top bar, beside the language: the user's own setting
   (PATCH /api/v1/me {"theme"}), kept on the server.  The server renders it on <html
   data-theme> so the page is drawn in it from the first paint; "system" leaves the attribute
   off and app.css follows prefers-color-scheme.  A change applies at once, without a reload. */
(function () {
  "use strict";
  const root = document.documentElement;
  const system = window.matchMedia("(prefers-color-scheme: dark)");

  /* The theme the page is drawn in: the chosen one, else the system's (for MCP Apps). */
  function current() {
    const chosen = root.dataset.theme;
    if (chosen === "light" || chosen === "dark") return chosen;
    return system.matches ? "dark" : "light";
  }
  window.chatmem.currentTheme = current;

  function apply(theme) {
    if (theme === "light" || theme === "dark") root.dataset.theme = theme;
    else delete root.dataset.theme;
    document.dispatchEvent(new CustomEvent("chatmem:theme", { detail: current() }));
  }

  const picker = document.getElementById("theme-select");
  if (!picker) return;

  picker.addEventListener("change", async () => {
    const before = root.dataset.theme || "system";
    const theme = picker.value;
    apply(theme);
    picker.disabled = true;
    try {
      await window.chatmem.api("PATCH", "/api/v1/me", { theme });
    } catch (err) {
      apply(before);
      picker.value = before;
      window.chatmem.toast(err.message);
    } finally {
      picker.disabled = false;
    }
  });
})();
