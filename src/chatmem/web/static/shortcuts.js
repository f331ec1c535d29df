/* Keyboard shortcuts on the chat page, listed in a dialog that "?" opens (and the top bar's
   "Keyboard shortcuts").  Chosen not to fight the browser or a screen reader: the letters go
   with Ctrl (⌘ on a Mac) and Shift; a single key ("?", Esc) is ignored while typing in a
   field; Esc stops a running answer from anywhere but another field (a search box clears
   itself), unless a dialog or a menu takes it first.

     Ctrl/⌘+Shift+O  new chat          Ctrl/⌘+K        search the chats
     Shift+Esc       the composer      Esc             stop the running answer
     Ctrl/⌘+Shift+M  the memory window ?               this list */
(function () {
  "use strict";
  const dialog = document.getElementById("shortcuts-dialog");
  const opener = document.getElementById("show-shortcuts");
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent || "");
  if (mac) for (const key of dialog.querySelectorAll(".mod-key")) key.textContent = "⌘";

  function typingIn(target) {
    return !!(target && target.closest && target.closest("input, textarea, select, [contenteditable]:not([contenteditable='false'])"));
  }

  /* A field other than the composer: its own Esc (a search box clears itself). */
  function otherField(target) { return typingIn(target) && target.id !== "draft"; }

  /* A dialog or a popover is open: Escape and the keys are its own. */
  function somethingOpen() {
    return !!document.querySelector("dialog[open], [role='dialog']:not(dialog):not([hidden]), .menu-panel.open, .sidebar.open");
  }

  let returnTo = null;
  function showHelp() {
    if (dialog.open) return;
    returnTo = document.activeElement;
    dialog.showModal();
  }
  dialog.addEventListener("close", () => {
    const back = returnTo && returnTo.isConnected && returnTo.offsetParent !== null ? returnTo : document.getElementById("draft");
    returnTo = null;
    if (back) back.focus();
  });
  if (opener) opener.addEventListener("click", showHelp);

  function focusSearch() {
    const open = document.getElementById("open-sidebar");
    if (open && open.offsetParent !== null) { open.click(); return; } // the phone's drawer
    const search = document.getElementById("search");
    search.focus();
    search.select();
  }

  function focusComposer() {
    const draft = document.getElementById("draft");
    draft.focus();
    draft.setSelectionRange(draft.value.length, draft.value.length);
  }

  function stopRun() {
    const stop = document.getElementById("stop");
    if (stop.hidden || stop.disabled) return false;
    stop.click();
    return true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing || event.altKey) return;
    const mod = mac ? event.metaKey && !event.ctrlKey : event.ctrlKey && !event.metaKey;
    const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    let done = true;
    if (mod && event.shiftKey && key === "o") document.getElementById("new-chat").click();
    else if (mod && !event.shiftKey && key === "k") focusSearch();
    else if (mod && event.shiftKey && key === "m") { if (!dialog.open) window.chatmem.memory.open(); }
    else if (!mod && event.shiftKey && key === "Escape" && !somethingOpen()) focusComposer();
    else if (!mod && !event.shiftKey && !event.ctrlKey && !event.metaKey && key === "Escape" && !somethingOpen() && !otherField(event.target)) done = stopRun();
    else if (!mod && !event.ctrlKey && !event.metaKey && key === "?" && !typingIn(event.target) && !somethingOpen()) showHelp();
    else done = false;
    if (done) event.preventDefault();
  });
})();
