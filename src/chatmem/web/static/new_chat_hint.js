/* "When to open a new chat" (seed 004): once a conversation has been compacted and its next
   request again fills more than half of the model's window, answers start forgetting what was
   said early on.  A hint above the input says so, with "Continue in a new chat" (CTX-23, the
   summary carried over) and "Move to a project" beside it.  It is shown once per
   conversation: dismissing it, or taking one of its ways, is remembered in localStorage
   under the conversation's id, and it never comes back there. */
(function () {
  "use strict";
  const memory = window.chatmem.memory;
  const hint = document.getElementById("new-chat-hint");
  const continueButton = document.getElementById("hint-continue");
  const projectButton = document.getElementById("hint-project");
  const result = document.getElementById("hint-result");
  const HALF = 0.5;

  const key = (id) => "chatmem:new-chat-hint:" + id;
  function done(id) {
    try { return localStorage.getItem(key(id)) === "dismissed"; } catch (_) { return false; }
  }
  function remember(id) {
    try { localStorage.setItem(key(id), "dismissed"); } catch (_) { /* storage refused: hidden for this page only */ }
  }

  function compacted(plan) {
    return memory.hasSummary() || !!(plan.tokens && plan.tokens.summary > 0);
  }

  function update(plan) {
    const id = memory.conversationId();
    const tokens = plan && plan.tokens;
    const past = !!tokens && tokens.window > 0 && tokens.used / tokens.window > HALF;
    const show = !!id && past && compacted(plan) && !done(id);
    if (!show) result.hidden = true;
    hint.hidden = !show;
  }

  function close() {
    const id = memory.conversationId();
    if (id) remember(id);
    hint.hidden = true;
  }

  document.addEventListener("chatmem:plan", (event) => update(event.detail));
  document.addEventListener("chatmem:conversation", () => { hint.hidden = true; });
  document.getElementById("hint-dismiss").addEventListener("click", close);
  continueButton.addEventListener("click", async () => {
    const id = memory.conversationId();
    await memory.continueChat(continueButton, result);
    if (result.hidden && id) remember(id); // continued: this chat's hint has done its work
  });
  /* On a phone the project choice is in the chat's menu: it opens once this click is over (a
     click that ends outside an open menu closes it, menus.js), with the focus on the choice. */
  projectButton.addEventListener("click", () => {
    close();
    const select = document.getElementById("project-select");
    const menu = document.getElementById("chat-tools-button");
    setTimeout(() => {
      if (!select.checkVisibility() && menu) menu.click();
      select.focus();
      select.classList.add("highlight");
      setTimeout(() => select.classList.remove("highlight"), 1500);
    }, 0);
  });
})();
