"""TURN-3: runs whose process died are marked ``interrupted``; nothing is replayed.

For each such run, in one transaction:

- the text the model had streamed in the unfinished step (its stored ``delta`` events that
  have no assistant message yet) becomes the assistant message, marked ``interrupted`` — what
  the user saw is kept;
- every tool call recorded ``started`` without a result becomes ``unknown``, and gets a tool
  message saying so, so the call is never separated from a result (CTX-20) and is never made
  again automatically; an "ask first" call still ``waiting`` for the user was never made
  (``not_run``, PROV-6);
- the run ends ``interrupted`` with a final ``error`` event (code ``interrupted``), so
  watchers replaying its events see it end.

A new turn in the conversation then continues on the stored history.
"""

from __future__ import annotations

from chatmem.store import runs, tool_calls
from chatmem.store.runs import RunRecord
from chatmem.store.sessions import Session
from chatmem.turns import events

INTERRUPTED_MESSAGE = (
    "The server restarted while this turn ran. What was completed is kept; send a message to "
    "continue."
)
UNKNOWN_TOOL_RESULT = (
    "The result of this tool call is unknown: the server restarted while it ran. It was not "
    "repeated automatically."
)
NOT_MADE_TOOL_RESULT = "Not run: the server restarted before this tool call was approved."


def interrupt_run(
    session: Session, run_id: str, *, message: str = INTERRUPTED_MESSAGE
) -> events.Error | None:
    """Ends a running run ``interrupted``; returns its terminal event (stored), which the
    caller publishes so that watchers on every replica see the run end — or None when the
    run had already ended."""
    run = runs.lock_running_run(session, run_id)
    if run is None:
        return None
    if runs.conversation_exists(session, run.conversation_id):
        _keep_partial_text(session, run)
        _mark_unknown_tool_calls(session, run)
    seq = runs.last_seq(session, run.id) + 1
    event = events.Error(seq, "interrupted", message)
    runs.store_events(session, run.id, [event])
    runs.finish_run(session, run.id, "interrupted", error_code="interrupted", error_message=message)
    return event


def _keep_partial_text(session: Session, run: RunRecord) -> None:
    """The text of the answer the run was streaming — every stored delta of its last step,
    which is every delta any watcher saw (the journal publishes only what it stored) —
    becomes the assistant message, its thinking (the step's ``reasoning`` events) beside it.
    A message already stored for that step that holds only a beginning of it (a checkpoint
    taken mid-answer) is completed, never left short."""
    streamed = runs.streamed_events(session, run.id)
    if not streamed:
        return
    pieces = [events.from_stored(e.seq, e.type, e.data) for e in streamed]
    last_step = max(e.step for e in pieces if isinstance(e, events.Delta | events.Reasoning))

    def joined(kind: type[events.Delta | events.Reasoning]) -> str:
        return "".join(e.text for e in pieces if isinstance(e, kind) and e.step == last_step)

    text, reasoning = joined(events.Delta), joined(events.Reasoning)
    if not text:
        return  # it was still thinking: no answer to keep
    thought = {"reasoning": reasoning} if reasoning else {}
    stored = runs.step_message(session, run.conversation_id, run.id, last_step)
    if stored is not None:
        if len(stored.content) < len(text) and text.startswith(stored.content):
            meta = {**stored.meta, **thought, "interrupted": True}
            runs.complete_step_message(session, stored.id, text, meta)
        return
    runs.add_run_message(
        session,
        run.conversation_id,
        "assistant",
        text,
        meta={"run_id": run.id, "step": last_step, **thought, "interrupted": True},
    )


def _mark_unknown_tool_calls(session: Session, run: RunRecord) -> None:
    for call in tool_calls.open_tool_calls(session, run.id):
        status, text = (
            ("not_run", NOT_MADE_TOOL_RESULT)
            if call.status == "waiting"
            else ("unknown", UNKNOWN_TOOL_RESULT)
        )
        if not runs.tool_call_answered(session, run.conversation_id, call.call_id):
            runs.add_run_message(
                session,
                run.conversation_id,
                "tool",
                text,
                tool_call_id=call.call_id,
                meta={"run_id": run.id, "tool": call.name, "status": status},
            )
        tool_calls.tool_finished(session, call.id, status, text)
