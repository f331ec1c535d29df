/* The memory plan as a picture, drawn by memory.js (the memory window's stacked bar, the
   counter's small one) and usage.js (the ring). */
(function () {
  "use strict";
  const { el, fmtTokens, fmtPercent, t } = window.chatmem;

  /* One segment per row of the breakdown, in the table's order (the table is the legend): what is
     sent, then free — the empty track between — then the answer reserve at the window's end,
     so the edge of what is sent reads against the threshold line.  Each is tokens / window
     wide.  plan.py's breakdown has used = instructions + tools + summary + messages + files +
     images + apps + facts (the rows do not overlap: pinned files are in "files") and
     used + reserve + free = window with free never below zero — so a plan that does not fit
     has used + reserve > window.  The segments are therefore derived, not copied: each part
     that is sent, then the reserve, takes what it asks for of what is left of the window
     (clipped, never past 100 %), and free is the remainder.  They sum to the window exactly;
     what was clipped (the reserve first, then the last parts sent) is ``over``, the bar's
     overflow state. */
  const SENT = ["instructions", "tools", "summary", "messages", "files", "images", "apps", "facts"];

  function segments(tokens) {
    const total = Math.max(0, Math.round((tokens && tokens.window) || 0));
    let left = total;
    let over = 0;
    const take = (key) => {
      const wanted = Math.max(0, Math.round((tokens && tokens[key]) || 0));
      const taken = Math.min(wanted, left);
      left -= taken;
      over += wanted - taken;
      return { key, tokens: taken };
    };
    const sent = SENT.map(take);
    const reserve = take("reserve");
    return { window: total, parts: [...sent, { key: "free", tokens: left }, reserve], over };
  }

  /* A segment's share of the window, in percent (0 for an empty window). */
  const share = (n, total) => (total > 0 ? (n / total) * 100 : 0);

  /* Draws the segments into ``box`` (a flex row): a span each, data-key and data-tokens for
     tests and tools, its width its share; a segment of 0 tokens takes no width. */
  function draw(box, picture) {
    box.replaceChildren(...picture.parts.map((part) => {
      const seg = el("span", { class: "seg seg-" + part.key, "data-key": part.key, "data-tokens": String(part.tokens) });
      seg.style.width = share(part.tokens, picture.window) + "%";
      return seg;
    }));
  }

  /* The bar's words for those who do not see it: the table stays the data. */
  function label(plan, picture, percentUsed) {
    const tokens = plan.tokens;
    const parts = [t("{used} of {window} tokens ({percent})", { used: fmtTokens(tokens.used), window: fmtTokens(tokens.window), percent: fmtPercent(percentUsed) })];
    const threshold = plan.compaction && plan.compaction.threshold;
    if (threshold) parts.push(t("Auto-compress from {tokens}", { tokens: fmtTokens(threshold) }));
    if (picture.over > 0) parts.push(t("{tokens} past the window", { tokens: fmtTokens(picture.over) }));
    return parts.join(". ");
  }

  window.chatmem.memoryBar = { segments, draw, label, share };
})();
