/* An answer's top-level Markdown blocks, so markdown.js can render a long answer piece by
   piece and a streaming one can re-render only its last block.  A block ends at a blank line
   outside a fenced code block, unless the next line continues it: an indented line (a list
   item's paragraph or code) or, in a block that is a list, the next item.  A table has no
   blank line, so it is one block.  Blocks keep every character: joined, they are the text
   (trailing blank lines belong to the block above them).

   A block that starts a new one cannot change what the blocks above it render as, with one
   exception left alone: a reference link's definition ("[1]: https://…") serves only its own
   block.

   A streaming answer grows by a few characters at a time: `splitter()` scans only the lines
   that came since its last call (a whole scan of 2 MB is ≈40 ms, too much for every frame). */
(function () {
  "use strict";
  // \x60 is a backtick: a literal one in a regular expression trips up make i18n's extractor.
  const FENCE = /^ {0,3}(\x60{3,}|~{3,})/;
  const ITEM = /^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)/;
  const INDENTED = /^[ \t]/;

  function closes(line, fence) {
    const trimmed = line.trim();
    return /^ {0,3}[\x60~]/.test(line) && trimmed.length >= fence.length &&
      trimmed === fence[0].repeat(trimmed.length);
  }

  /* Where the scan is: `pos` (the next line), `start` (the current block's), `filled` (the
     block has a line that is not blank), `list` (its first line is a list item), `blank` (the
     line before was blank), `fence` (the open fence's marker, "" outside one). */
  function begin() {
    return { pos: 0, start: 0, filled: false, list: false, blank: false, fence: "" };
  }

  /* Take the `line` at `scan.pos` into account; a block it ends goes to `done`. */
  function step(scan, text, line, done) {
    if (scan.fence) {
      if (closes(line, scan.fence)) scan.fence = "";
    } else if (!line.trim()) {
      scan.blank = true;
    } else {
      if (scan.blank && scan.filled && !INDENTED.test(line) && !(scan.list && ITEM.test(line))) {
        done.push(text.slice(scan.start, scan.pos));
        scan.start = scan.pos;
        scan.filled = false;
      }
      if (!scan.filled) scan.list = ITEM.test(line);
      scan.filled = true;
      scan.blank = false;
      const open = FENCE.exec(line);
      if (open) scan.fence = open[1];
    }
    scan.pos += line.length;
  }

  /* A function giving the blocks of its text; called again with a text that extends the one
     before, it goes on from the last complete line (any other text starts it over). */
  function splitter() {
    let seen = "";
    let scan = begin();
    let done = [];
    return (text) => {
      if (!text.startsWith(seen)) { scan = begin(); done = []; }
      seen = text;
      for (let newline = text.indexOf("\n", scan.pos); newline >= 0; newline = text.indexOf("\n", scan.pos)) {
        step(scan, text, text.slice(scan.pos, newline + 1), done);
      }
      // The line still growing may already start a block; the scan goes on from before it.
      const ahead = Object.assign({}, scan);
      const blocks = done.slice();
      if (ahead.pos < text.length) step(ahead, text, text.slice(ahead.pos), blocks);
      if (ahead.start < text.length) blocks.push(text.slice(ahead.start));
      return blocks;
    };
  }

  /* The blocks of `text`, in order. */
  function split(text) { return splitter()(text); }

  window.chatmem.blocks = { split, splitter };
})();
