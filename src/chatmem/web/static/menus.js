/* Menu buttons (disclosure pattern): on a phone the top bar's links and the chat's tools fold
   behind a button with aria-expanded that shows its panel; the chat's actions are a menu at
   every width.  The button names the panel it controls in `data-menu`.  Opened from the
   keyboard, focus moves to the first item the menu showed;
   Escape closes it and returns focus to the button; so does choosing an item, clicking
   outside or tabbing out.  On a wide screen the top bar's panel is laid out inline (app.css)
   and its button is not shown. */
(function () {
  "use strict";
  const FOCUSABLE = "a[href], button:not([disabled]), select:not([disabled]), input:not([disabled])";

  for (const button of document.querySelectorAll("button[data-menu]")) {
    const panel = document.getElementById(button.dataset.menu);
    if (!panel) continue;
    const isOpen = () => button.getAttribute("aria-expanded") === "true";
    const set = (open) => {
      button.setAttribute("aria-expanded", String(open));
      panel.classList.toggle("open", open);
    };
    const close = (refocus) => {
      if (!isOpen()) return;
      set(false);
      if (refocus) button.focus();
    };

    button.addEventListener("click", (event) => {
      const open = !isOpen();
      const shown = open ? new Set(Array.from(panel.querySelectorAll(FOCUSABLE)).filter((n) => n.checkVisibility())) : null;
      set(open);
      // A click from the keyboard has no pointer position (detail 0): go to the first item
      // the menu showed (a panel may keep some items on screen while closed: the chat's
      // folder and project on a wide screen).
      if (open && event.detail === 0) {
        const first = Array.from(panel.querySelectorAll(FOCUSABLE)).find((n) => !shown.has(n) && n.checkVisibility());
        if (first) first.focus();
      }
    });
    for (const node of [button, panel]) {
      node.addEventListener("keydown", (event) => {
        if (event.key === "Escape" && isOpen()) { event.preventDefault(); close(true); }
      });
    }
    // Choosing an item closes the menu (a select stays open until its value changes).
    panel.addEventListener("click", (event) => {
      const item = event.target.closest("a, button");
      if (item && isOpen()) close(false);
    });
    panel.addEventListener("change", () => close(true));
    document.addEventListener("click", (event) => {
      if (isOpen() && !panel.contains(event.target) && !button.contains(event.target)) close(false);
    });
    panel.addEventListener("focusout", (event) => {
      const to = event.relatedTarget;
      if (isOpen() && to && !panel.contains(to) && to !== button) close(false);
    });
  }
})();
