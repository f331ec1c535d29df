/* PROJ-2: images attached to a question, shown under it in the feed (the bytes come from
   the owner-only content URL; the browser shows only image types inline). */
(function () {
  "use strict";
  const { el } = window.chatmem;

  function show(files) {
    for (const f of files || []) {
      if (!f.message_id || !f.mime || !f.mime.startsWith("image/") || !f.width) continue;
      const node = document.querySelector('#feed .message[data-id="' + CSS.escape(f.message_id) + '"]');
      if (!node || node.querySelector('img[data-file="' + CSS.escape(f.id) + '"]')) continue;
      const img = el("img", { src: f.content_url, alt: f.name, "data-file": f.id, loading: "lazy", width: String(f.width), height: String(f.height) });
      node.querySelector(".content").after(el("figure", { class: "attached-image" }, [img, el("figcaption", { class: "muted small", text: f.name })]));
    }
  }

  window.chatmem.images = { show };
})();
