/* Following a run's events with EventSource.  The server numbers every event (TURN-6); when
   the connection drops, EventSource reconnects by itself and sends Last-Event-ID, so the feed
   catches up from where it was.  The stream is closed on `done` or a server `error` event. */
(function () {
  "use strict";
  const { api } = window.chatmem;
  const NAMES = ["delta", "reasoning", "tool_call", "approval", "tool_result", "compaction", "done", "error", "status", "usage"];

  function parse(event) {
    if (!event.data) return {};
    try { return JSON.parse(event.data); } catch (_) { return { text: event.data }; }
  }

  /* handlers: {delta(data), reasoning(data), tool_call(data), approval(data), tool_result(data), compaction(data), done(data), error(data)} */
  function followRun(runId, handlers) {
    const source = new EventSource("/api/v1/runs/" + encodeURIComponent(runId) + "/events");
    let finished = false;
    const finish = (name, data) => {
      if (finished) return;
      finished = true;
      source.close();
      (handlers[name] || (() => {}))(data);
    };
    for (const name of NAMES) {
      source.addEventListener(name, (event) => {
        if (name === "error" && !event.data) return; // a connection error, handled below
        const data = parse(event);
        if (name === "done") finish("done", data);
        else if (name === "error") finish("error", data);
        else if (handlers[name]) handlers[name](data);
      });
    }
    source.onerror = async () => {
      if (finished || source.readyState !== EventSource.CLOSED) return; // reconnecting by itself
      // The server refused the stream (e.g. the run is gone): ask for the run's final state.
      try {
        const run = await api("GET", "/api/v1/runs/" + encodeURIComponent(runId));
        if (run && run.status === "running") return;
        finish("done", { status: run && run.status });
      } catch (err) {
        finish("error", { message: err.message, code: err.code });
      }
    };
    return { close() { finished = true; source.close(); }, runId };
  }

  /* Text of a delta event, whatever the producer called the field. */
  function deltaText(data) {
    if (typeof data === "string") return data;
    return data.text ?? data.content ?? data.delta ?? "";
  }

  window.chatmem.stream = { followRun, deltaText };
})();
