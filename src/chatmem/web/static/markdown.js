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

   While an answer streams, `update` renders the whole text into a detached fragment and
   swaps in only the top-level blocks that changed: the finished blocks above stay the very
   same DOM nodes (no flicker, no re-layout, a selection in them survives). */
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

  md.renderer.rules.fence = (tokens, idx) => {
    const token = tokens[idx];
    const lang = (token.info || "").trim().split(/\s+/)[0].slice(0, 40);
    const esc = md.utils.escapeHtml;
    const cls = lang ? ' class="hljs language-' + esc(lang.replace(/[^\w+#.-]/g, "")) + '"' : ' class="hljs"';
    return '<div class="code-block"><div class="code-head"><span class="code-lang">' + esc(lang || "text") +
      '</span></div><pre><code' + cls + ">" + highlighted(token.content, lang.toLowerCase()) + "</code></pre></div>\n";
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

  /* The sanitised fragment for `text`, with a Copy button on every code block.  Code and
     tables that may scroll sideways take the focus, so the keyboard can scroll them too. */
  function render(text) {
    const fragment = purify.sanitize(md.render(text || ""), CONFIG);
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

  /* Show `text` in `box`, replacing only the top-level nodes from the first one that differs. */
  function update(box, text) {
    const next = Array.from(render(text).childNodes);
    const old = Array.from(box.childNodes);
    let same = 0;
    while (same < old.length && same < next.length && old[same].isEqualNode(next[same])) same += 1;
    for (const node of old.slice(same)) node.remove();
    box.append(...next.slice(same));
  }

  window.chatmem.markdown = { render, update };
})();
