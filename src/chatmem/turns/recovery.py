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

from sqlalchemy import select
from sqlalchemy.orm import Session

from chatmem.store import runs
from chatmem.store.messages import append_message, complete_message
from chatmem.store.tables.conversations import Conversation, Message
from chatmem.store.tables.runs import Run, RunEventRow, ToolCallRow
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


def running_runs(session: Session) -> list[Run]:
    return list(session.scalars(select(Run).where(Run.status == "running")))


def interrupt_run(
    session: Session, run_id: str, *, message: str = INTERRUPTED_MESSAGE
) -> events.Error | None:
    """Ends a running run ``interrupted``; returns its terminal event (stored), which the
    caller publishes so that watchers on every replica see the run end — or None when the
    run had already ended."""
    run = session.get(Run, run_id, with_for_update=True)
    if run is None or run.status != "running":
        return None
    conversation = session.get(Conversation, run.conversation_id)
    if conversation is not None:
        _keep_partial_text(session, run, conversation)
        _mark_unknown_tool_calls(session, run, conversation)
    seq = runs.last_seq(session, run.id) + 1
    event = events.Error(seq, "interrupted", message)
    runs.store_events(session, run.id, [event])
    runs.finish_run(session, run.id, "interrupted", error_code="interrupted", error_message=message)
    return event


def _keep_partial_text(session: Session, run: Run, conversation: Conversation) -> None:
    """The text of the answer the run was streaming — every stored delta of its last step,
    which is every delta any watcher saw (the journal publishes only what it stored) —
    becomes the assistant message, its thinking (the step's ``reasoning`` events) beside it.
    A message already stored for that step that holds only a beginning of it (a checkpoint
    taken mid-answer) is completed, never left short."""
    streamed = session.scalars(
        select(RunEventRow)
        .where(RunEventRow.run_id == run.id, RunEventRow.type.in_(("delta", "reasoning")))
        .order_by(RunEventRow.seq)
    ).all()
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
    for message in session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation.id, Message.role == "assistant")
        .order_by(Message.seq.desc())
        .limit(50)
    ):
        meta = message.meta or {}
        if meta.get("run_id") == run.id and meta.get("step") == last_step:
            if len(message.content) < len(text) and text.startswith(message.content):
                complete_message(session, message, text, {**meta, **thought, "interrupted": True})
            return
    append_message(
        session,
        conversation,
        "assistant",
        text,
        meta={"run_id": run.id, "step": last_step, **thought, "interrupted": True},
    )


def _mark_unknown_tool_calls(session: Session, run: Run, conversation: Conversation) -> None:
    started = session.scalars(
        select(ToolCallRow).where(
            ToolCallRow.run_id == run.id, ToolCallRow.status.in_(("started", "waiting"))
        )
    ).all()
    for call in started:
        status, text = (
            ("not_run", NOT_MADE_TOOL_RESULT)
            if call.status == "waiting"
            else ("unknown", UNKNOWN_TOOL_RESULT)
        )
        answered = session.scalar(
            select(Message.id).where(
                Message.conversation_id == conversation.id,
                Message.role == "tool",
                Message.tool_call_id == call.call_id,
            )
        )
        if answered is None:
            append_message(
                session,
                conversation,
                "tool",
                text,
                tool_call_id=call.call_id,
                meta={"run_id": run.id, "tool": call.name, "status": status},
            )
        runs.tool_finished(session, call.id, status, text)
