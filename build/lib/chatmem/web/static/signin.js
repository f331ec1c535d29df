/* The sign-in form: POST /api/v1/auth/login sets the session cookie, then go where we were headed. */
(function () {
  "use strict";
  const { t } = window.chatmem;
  /* SEC-3: where to go after signing in is the server's decision alone (web/security.py
     safe_next_path, which normalises the path as this browser will): the page asks it with
     /?next=… and follows its redirect, whatever data-next holds by then. */
  function afterSignIn(next) {
    return typeof next === "string" && next !== "" && next !== "/" ? "/?next=" + encodeURIComponent(next) : "/";
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
      location.assign(afterSignIn(form.dataset.next));
    } catch (err) {
      error.textContent = err.status === 401 || err.status === 403 || err.status === 404
        ? t("Wrong name or password.")
        : err.code === "rate_limited" ? t("Too many failed sign-ins. Wait a little and try again.") : err.message;
      error.hidden = false;
    }
  });
})();
