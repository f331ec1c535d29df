/* The sign-in form: POST /api/v1/auth/login sets the session cookie, then go where we were headed. */
(function () {
  "use strict";
  const form = document.getElementById("signin-form");
  const error = document.getElementById("signin-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const name = form.elements.name.value.trim();
    const password = form.elements.password.value;
    if (!name || !password) {
      error.textContent = "Enter your name and password.";
      error.hidden = false;
      return;
    }
    try {
      await window.chatmem.api("POST", "/api/v1/auth/login", { name, password });
      location.assign(form.dataset.next || "/");
    } catch (err) {
      error.textContent = err.status === 401 || err.status === 403 || err.status === 404
        ? "Wrong name or password." : err.message;
      error.hidden = false;
    }
  });
})();
