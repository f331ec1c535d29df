/* Following the end of the feed.  While the reader is at the end, a streamed answer keeps the
   feed there; once they scroll up (to read), it stops following them — and stays stopped when
   the answer ends and the feed is drawn again — until they come back to the end themselves
   or press "Jump to latest", which is shown whenever they are away from the end. */
(function () {
  "use strict";
  const feed = document.getElementById("feed");
  const jump = document.getElementById("jump-latest");
  const AT_END = 32; // px from the end that still count as "at the end"
  let following = true;
  let lastTop = 0;

  function atEnd() { return feed.scrollHeight - feed.scrollTop - feed.clientHeight <= AT_END; }

  function show() { jump.hidden = following || atEnd(); }

  /* To the end, following it from now on (the reader sent a message, pressed the button). */
  function toEnd() {
    following = true;
    feed.scrollTop = feed.scrollHeight;
    lastTop = feed.scrollTop;
    show();
  }

  /* After the feed grew or was drawn again: to the end if the reader follows it, else they
     stay where they are. */
  function settle() {
    if (following) toEnd();
    else show();
  }

  feed.addEventListener("scroll", () => {
    const top = feed.scrollTop;
    if (atEnd()) following = true;
    else if (top < lastTop - 1) following = false; // the reader went up
    lastTop = top;
    show();
  }, { passive: true });

  jump.addEventListener("click", () => {
    feed.scrollTo({ top: feed.scrollHeight, behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
    following = true;
    jump.hidden = true;
    const draft = document.getElementById("draft");
    if (draft) draft.focus({ preventScroll: true }); // the button is gone: focus where one writes
  });

  window.chatmem.scroll = { toEnd, settle, following: () => following, atEnd };
})();
