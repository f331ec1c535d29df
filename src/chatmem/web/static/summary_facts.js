/* The fact guard's part of the summary view (CTX-24): the summary's "Kept verbatim" section
   is shown apart from the model's text — each kept fact with its message's date — and, when
   the summary's cap left facts out, "N facts did not fit: ask for them and recall finds
   them".

   Pinned facts ("always remember"): every kept fact has a "Remember always" button, shown
   when facts.js has set window.chatmem.pinFact(fact) (fact: {text, message_id, date, kind});
   it pins the fact and says "Remembered". */
(function () {
  "use strict";
  const { el, t, tn } = window.chatmem;
  const HEADING = /(^|\n)#{1,6}\s*Kept verbatim\s*\n[\s\S]*?(?=\n#{1,6}\s|$)/i;

  /* The model's own words: the summary's text without its kept section. */
  function modelText(text) {
    return String(text || "").replace(HEADING, "").trim();
  }

  function factItem(fact) {
    const pin = el("button", {
      type: "button",
      class: "link-button remember-fact",
      hidden: typeof window.chatmem.pinFact !== "function",
      "data-message-id": fact.message_id || "",
      text: t("Remember always"),
      "aria-label": t("Remember always: {fact}", { fact: fact.text }),
    });
    pin.addEventListener("click", async () => {
      if (typeof window.chatmem.pinFact !== "function") return;
      pin.disabled = true;
      if (await window.chatmem.pinFact(fact)) pin.textContent = t("Remembered");
      else pin.disabled = false;
    });
    return el("li", { class: "kept-fact", "data-message-id": fact.message_id || "" }, [
      el("code", { class: "fact-text", text: fact.text }),
      fact.date ? el("span", { class: "muted small fact-date", text: " " + fact.date + " " }) : " ",
      pin,
    ]);
  }

  /* Fill ``box`` (the summary view's .summary-facts) from a stored summary's record. */
  function render(box, summary) {
    const kept = (summary && Array.isArray(summary.facts_kept)) ? summary.facts_kept : [];
    const count = summary && Number.isInteger(summary.facts_dropped_count)
      ? summary.facts_dropped_count
      : (summary && Array.isArray(summary.facts_dropped) ? summary.facts_dropped.length : 0);
    const list = box.querySelector(".kept-facts");
    const dropped = box.querySelector(".facts-dropped");
    list.replaceChildren(...kept.map(factItem));
    dropped.textContent = count
      ? tn("{n} fact did not fit: ask for it and recall finds it.", "{n} facts did not fit: ask for them and recall finds them.", count)
      : "";
    dropped.hidden = !count;
    box.querySelector(".kept-heading").hidden = !kept.length;
    box.hidden = !kept.length && !count;
  }

  window.chatmem.summaryFacts = { modelText, render };
})();
