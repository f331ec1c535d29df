/* The sign-in form: POST /api/v1/auth/login sets the session cookie, then go where we were headed. */
(function () {
  "use strict";
  const { t } = window.chatmem;
  /* SEC-3: only a path on this site, as the server checks it: one leading "/", no "//" or
     backslash (browsers read "/\\host" as "//host"), no control characters or spaces (they
     drop tabs and newlines: "/\t/host" is "//host"); and it must resolve to this origin. */
  function sameSitePath(next) {
    if (typeof next !== "string" || next.length > 2048 || !/^\/(?![\/\\])[^\\\u0000-\u0020\u007f-\u009f\u2028\u2029\ufeff]*$/.test(next)) return "/";
    try {
      const url = new URL(next, location.origin);
      return url.origin === location.origin ? url.pathname + url.search + url.hash : "/";
    } catch (_) {
      return "/";
    }
  }
  const form = document.getElementById("signin-form");
  const error = document.getElementById("signin-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const name = form.elements.name.value.trim();
    const password = form.elements.password.value;
    if (!name || !password) {
      error.textContent = t("Enter your name and password.");
      error.hidden = false;
      return;
    }
    try {
      await window.chatmem.api("POST", "/api/v1/auth/login", { name, password });
      location.assign(sameSitePath(form.dataset.next));
    } catch (err) {
      error.textContent = err.status === 401 || err.status === 403 || err.status === 404
        ? t("Wrong name or password.")
        : err.code === "rate_limited" ? t("Too many failed sign-ins. Wait a little and try again.") : err.message;
      error.hidden = false;
    }
  });
})();
