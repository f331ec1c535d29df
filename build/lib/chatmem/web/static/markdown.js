/* Markdown in the feed (PROJ-3).  markdown-it parses (CommonMark plus tables, strikethrough
   and bare links), highlight.js colours fenced code in its common languages, and DOMPurify
   sanitises what comes out, so a message can never bring a script, an event handler, a
   javascript:/data: URL, a form, a frame or a style with it:
   - markdown-it runs with `html: false` (raw HTML in a message is shown as text) and accepts
     only http(s) and mailto links;
   - DOMPurify then keeps only the tags and attributes this renderer produces, only the class
     names it sets, and only http(s)/mailto URLs; every link opens in a new tab with
     rel="noopener noreferrer";
   - the page's Content-Security-Policy forbids inline scripts and styles besides.
   Images are shown as links (a remote image in an answer would be a tracking pixel).

   An answer is rendered block by block (blocks.js).  While it streams, `update` keeps the
   finished blocks as the very same DOM nodes (no flicker, no re-layout, a selection in them
   survives) and renders again only the last, growing one, without colouring its code.

   Hostile Markdown is costly: parsing grows with the characters, sanitising and layout with
   the elements (a 100 KB table of one-letter cells is 50,000 of them, seconds of a frozen
   page).  So past LIMITS a block, or the rest of an answer, is shown as plain text with a
   Render button (offered once the answer is complete) that renders it all anyway. */
(function () {
  "use strict";
  const t = window.chatmem.t || ((msgid) => msgid);
  const SAFE_URL = /^(?:https?:|mailto:)/i;
  const CLASS_OK = /^(?:hljs(?:-[\w-]+)?|language-[\w+#.-]+|code-block|code-head|code-lang|table-box|align-(?:left|center|right))$/;
  const TAGS = ["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
    "pre", "code", "span", "em", "strong", "s", "a", "table", "thead", "tbody", "tr", "th", "td", "div"];

  const md = window.markdownit({ html: false, linkify: true, breaks: true, typographer: false });
  md.validateLink = (url) => SAFE_URL.test(url.trim());

  // Table alignment comes as a style attribute, which the page's policy would refuse: a class.
  md.core.ruler.push("align_classes", (state) => {
    for (const token of state.tokens) {
      if (token.type !== "th_open" && token.type !== "td_open") continue;
      const style = token.attrGet("style");
      const match = style && /text-align:(left|center|right)/.exec(style);
      token.attrs = (token.attrs || []).filter(([name]) => name !== "style");
      if (match) token.attrSet("class", "align-" + match[1]);
    }
  });
  // A wide table scrolls inside the message instead of widening it.
  md.renderer.rules.table_open = () => '<div class="table-box"><table>\n';
  md.renderer.rules.table_close = () => "</table></div>\n";
  md.renderer.rules.image = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const alt = self.renderInlineAsText(token.children || [], options, env) || token.attrGet("src");
    return '<a href="' + md.utils.escapeHtml(token.attrGet("src") || "") + '">' + md.utils.escapeHtml(alt) + "</a>";
  };

  function highlighted(code, lang) {
    const hljs = window.hljs;
    if (hljs && lang && hljs.getLanguage(lang)) {
      try { return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value; }
      catch (_) { /* fall through to plain text */ }
    }
    return md.utils.escapeHtml(code);
  }

  md.renderer.rules.fence = (tokens, idx, options, env) => {
    const token = tokens[idx];
    const lang = (token.info || "").trim().split(/\s+/)[0].slice(0, 40);
    const esc = md.utils.escapeHtml;
    const cls = lang ? ' class="hljs language-' + esc(lang.replace(/[^\w+#.-]/g, "")) + '"' : ' class="hljs"';
    return '<div class="code-block"><div class="code-head"><span class="code-lang">' + esc(lang || "text") +
      '</span></div><pre><code' + cls + ">" + (env.growing ? esc(token.content) : highlighted(token.content, lang.toLowerCase())) + "</code></pre></div>\n";
  };

  const purify = window.DOMPurify(window);
  purify.addHook("uponSanitizeAttribute", (node, data) => {
    if (data.attrName === "class") {
      data.attrValue = data.attrValue.split(/\s+/).filter((c) => CLASS_OK.test(c)).join(" ");
      if (!data.attrValue) data.keepAttr = false;
    }
  });
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      if (node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    }
  });
  const CONFIG = {
    ALLOWED_TAGS: TAGS,
    ALLOWED_ATTR: ["href", "title", "class", "start"],
    ALLOWED_URI_REGEXP: SAFE_URL,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  };

  async function copy(button, code) {
    try {
      await navigator.clipboard.writeText(code.textContent);
      button.textContent = t("Copied");
    } catch (_) {
      button.textContent = t("Copy failed");
    }
    setTimeout(() => { button.textContent = t("Copy"); }, 1500);
  }

  /* The sanitised fragment for markdown-it's `html`, with a Copy button on every code block.
     Code and tables that may scroll sideways take the focus, so the keyboard can scroll them. */
  function sanitized(html) {
    const fragment = purify.sanitize(html, CONFIG);
    for (const box of fragment.querySelectorAll("pre, .table-box")) box.tabIndex = 0;
    for (const block of fragment.querySelectorAll(".code-block")) {
      const code = block.querySelector("code");
      const head = block.querySelector(".code-head");
      if (!code || !head) continue;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link-button copy-code";
      button.textContent = t("Copy");
      button.addEventListener("click", () => copy(button, code));
      head.append(button);
    }
    return fragment;
  }

  // Sanitising and laying out an element costs ≈0.07 ms on a laptop (a phone is slower): a
  // block is ≈0.1 s of work once, the growing block ≈35 ms at every frame, an answer ≈0.3 s.
  const LIMITS = {
    blockChars: 20000, // a longer block is plain text, unparsed
    blockElements: 1500, // a block that would make more elements is plain text
    growingElements: 500, // the same for the block still streaming, until it is finished
    answerChars: 100000, // past this much Markdown, or this many elements, the rest is plain
    answerElements: 4000,
  };
  const boxes = new WeakMap(); // a box → { pieces, full, split }: what update() shows in it

  /* A piece of an answer: `src` (one block, or the `rest` of the answer) and its nodes.  A
     Markdown piece gets its nodes in sanitizeAll. */
  function markdownPiece(src, growing, html, elements) {
    return { src, html, nodes: [], elements, growing };
  }

  /* The nodes of the new Markdown pieces, all sanitised at once: a call of the sanitiser costs
     ≈1 ms however small its input (3,000 short paragraphs one by one took 3 s, at once 0.9 s).
     Each piece comes wrapped in a <div>, unwrapped after. */
  function sanitizeAll(pieces) {
    if (!pieces.length) return;
    const fragment = sanitized(pieces.map((piece) => "<div>" + piece.html + "</div>").join(""));
    const wrappers = fragment.children;
    pieces.forEach((piece, i) => {
      piece.nodes = Array.from(wrappers.length === pieces.length ? wrappers[i].childNodes : sanitized(piece.html).childNodes);
      piece.html = "";
    });
  }

  /* Plain text in block-level chunks of about CHUNK characters, cut after a line where it
     can: the browser lays out again only the chunk that grew, and skips those out of sight
     (app.css) — one text node of 2 MB takes seconds at every change. */
  const CHUNK = 8192;
  function appendPlain(holder, more) {
    while (more) {
      if (!holder.lastChild) holder.append(document.createElement("div"));
      const size = holder.lastChild.textContent.length;
      const room = CHUNK - size;
      let cut = more.length <= room ? more.length : more.lastIndexOf("\n", room - 1) + 1;
      if (!cut && !size) cut = room; // a line longer than a chunk is cut
      if (cut) holder.lastChild.append(more.slice(0, cut));
      if (cut < more.length) holder.append(document.createElement("div"));
      more = more.slice(cut);
    }
  }

  /* `how`: { live (no Render button yet), growing (the block is plain only until it is
     finished), rest (the rest of the answer, not one block) }. */
  function plainPiece(src, answer, how) {
    const node = document.createElement("div");
    node.className = "md-plain";
    const text = document.createElement("div");
    text.className = "md-plain-text";
    appendPlain(text, src);
    if (!how.live) {
      const bar = document.createElement("p");
      bar.className = "md-plain-bar";
      const render = document.createElement("button");
      render.type = "button";
      render.className = "link-button";
      render.textContent = t("Render");
      render.addEventListener("click", () => renderAll(node.parentNode, answer));
      bar.append(t("Too long to format quickly: shown as plain text."), " ", render);
      node.append(bar);
    }
    node.append(text);
    return Object.assign({ src, nodes: [node], elements: 0, plain: true }, how);
  }

  /* A plain piece grown by what came since: no parsing, it stays plain as it grows. */
  function grown(prior, src, live) {
    if (prior.live !== live || !src.startsWith(prior.src)) return null;
    appendPlain(prior.nodes[0].lastChild, src.slice(prior.src.length));
    prior.src = src;
    return prior;
  }

  /* The piece shown before for this block, if it still is what the block shows. */
  function kept(prior, src, growing, live) {
    if (!prior || prior.rest) return null;
    if (prior.plain) return prior.growing && !growing ? null : grown(prior, src, live);
    return prior.src === src && (growing || !prior.growing) ? prior : null;
  }

  /* A new piece for the block `src` within what the answer has `spent`; null once the rest of
     the answer is to be plain text. */
  function fresh(src, growing, live, answer, spent) {
    if (spent.full) return markdownPiece(src, growing, md.render(src, { growing }), 0);
    if (spent.chars >= LIMITS.answerChars) return null;
    if (src.length > LIMITS.blockChars) return plainPiece(src, answer, { live });
    const html = md.render(src, { growing });
    const elements = html.split("</").length - 1; // text comes escaped: these are tags
    if (elements > (growing ? LIMITS.growingElements : LIMITS.blockElements)) {
      return plainPiece(src, answer, { live, growing });
    }
    if (spent.elements + elements > LIMITS.answerElements) return null;
    return markdownPiece(src, growing, html, elements);
  }

  /* Show `text` in `box`.  `live` while the answer streams: its last block is still growing. */
  function update(box, text, live) {
    text = text || "";
    const state = boxes.get(box) || { pieces: [], full: false, split: window.chatmem.blocks.splitter() };
    boxes.set(box, state);
    const blocks = state.split(text);
    const old = state.pieces;
    const pieces = [];
    // Where the block is, and what the Markdown above it cost (plain text costs nothing).
    const spent = { full: state.full, offset: 0, chars: 0, elements: 0 };
    for (let i = 0; i < blocks.length; i += 1) {
      const prior = pieces.length === i ? old[i] : null; // reused pieces stay a prefix
      const rest = prior && prior.rest ? grown(prior, text.slice(spent.offset), live) : null;
      if (rest) { pieces.push(rest); break; }
      const growing = live && i === blocks.length - 1;
      const piece = kept(prior, blocks[i], growing, live) || fresh(blocks[i], growing, live, text, spent);
      if (!piece) { pieces.push(plainPiece(text.slice(spent.offset), text, { live, rest: true })); break; }
      pieces.push(piece);
      spent.offset += blocks[i].length;
      if (!piece.plain) spent.chars += blocks[i].length;
      spent.elements += piece.elements;
    }
    sanitizeAll(pieces.filter((piece) => piece.html));
    const shown = new Set(pieces);
    for (const piece of old) if (!shown.has(piece)) for (const node of piece.nodes) node.remove();
    for (const piece of pieces) for (const node of piece.nodes) if (node.parentNode !== box) box.append(node);
    state.pieces = pieces;
  }

  /* The Render button: all of the answer as Markdown, whatever it costs (the reader asked). */
  function renderAll(box, text) {
    if (!box) return;
    boxes.set(box, { pieces: [], full: true, split: window.chatmem.blocks.splitter() });
    box.replaceChildren();
    update(box, text, false);
  }

  /* The sanitised fragment for a whole answer (within LIMITS, as update shows it). */
  function render(text) {
    const box = document.createElement("div");
    update(box, text, false);
    const fragment = document.createDocumentFragment();
    fragment.append(...box.childNodes);
    return fragment;
  }

  window.chatmem.markdown = { render, update };
})();
