/* Icon buttons, for a message's actions and the chat's menu.  An icon is a CSS mask over
   currentColor (app.css `.glyph-<name>`, the drawings in static/icons/), so it follows the
   theme and adds no element a message's content could be mistaken for.  Every button names
   itself in words twice: a visually hidden label (its accessible name, and what a screen
   reader reads) and its tooltip.

   A message's actions sit in its `.message-actions` group (the feed's template), shown on
   hover and focus, always on a touch screen (app.css); `add` puts one more there (Edit,
   Regenerate: recovery.js).  Copy copies the message as it was written: an answer's
   Markdown, a question's text. */
(function () {
  "use strict";
  const { el, t, toast } = window.chatmem;

  function iconButton(icon, label, cls) {
    const button = el("button", { type: "button", class: "msg-action " + (cls || ""), title: label }, [
      el("span", { class: "glyph glyph-" + icon, "aria-hidden": "true" }),
      el("span", { class: "action-label visually-hidden", text: label }),
    ]);
    button.dataset.icon = icon;
    return button;
  }

  /* A new name (and drawing) for a button made by iconButton or the feed's template. */
  function relabel(button, label, icon) {
    button.title = label;
    button.querySelector(".action-label").textContent = label;
    if (icon && icon !== button.dataset.icon) {
      const drawing = button.querySelector(".glyph");
      drawing.classList.remove("glyph-" + button.dataset.icon);
      drawing.classList.add("glyph-" + icon);
      button.dataset.icon = icon;
    }
  }

  function add(node, icon, label, cls, onClick) {
    const button = iconButton(icon, label, cls);
    button.addEventListener("click", onClick);
    node.querySelector(".message-actions").append(button);
    return button;
  }

  /* The clipboard API where the page is a secure context, else the older copy command on a
     hidden text box (a server reached over plain http by its LAN address). */
  async function writeClipboard(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    const box = el("textarea", { class: "visually-hidden", "aria-hidden": "true", tabindex: "-1" });
    box.value = text;
    document.body.append(box);
    box.select();
    const done = document.execCommand("copy");
    box.remove();
    if (!done) throw new Error(t("Could not copy: the browser refused."));
  }

  const restore = new WeakMap(); // button → its timer back to "Copy message"

  async function copy(button, text) {
    try {
      await writeClipboard(text);
    } catch (err) {
      toast(err.message || t("Could not copy: the browser refused."));
      return;
    }
    relabel(button, t("Copied"), "check");
    clearTimeout(restore.get(button));
    restore.set(button, setTimeout(() => relabel(button, t("Copy message"), "copy"), 1500));
  }

  window.chatmem.actions = { iconButton, relabel, add, copy };
})();
