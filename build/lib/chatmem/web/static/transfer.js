/* Export (a plain download link) and import (an XHR upload, so the browser reports upload
   progress for files of hundreds of megabytes; the server reads the body as a stream). */
(function () {
  "use strict";
  const { cookie, toast, t, tn } = window.chatmem;
  const input = document.getElementById("import-file");
  const box = document.getElementById("import-progress-box");
  const bar = document.getElementById("import-progress");
  const label = document.getElementById("import-progress-label");
  const result = document.getElementById("import-result");

  function describe(body) {
    if (!body || typeof body !== "object") return t("Import finished.");
    const n = body.imported ?? body.created ?? body.conversations_imported ?? (Array.isArray(body.conversations) ? body.conversations.length : null);
    const skipped = body.skipped ?? body.duplicates ?? 0;
    if (typeof n !== "number") return t("Import finished.");
    let text = tn("Imported {n} conversation.", "Imported {n} conversations.", n);
    if (skipped) text += " " + tn("{n} already present.", "{n} already present.", skipped);
    return text;
  }

  input.addEventListener("change", () => {
    const file = input.files && input.files[0];
    if (!file) return;
    const form = new FormData();
    form.append("file", file, file.name);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/v1/import");
    xhr.setRequestHeader("Accept", "application/json");
    const token = cookie("chatmem_csrf");
    if (token) xhr.setRequestHeader("X-CSRF-Token", token);
    box.hidden = false; result.hidden = true;
    bar.value = 0; label.textContent = t("Uploading {file}…", { file: file.name });
    xhr.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100);
    });
    xhr.upload.addEventListener("load", () => { bar.removeAttribute("value"); label.textContent = t("Importing…"); });
    xhr.addEventListener("load", () => {
      box.hidden = true;
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (_) { body = null; }
      if (xhr.status >= 200 && xhr.status < 300) {
        result.textContent = describe(body);
        result.className = "";
        if (window.chatmem.sidebar) { window.chatmem.sidebar.reload(); window.chatmem.sidebar.loadFolders(); }
      } else {
        result.textContent = t("Import failed: {error}", { error: (body && body.error && body.error.message) || xhr.statusText });
        result.className = "form-error";
      }
      result.hidden = false;
      input.value = "";
    });
    xhr.addEventListener("error", () => { box.hidden = true; toast(t("Import failed: network error")); input.value = ""; });
    xhr.send(form);
  });
})();
